"""Issue 38 row 8 (small words): a count agrees with its noun ("1 step", never "1 steps") wherever the app writes
one, and the app's text uses only marks every font has (✓ ■ ◷ ⚠ …), never an emoji that a system without an emoji
font draws as an empty box (✅ ⏳ ⏹ ⏸ 📌, or any mark forced to emoji style by U+FE0F)."""
from __future__ import annotations

import ast
import pathlib
import re

from components.views.plural import plural
from components.run.handlers import progress_line

ROOT = pathlib.Path(__file__).resolve().parents[2]
NOUNS = ("steps|blocks|tokens|forwards|lanes|positions|runs|cells|edits|rounds|drafts|characters|questions|prompts|"
         "sequences|visitors|calls|entries|files|items|verifications|rejections|decisions|masks|rows|columns|values")
COUNTED = re.compile(rf"^\s({NOUNS})\b")
# Code points drawn as emoji by default (Unicode's Emoji_Presentation) in the blocks the app's marks come from, the
# variation selector that forces emoji style, and every pictograph plane character.
EMOJI = re.compile("[\u231a\u231b\u23e9-\u23ec\u23f0\u23f3\u23f8-\u23fa\u25fd\u25fe\u2614\u2615\u2648-\u2653\u267f"
                   "\u2693\u26a1\u26aa\u26ab\u26bd\u26be\u26c4\u26c5\u26ce\u26d4\u26ea\u26f2\u26f3\u26f5\u26fa\u26fd"
                   "\u2705\u270a\u270b\u2728\u274c\u274e\u2753-\u2755\u2757\u2795-\u2797\u27b0\u27bf\u2b1b\u2b1c"
                   "\u2b50\u2b55\ufe0f\U0001f000-\U0001faff]")


def _app_sources() -> list[pathlib.Path]:
    files = sorted((ROOT / "components").rglob("*.py")) + sorted((ROOT / "components").rglob("*.js"))
    return files + sorted((ROOT / "s2d2").rglob("*.py")) + [ROOT / "app.py"]


def test_plural_agrees_with_the_count():
    assert [plural(n, "step") for n in (0, 1, 2)] == ["0 steps", "1 step", "2 steps"]
    assert plural(1, "entry", "entries") == "1 entry" and plural(3, "entry", "entries") == "3 entries"
    assert plural(2000, "character", grouped=True) == "2,000 characters"


def test_a_run_of_one_step_says_1_step():
    line = progress_line({"steps": 1, "commits": [[0, "a", "accepted"]], "elapsed": 0.5})
    assert "1 step," in line and "1 token committed" in line and "steps" not in line


def test_no_count_is_written_before_a_plural_noun_without_plural():
    """Every f-string that writes a whole number right before a plural noun goes through plural() (a float, a
    formatted rate such as 0.870 forwards/token, is left as it is)."""
    found = []
    for path in sorted((ROOT / "components").rglob("*.py")) + [ROOT / "app.py"]:
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.JoinedStr):
                continue
            for a, b in zip(node.values, node.values[1:]):
                if not (isinstance(a, ast.FormattedValue) and isinstance(b, ast.Constant)
                        and isinstance(b.value, str) and COUNTED.match(b.value)):
                    continue
                spec = ast.unparse(a.format_spec) if a.format_spec else ""
                is_fmt = isinstance(a.value, ast.Call) and getattr(a.value.func, "id", "") == "fmt"
                constant = isinstance(a.value, ast.Name) and a.value.id.isupper()  # a fixed bound, never 1
                if "." not in spec and not is_fmt and not constant:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {{{ast.unparse(a.value)}}}{b.value[:20]}")
    assert not found, found


def test_the_app_text_uses_no_emoji_an_ordinary_font_lacks():
    found = []
    for path in _app_sources():
        rel = str(path.relative_to(ROOT))
        for number, line in enumerate(path.read_text().splitlines(), 1):
            for mark in EMOJI.findall(line):
                found.append(f"{rel}:{number}: U+{ord(mark):04X}")
    assert not found, found
