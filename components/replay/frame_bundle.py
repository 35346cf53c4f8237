"""The frame bundle: every per-step view of a trace, sent to the page once so that stepping costs the server nothing.

When a trace opens in Replay (an example, an upload, a run, the run toggle, a new colouring or mask forward), the
server renders each step's views once with the app's own renderers (step_views.STEP_VIEWS) and sends them in one
JSON value; the page's ES modules (components/replay/js/) draw step N from it on every slider move, ◀ ▶, key and
Play tick, with no server event. The format follows the HTML replay export (components/files/html_replay.py):

- `pieces`: a table of HTML fragments; a frame's canvas, strip, detail and residual are lists of fragment ids
  (html_replay.runs: a run of consecutive ids is its first id and -(its length - 1)); joining a view's fragments
  gives back the renderer's HTML byte for byte.
- `frames[s]` = [canvas ids, strip ids, detail ids, residual ids, step words, summary, mask index] for s = 0..last.
- `masks`: each distinct attention-mask figure (Plotly JSON without its template), `template` the shared one.
- `routing`: the routing figure at step 0 (no step marker), `marker`: the marker shape routing_figure draws at a
  step > 0 (its x0/x1 set to the step), or None when the figure has none (a method that never verifies).

Invariants: views are rendered with the pin cleared (selected None), under the given colouring and mask forward;
a pinned token's views, and any step past `last`, are drawn by the server (the page asks for them). Bounded before
and during the work (bundle_frames, BUILD_CPU_S) and in bytes (MAX_BUNDLE_BYTES); a longer trace's later steps are
drawn by the server as the visitor reaches them. Bundles are cached per (content, colouring, forward), the content
named by `text_key`. Memory (every upload builds one; issue 8's target is < 20 MB RSS growth per upload): a frame's
figures are dropped once serialised and collected at once (gc), masks are told apart by a digest and hold their
equal rows and strings once (shared_values.py), and neither the trace nor the bundle is serialised again whole.
"""
from __future__ import annotations

import gc
import hashlib
import json
import threading
import time
from collections import OrderedDict
from typing import Any, Optional

from s2d2.trace import Trace

from components.files.html_replay import CANVAS_CUT, STRIP_CUT, frame_bound, runs
from components.files.traces import trace_json
from components.replay.shared_values import Sharer
from components.views.attention_mask import WHICH
from components.views.canvas import COLOR_BY
from components.views.step_views import STEP_VIEWS, StepOptions

MAX_BUNDLE_BYTES = 4 * 1024 * 1024  # what one trace may send to a page (the shipped examples: 40-400 kB)
# The work a bundle may cost when a trace opens (every upload opens one): a frame renders every per-step view, about
# 50 ms of one core, so at most MAX_BUNDLE_FRAMES frames and MAX_BUNDLE_CELLS token cells (frames x positions), and
# BUILD_CPU_S of thread CPU whatever the machine; past them the server draws the steps as the visitor reaches them.
MAX_BUNDLE_FRAMES = 256
MAX_BUNDLE_CELLS = 200_000
BUILD_CPU_S = 3.0
CACHE_ENTRIES = 16
CACHE_BYTES = 64 * 1024 * 1024
VERSION = 1
KEY_SLICE = 1 << 18  # characters hashed at a time: a 4 MB trace is never copied whole to bytes
SLACK = 64  # bytes for the keys and separators of the bundle's outer object
HTML_VIEWS = (("canvas", CANVAS_CUT), ("strip", STRIP_CUT), ("detail", None), ("residual", None))
TEXT_VIEWS = ("step_words", "summary")


def figure_json(fig: Any) -> tuple[dict[str, Any], Any]:
    """(a Plotly figure's JSON without its template, the template): the template is the same for every figure."""
    data = json.loads(fig.to_json())
    template = data.get("layout", {}).pop("template", None)
    return data, template


def _size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


class _Table:
    """Fragments, masks and frames gathered so far, with their JSON size (an upper bound of the bundle's).

    Masks are told apart by a digest of their sorted JSON (their texts as keys held ~2.5 MB until the end of the
    heaviest upload's build) and stored with their equal rows and strings shared (shared_values.py)."""

    def __init__(self) -> None:
        self.pieces: dict[str, int] = {}
        self.masks: dict[bytes, int] = {}
        self.mask_list: list[dict[str, Any]] = []
        self.frames: list[list[Any]] = []
        self.size = 0
        self.sharer = Sharer()

    def ids(self, text: str, cut: Any) -> list[int]:
        out = []
        for part in (filter(None, cut.split(text)) if cut is not None else [text] if text else []):
            if part not in self.pieces:
                self.pieces[part] = len(self.pieces)
                self.size += _size(part) + 1
            out.append(self.pieces[part])
        return runs(out)

    def mask(self, data: dict[str, Any]) -> int:
        text = json.dumps(data, sort_keys=True, separators=(",", ":")).encode("utf-8")
        key = hashlib.blake2b(text, digest_size=20).digest()
        if key not in self.masks:
            self.masks[key] = len(self.mask_list)
            self.mask_list.append(self.sharer.share(data))
            self.size += len(text) + 1
        return self.masks[key]

    def mark(self) -> tuple[int, int, int]:
        return len(self.pieces), len(self.mask_list), self.size

    def rollback(self, mark: tuple[int, int, int]) -> None:
        """Forget what was added since `mark` (a frame that did not fit leaves nothing behind)."""
        pieces, masks, self.size = mark
        self.pieces = dict(list(self.pieces.items())[:pieces])
        self.masks = dict(list(self.masks.items())[:masks])
        del self.mask_list[masks:]

    def add(self, frame: list[Any]) -> None:
        self.frames.append(frame)
        self.size += _size(frame) + 1


def _frame(trace: Trace, step: int, options: StepOptions, table: _Table) -> tuple[list[Any], Any]:
    """One frame's row (fragments added to `table`) and the mask figure's template."""
    row: list[Any] = [table.ids(str(STEP_VIEWS[name](trace, step, options)), cut) for name, cut in HTML_VIEWS]
    row += [str(STEP_VIEWS[name](trace, step, options)) for name in TEXT_VIEWS]
    mask, template = figure_json(STEP_VIEWS["mask"](trace, step, options))
    row.append(table.mask(mask))
    return row, template


def text_key(trace: Trace) -> str:
    """The SHA-256 of the trace's JSON text as the app keeps it (components.files.traces.trace_json: an upload's
    own validated file, or `to_json` once per trace object), hashed in slices.

    Why not html_replay.content_key, the digest of a fresh `to_json`: on the heaviest upload that encoding held
    ~13 MB at once, the largest part of the upload's RSS growth. The text is already in memory (the session state
    was made from it), and for the shipped examples, runs and any file the app wrote it *is* `to_json`, so the key
    is content_key's value there; only an upload formatted otherwise gets a digest of its own bytes (the same
    file still shares one bundle)."""
    text, digest = trace_json(trace), hashlib.sha256()
    for at in range(0, len(text), KEY_SLICE):
        digest.update(text[at:at + KEY_SLICE].encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


def bundle_frames(trace: Trace) -> int:
    """How many frames (steps 0 .. k) a bundle may hold for `trace`, from its shape, before any work."""
    positions = max(1, int(trace.header.total_length))
    return max(1, min(frame_bound(trace), MAX_BUNDLE_FRAMES, MAX_BUNDLE_CELLS // positions))


def build_bundle(trace: Trace, color_by: str = "state", mask_which: str = "auto",
                 max_bytes: int = MAX_BUNDLE_BYTES) -> dict[str, Any]:
    """The bundle of `trace` under these view switches (format in the module docstring); steps 0..`last`."""
    return _build(trace, text_key(trace), color_by, mask_which, max_bytes)[0]


def _build(trace: Trace, digest: str, color_by: str, mask_which: str, max_bytes: int) -> tuple[dict[str, Any], int]:
    """(the bundle, an upper bound of its JSON bytes): the cache weighs a bundle by the build's own count, as
    serialising a 2 MB bundle again only to weigh it cost ~12 MB of transient memory on the upload's path."""
    options = StepOptions(mask_which=mask_which, color_by=color_by)
    n = len(trace.steps)
    routing, template = figure_json(STEP_VIEWS["routing"](trace, 0, options))
    marker = None
    if n >= 1:
        at_one, _ = figure_json(STEP_VIEWS["routing"](trace, 1, options))
        shapes, base = at_one.get("layout", {}).get("shapes", []), routing.get("layout", {}).get("shapes", [])
        marker = shapes[-1] if len(shapes) == len(base) + 1 else None
    table = _Table()
    table.size = _size(routing) + _size(template)
    table.size += _size({"v": VERSION, "key": "x" * 40, "total": n, "last": n, "marker": marker}) + SLACK
    start = time.thread_time()
    for step in range(bundle_frames(trace)):
        if table.frames and time.thread_time() - start > BUILD_CPU_S:
            break
        mark = table.mark()
        row, template = _frame(trace, step, options, table)
        # A view's Plotly figure is a reference cycle (its traces point back to it): dropped, it waits for the
        # cycle collector, and the app's large heap makes the full collections rare, so the frames' figures piled
        # up (~0.1 MB each). Collecting the young generations frees them, for ~2 ms a frame (a frame: 50-400 ms).
        gc.collect(1)
        if table.frames and table.size + _size(row) + 1 > max_bytes:
            table.rollback(mark)
            break
        table.add(row)
    bundle = {"v": VERSION, "key": f"{digest[:16]}/{color_by}/{mask_which}", "total": n,
              "last": len(table.frames) - 1, "pieces": list(table.pieces), "frames": table.frames,
              "masks": table.mask_list, "template": template, "routing": routing, "marker": marker}
    return bundle, table.size


_CACHE: "OrderedDict[tuple[str, str, str], tuple[dict[str, Any], int]]" = OrderedDict()
_LOCK = threading.Lock()


def bundle_for(trace: Optional[Trace], color_by: str = "state", mask_which: str = "auto") -> Optional[dict[str, Any]]:
    """The bundle of `trace` (None without one), from the cache when this content was opened before: a class
    opening the same example builds it once. Unknown switch values are read as the defaults, as the views do."""
    if trace is None:
        return None
    color_by = color_by if color_by in COLOR_BY else COLOR_BY[0]
    mask_which = mask_which if mask_which in WHICH else "auto"
    digest = text_key(trace)
    key = (digest, color_by, mask_which)
    with _LOCK:
        hit = _CACHE.get(key)
        if hit is not None:
            _CACHE.move_to_end(key)
            return hit[0]
    bundle, size = _build(trace, digest, color_by, mask_which, MAX_BUNDLE_BYTES)
    with _LOCK:
        _CACHE[key] = (bundle, size)
        while len(_CACHE) > CACHE_ENTRIES or sum(weight for _, weight in _CACHE.values()) > CACHE_BYTES:
            _CACHE.popitem(last=False)
    return bundle


def clear_cache() -> None:
    with _LOCK:
        _CACHE.clear()
