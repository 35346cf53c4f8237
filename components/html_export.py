"""A self-contained HTML replay of one trace: one .html file for a course page or a slide deck — no server, no
Python, no network.

Each frame is the app's own view of that step (replay.STEP_VIEWS: canvas, strip, summary, and the legend), so the file
shows exactly the token states the Replay tab shows at the same step, and follows any change to those views. Frames
share most of their text, so each is stored as indices into one table of fragments: joining a frame's fragments
gives back the app's HTML byte for byte. The data sits in a <script type="application/json"> block with every `<`,
U+2028/9 and lone surrogates written as JSON escapes, so it holds no `</script>` and no `<!--`, and the file is valid
UTF-8 whatever the trace holds. Every other string from the trace is HTML-escaped.

Bounded: a page is at most MAX_HTML_BYTES (5 MiB; `max_bytes` changes it). A replay that would be larger stops after
the last step that fits, and the page and the caller say so; a trace whose first step alone does not fit is refused
(ExportError).

`python -m components.html_export TRACE.json [OUT.html] [--step N] [--max-mb M]` writes one (gradio is not imported).
"""
from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from s2d2.trace import Trace

from .canvas import visible_text
from .describe import plain_title
from .html_page import HINT, page
from .replay import STEP_VIEWS, StepOptions
from .story import single_story
from .trace_index import clamp_step

MAX_HTML_BYTES = 5 * 1024 * 1024
# Where a frame's HTML is cut into shared fragments (any cut is lossless: the fragments are joined back as they are).
CANVAS_CUT = re.compile(r'(?=<span class="tok )')
STRIP_CUT = re.compile(r"(?=<t[dh][ >])")
# Without a "<" the block can hold neither "</script" nor "<!--"; U+2028/9 are escaped for any JS reader of the text.
_SCRIPT_UNSAFE = {ord("<"): "\\u003c", 0x2028: "\\u2028", 0x2029: "\\u2029"}
_SURROGATE = re.compile("[\ud800-\udfff]")
SLACK = 64  # bytes kept free for the digits of `start` and the like


class ExportError(ValueError):
    """The replay cannot be written; the message is shown to the user as is."""


@dataclass(frozen=True)
class HtmlReplay:
    html: str
    frames: int  # frames in the page: steps 0 .. frames - 1
    total: int  # steps of the trace
    note: str  # "" or why the replay stops early

    @property
    def size(self) -> int:
        return len(self.html.encode("utf-8"))


def script_json(value: Any) -> str:
    """JSON that is inert inside an HTML <script> block and encodable as UTF-8 (lone surrogates as escapes)."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).translate(_SCRIPT_UNSAFE)
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def text_html(value: Any, limit: int = 120) -> str:
    """A string from the trace as escaped HTML text (control, bidi and surrogate characters shown as escapes)."""
    return html.escape(visible_text(str(value), limit), quote=True)


def story_html(markdown: str) -> str:
    """The one-line story (Markdown with **bold** and `code` only) as escaped HTML."""
    out = html.escape(markdown, quote=True)
    out = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", out)
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", out)


def runs(ids: list[int]) -> list[int]:
    """Fragment ids with each run of consecutive ids written as its first id and -(its length - 1): [4, 5, 6, 9] ->
    [4, -2, 9]. A frame mostly repeats fragments in the order they were first seen, so this is most of the saving."""
    out: list[int] = []
    i = 0
    while i < len(ids):
        j = i
        while j + 1 < len(ids) and ids[j + 1] == ids[j] + 1:
            j += 1
        out += [ids[i], -(j - i)] if j > i else [ids[i]]
        i = j + 1
    return out


def _byte_len(value: Any) -> int:
    return len(script_json(value).encode("utf-8"))


class Frames:
    """The fragment table and the frames built so far, with the exact size of their JSON."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {}
        self.frames: list[list[Any]] = []
        self.size = 0

    def cost(self, canvas: str, strip: str, summary: str) -> tuple[int, list[Any], list[str]]:
        """(bytes this frame adds, the frame, its new fragments), without adding it."""
        fresh: dict[str, int] = {}
        ids = []
        for html_text, cut in ((canvas, CANVAS_CUT), (strip, STRIP_CUT)):
            row = []
            for part in filter(None, cut.split(html_text)):
                if part not in self.index and part not in fresh:
                    fresh[part] = len(self.index) + len(fresh)
                row.append(self.index.get(part, fresh.get(part)))
            ids.append(row)
        frame = [runs(ids[0]), runs(ids[1]), summary]
        return sum(_byte_len(p) + 1 for p in fresh) + _byte_len(frame) + 1, frame, list(fresh)

    def add(self, cost: int, frame: list[Any], fresh: list[str]) -> None:
        for part in fresh:
            self.index[part] = len(self.index)
        self.frames.append(frame)
        self.size += cost


def _frame_views(trace: Trace, step: int) -> tuple[str, str, str]:
    """The Replay tab's canvas, strip and summary at `step`, with its default switches."""
    options = StepOptions()
    return tuple(str(STEP_VIEWS[name](trace, step, options)) for name in ("canvas", "strip", "summary"))  # type: ignore


def _heading(trace: Trace) -> tuple[str, str]:
    h = trace.header
    try:
        what = plain_title(h.config)
    except (ValueError, TypeError, KeyError):  # an upload's config the library no longer reads: its method name
        what = str(h.config.get("method", "run"))
    title = f"{text_html(h.model.name, 80)} · {text_html(what, 160)}"
    meta = (f"seed {h.seed} · {len(trace.steps)} steps, {len(trace.forwards)} forwards · "
            f"{text_html(h.provenance, 20)} trace, s2d2 {text_html(h.library_version, 20)}")
    return title, meta


def replay_html(trace: Trace, start: Optional[int] = None, max_bytes: int = MAX_HTML_BYTES) -> HtmlReplay:
    """The replay page of `trace`, opened at scrubber value `start` (default: the step its story names)."""
    story = single_story(trace)
    title, meta = _heading(trace)
    legend = str(STEP_VIEWS["legend"](trace, 0, StepOptions()))
    n = len(trace.steps)
    cut_note = (f"This replay stops at step {{k}} of {n}: the whole run would make the file larger than "
                f"{max_bytes / 2**20:g} MB. The app replays all of it.")
    shell = page(title, meta, story_html(story.text), html.escape(cut_note.format(k=n)), legend, "", n)
    skeleton = {"pieces": [], "frames": [], "total": n, "start": n, "hint": HINT}
    budget = max_bytes - len(shell.encode("utf-8")) - _byte_len(skeleton) - SLACK
    frames = Frames()
    for step in range(n + 1):
        cost, frame, fresh = frames.cost(*_frame_views(trace, step))
        if frames.size + cost > budget:
            break
        frames.add(cost, frame, fresh)
    if not frames.frames:
        raise ExportError(f"This trace is too large for an HTML replay: its first step alone exceeds "
                          f"{max_bytes / 2**20:g} MB. Download the trace (JSON) and replay it in the app.")
    last = len(frames.frames) - 1
    note = cut_note.format(k=last) if last < n else ""
    at = min(clamp_step(trace, story.step if start is None else start), last)
    data = {"pieces": list(frames.index), "frames": frames.frames, "total": n, "start": at, "hint": HINT}
    text = page(title, meta, story_html(story.text), html.escape(note), legend, script_json(data), last)
    if len(text.encode("utf-8")) > max_bytes:  # the sizes above are exact; this guards the arithmetic
        raise ExportError(f"The HTML replay came out larger than {max_bytes / 2**20:g} MB; nothing was written.")
    return HtmlReplay(text, last + 1, n, note)


def write_replay(trace: Trace, path: str | Path, start: Optional[int] = None,
                 max_bytes: int = MAX_HTML_BYTES) -> HtmlReplay:
    out = replay_html(trace, start, max_bytes)
    Path(path).write_text(out.html, encoding="utf-8")
    return out


def main(argv: Optional[list[str]] = None) -> int:
    """`python -m components.html_export TRACE.json [OUT.html]`: write a trace's self-contained HTML replay."""
    import argparse
    import sys

    from .traces_io import TraceError, load_example

    ap = argparse.ArgumentParser(prog="python -m components.html_export", description=main.__doc__)
    ap.add_argument("trace", help="a trace .json (shipped in assets/traces, downloaded from the app, or recorded)")
    ap.add_argument("out", nargs="?", help="where to write the page (default: the trace's name with .html)")
    ap.add_argument("--step", type=int, default=None, help="the step the page opens at (default: its story's)")
    ap.add_argument("--max-mb", type=float, default=MAX_HTML_BYTES / 2**20, help="size bound of the page (MB)")
    args = ap.parse_args(argv)
    out = Path(args.out) if args.out else Path(args.trace).with_suffix(".html")
    try:
        if not 0 < args.max_mb <= 1024:
            raise ExportError(f"--max-mb must be in (0, 1024], got {args.max_mb:g}")
        result = write_replay(load_example(Path(args.trace)), out, args.step, int(args.max_mb * 2**20))
    except (TraceError, ExportError, OSError) as exc:
        print(f"error: {str(exc)[:300]}", file=sys.stderr)
        return 2
    print(f"written: {out} ({result.size / 1000:.0f} kB, steps 0-{result.frames - 1} of {result.total})")
    if result.note:
        print(result.note)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
