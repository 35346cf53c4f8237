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
(ExportError). The work is bounded before it starts, by what the file holds: at most MAX_EXPORT_FRAMES frames and
MAX_EXPORT_CELLS token cells (frames x the sequence's positions, each one rendered per frame); a longer replay
stops at the last step within the bound, with the same visible note. A build can be cancelled (`should_stop`,
polled before every frame: ExportCancelled), and its frames are cached per trace content (the page for another
opening step reuses them).

`python -m components.files.html_replay TRACE.json [OUT.html] [--step N] [--max-mb M]` writes one (gradio is not imported).
"""
from __future__ import annotations

import hashlib
import html
import json
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

from s2d2.trace import Trace

from components.escape import LONE_SURROGATE
from components.views.canvas import visible_text
from components.views.decoded_in import decoded_words
from components.views.describe import plain_title
from components.files.html_replay_page import HINT, page
from components.views.step_views import STEP_VIEWS, StepOptions
from components.views.story import single_story
from components.views.trace_index import clamp_step
from components.views.plural import plural

MAX_HTML_BYTES = 5 * 1024 * 1024
# Where a frame's HTML is cut into shared fragments (any cut is lossless: the fragments are joined back as they are).
CANVAS_CUT = re.compile(r'(?=<span class="tok )')
STRIP_CUT = re.compile(r"(?=<t[dh][ >])")
# Without a "<" the block can hold neither "</script" nor "<!--"; U+2028/9 are escaped for any JS reader of the text.
_SCRIPT_UNSAFE = {ord("<"): "\\u003c", 0x2028: "\\u2028", 0x2029: "\\u2029"}
SLACK = 64  # bytes kept free for the digits of `start` and the like
# ~5 s of one core for the heaviest legal traces (benchmarks/html_replay_speed.py): the largest recording (2,560
# positions, 513 frames = 1.3 M cells) fits whole; a 23,040-step editing-style trace stops at frame 2,048.
MAX_EXPORT_FRAMES = 2048
MAX_EXPORT_CELLS = 1_600_000
CACHE_ENTRIES = 8
CACHE_BYTES = 48 * 1024 * 1024


class ExportError(ValueError):
    """The replay cannot be written; the message is shown to the user as is."""


class ExportCancelled(ExportError):
    """The build was stopped (`should_stop` answered True) before it finished; nothing was written."""


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
    return LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


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
    meta = (f"seed {h.seed} · {plural(len(trace.steps), 'step')}, {plural(len(trace.forwards), 'forward')} · "
            f"{text_html(h.provenance, 20)} trace, s2d2 {text_html(h.library_version, 20)}, "
            f"{text_html(decoded_words(h), 120)}")
    return title, meta


def frame_bound(trace: Trace) -> int:
    """How many frames (steps 0 .. k) an export may build for `trace`, from what the file holds, before any work."""
    positions = max(1, int(trace.header.total_length))
    return max(1, min(len(trace.steps) + 1, MAX_EXPORT_FRAMES, MAX_EXPORT_CELLS // positions))


@dataclass(frozen=True)
class Built:
    """The frames of one trace under one size bound (what the cache keeps), and the page's fixed parts."""
    pieces: list[str]
    frames: list[list[Any]]
    parts: tuple[str, str, str, str]  # title, meta, story HTML, legend
    story_step: int
    note: str


_CACHE: "OrderedDict[tuple[str, int], Built]" = OrderedDict()
_CACHE_LOCK = threading.Lock()


def content_key(trace: Trace) -> str:
    """A digest of the trace's content (two loads of the same file share it), kept on the trace object: a trace on
    screen is never changed in place (a new run or upload is a new object)."""
    key = trace.__dict__.get("_s2d2_content_key")
    if key is None:
        key = hashlib.sha256(trace.to_json().encode("utf-8", "surrogatepass")).hexdigest()
        trace.__dict__["_s2d2_content_key"] = key
    return key


def _cached(key: tuple[str, int]) -> Optional[Built]:
    with _CACHE_LOCK:
        built = _CACHE.get(key)
        if built is not None:
            _CACHE.move_to_end(key)
        return built


def _remember(key: tuple[str, int], built: Built, size: int) -> None:
    """Keep `built`, dropping the least recently used entries past CACHE_ENTRIES or CACHE_BYTES (page bytes)."""
    with _CACHE_LOCK:
        _CACHE[key] = built
        _SIZES[key] = size
        while len(_CACHE) > CACHE_ENTRIES or sum(_SIZES.values()) > CACHE_BYTES:
            old, _ = _CACHE.popitem(last=False)
            _SIZES.pop(old, None)


_SIZES: dict[tuple[str, int], int] = {}


def clear_cache() -> None:
    with _CACHE_LOCK:
        _CACHE.clear()
        _SIZES.clear()


def _build(trace: Trace, max_bytes: int, should_stop: Callable[[], bool]) -> Built:
    """Every frame that fits the size and work bounds (ExportError when not even the first; ExportCancelled)."""
    story = single_story(trace)
    title, meta = _heading(trace)
    legend = str(STEP_VIEWS["legend"](trace, 0, StepOptions()))
    n = len(trace.steps)
    bound = frame_bound(trace)
    size_note = (f"This replay stops at step {{k}} of {n}: the whole run would make the file larger than "
                 f"{max_bytes / 2**20:g} MB. The app replays all of it.")
    work_note = (f"This replay stops at step {{k}} of {n}: an HTML replay renders at most "
                 f"{plural(MAX_EXPORT_FRAMES, 'step', grouped=True)} "
                 f"and {MAX_EXPORT_CELLS:,} token cells (steps x {plural(trace.header.total_length, 'position')}). "
                 f"The app replays all of it.")
    longest = max(size_note.format(k=n), work_note.format(k=n), key=len)
    shell = page(title, meta, story_html(story.text), html.escape(longest), legend, "", n)
    skeleton = {"pieces": [], "frames": [], "total": n, "start": n, "hint": HINT}
    budget = max_bytes - len(shell.encode("utf-8")) - _byte_len(skeleton) - SLACK
    frames = Frames()
    note = ""
    for step in range(n + 1):
        if should_stop():
            raise ExportCancelled("Stopped: no HTML replay was made.")
        if step >= bound:
            note = work_note.format(k=step - 1)
            break
        cost, frame, fresh = frames.cost(*_frame_views(trace, step))
        if frames.size + cost > budget:
            note = size_note.format(k=step - 1) if step else ""
            break
        frames.add(cost, frame, fresh)
    if not frames.frames:
        raise ExportError(f"This trace is too large for an HTML replay: its first step alone exceeds "
                          f"{max_bytes / 2**20:g} MB. Download the trace (JSON) and replay it in the app.")
    return Built(list(frames.index), frames.frames, (title, meta, story_html(story.text), legend), story.step, note)


def replay_html(trace: Trace, start: Optional[int] = None, max_bytes: int = MAX_HTML_BYTES,
                should_stop: Callable[[], bool] = lambda: False) -> HtmlReplay:
    """The replay page of `trace`, opened at scrubber value `start` (default: the step its story names). The frames
    come from the cache when this content was exported before (at any step); `should_stop` cancels a build."""
    key = (content_key(trace), max_bytes)
    built = _cached(key)
    fresh = built is None
    if built is None:
        built = _build(trace, max_bytes, should_stop)
    n, last = len(trace.steps), len(built.frames) - 1
    at = min(clamp_step(trace, built.story_step if start is None else start), last)
    data = {"pieces": built.pieces, "frames": built.frames, "total": n, "start": at, "hint": HINT}
    title, meta, story, legend = built.parts
    text = page(title, meta, story, html.escape(built.note), legend, script_json(data), last)
    size = len(text.encode("utf-8"))
    if size > max_bytes:  # the sizes above are exact; this guards the arithmetic
        raise ExportError(f"The HTML replay came out larger than {max_bytes / 2**20:g} MB; nothing was written.")
    if fresh:
        _remember(key, built, size)
    return HtmlReplay(text, last + 1, n, built.note)


def write_replay(trace: Trace, path: str | Path, start: Optional[int] = None,
                 max_bytes: int = MAX_HTML_BYTES) -> HtmlReplay:
    out = replay_html(trace, start, max_bytes)
    Path(path).write_text(out.html, encoding="utf-8")
    return out


def main(argv: Optional[list[str]] = None) -> int:
    """`python -m components.files.html_replay TRACE.json [OUT.html]`: write a trace's self-contained HTML replay."""
    import argparse
    import sys

    from components.files.traces import TraceError, load_example

    ap = argparse.ArgumentParser(prog="python -m components.files.html_replay", description=main.__doc__)
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
