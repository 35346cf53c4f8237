"""The docs hold together: every relative link in README.md and docs/*.md reaches a file (and its #anchor a
heading), every "docs/X.md, 'Heading'" citation in the code names a page and a heading that exist, no code cites a
section number of a document the repository does not hold, and no text a visitor sees names a repository path."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
CODE_DIRS = ("s2d2", "components", "benchmarks", "scripts", "tests")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^\s*(```|~~~)")
# A citation: the page, then its headings in quotes ("docs/algorithm.md, 'One step' and 'The 2L verifier'").
CITE = re.compile(r"docs/([\w./-]+\.md)((?:,? (?:and |to )?['\"][^'\"]{1,80}['\"])*)")
SECTION = "\u00a7"  # the section sign
QUOTED = re.compile(r"['\"]([^'\"]{1,80})['\"]")


def prose_lines(text: str) -> list[str]:
    """The lines of a markdown page outside fenced code blocks, with inline code spans removed."""
    out, fenced = [], False
    for line in text.split("\n"):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            out.append(re.sub(r"`[^`]*`", "", line))
    return out


def headings(path: Path) -> list[str]:
    """Heading texts of a markdown page (markup backticks dropped), in order."""
    out, fenced = [], False
    for line in path.read_text(encoding="utf-8").split("\n"):
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced and re.match(r"^#{1,6} ", line):
            out.append(line.lstrip("#").strip().replace("`", ""))
    return out


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for h in headings(path):
        s = slug(h)
        out.add(s if s not in seen else f"{s}-{seen[s]}")
        seen[s] = seen.get(s, 0) + 1
    return out


def test_slug_follows_github():
    assert slug("Acceptance, first rejection and the residual") == "acceptance-first-rejection-and-the-residual"
    assert slug("Code benchmarks (HumanEval / MBPP format)") == "code-benchmarks-humaneval--mbpp-format"
    assert slug("D2F: pipelined decoding, and S2D2 on the pipeline") == "d2f-pipelined-decoding-and-s2d2-on-the-pipeline"


def page_links() -> list[tuple[str, str]]:
    out = []
    for page in PAGES:
        for line in prose_lines(page.read_text(encoding="utf-8")):
            out += [(str(page.relative_to(ROOT)), target) for target in LINK.findall(line)]
    return out


def test_the_pages_have_links_to_check():
    targets = {t for _, t in page_links()}
    assert "docs/algorithm.md" in targets and any("#" in t for t in targets)


@pytest.mark.parametrize("page,target", page_links())
def test_every_relative_link_reaches_a_file_and_heading(page, target):
    if re.match(r"^[a-z]+:", target):  # https:, mailto: — outside the repository
        return
    path, _, anchor = target.partition("#")
    source = ROOT / page
    dest = (source.parent / path).resolve() if path else source
    assert dest.is_file(), f"{page}: link {target!r} points at nothing"
    if anchor:
        assert dest.suffix == ".md" and anchor in anchors(dest), f"{page}: no heading for #{anchor} in {dest.name}"


def code_files() -> list[Path]:
    files = [ROOT / "app.py"]
    for d in CODE_DIRS:
        files += sorted((ROOT / d).rglob("*.py"))
    return [f for f in files if f.is_file() and f != Path(__file__).resolve()]  # this module states the rules


def flat(text: str) -> str:
    """Code text with comment markers and line breaks folded away, so a citation may wrap across lines."""
    return re.sub(r"\s+", " ", re.sub(r"\n\s*#+", " ", text))


def citations() -> list[tuple[str, str, tuple[str, ...]]]:
    out = []
    for f in code_files():
        for m in CITE.finditer(flat(f.read_text(encoding="utf-8"))):
            out.append((str(f.relative_to(ROOT)), m.group(1), tuple(QUOTED.findall(m.group(2)))))
    return out


def test_the_code_cites_docs_pages_by_heading():
    cited = citations()
    assert any(page == "algorithm.md" and heads for _, page, heads in cited)


@pytest.mark.parametrize("source,page,heads", citations())
def test_every_docs_citation_in_the_code_names_a_page_and_heading(source, page, heads):
    path = ROOT / "docs" / page
    assert path.is_file(), f"{source} cites docs/{page}, which does not exist"
    known = set(headings(path))
    for h in heads:
        assert h in known, f"{source} cites docs/{page}, '{h}': no such heading"


def test_no_code_cites_a_section_number():
    offenders = [str(f.relative_to(ROOT)) for f in code_files() if SECTION in f.read_text(encoding="utf-8")]
    assert offenders == []


def visitor_strings(path: Path) -> list[str]:
    """String constants of a module that are not docstrings (what the app can put on a page)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docs.add(id(first.value))
    return [n.value for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs]


def test_no_text_a_visitor_sees_names_a_repository_doc_or_a_section_sign():
    bad = []
    for f in [ROOT / "app.py", *sorted((ROOT / "components").rglob("*.py"))]:
        bad += [(f.name, s[:60]) for s in visitor_strings(f) if SECTION in s or re.search(r"docs/[\w.-]+\.md", s)]
    assert bad == []


def test_the_readme_is_a_two_minute_read_and_a_space_card():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.split("\n")) <= 300
    assert text.startswith("---\n") and "\nsdk: gradio\n" in text.split("\n---\n", 1)[0]
    # CI runs the README's first pytest command: the whole suite.
    assert re.search(r"^python -m pytest.*$", text, re.M).group(0) == "python -m pytest -q"
