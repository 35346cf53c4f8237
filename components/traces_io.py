"""Traces as files and as session state: bounded upload, validated parse, bounded exports, a small parse cache.

Session state holds a plain dict {"key": str, "name": str, "json": str}: the trace as its JSON text, the most compact
form a session can keep. Parsed `Trace` objects are memoised by key (a fresh random key per load, so sessions never
share entries by accident) in a cache bounded by the size of the traces, not their count. Uploads are JSON only, never unpickled, read
up to the size limit (S2D2_MAX_UPLOAD_MB) and validated before anything is built. Exported traces live in one
directory (S2D2_EXPORT_DIR, default <tmp>/s2d2-exports), one folder per distinct trace, pruned by age and count.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
import time
import uuid
from collections import OrderedDict
from pathlib import Path
from typing import Any, Optional

from s2d2.limits import limits
from s2d2.trace import Trace

MAX_EXPORTS = 256  # trace folders kept in the export directory
EXPORT_MAX_AGE_S = 3600.0  # older ones are deleted at the next export
ASSETS = Path(__file__).resolve().parent.parent / "assets" / "traces"
PARSED_BUDGET = 16 * 1024 * 1024  # JSON bytes of the parsed traces kept in memory (their objects take about 2x more)
_PARSED: "OrderedDict[str, tuple[Trace, int]]" = OrderedDict()
_parsed_bytes = 0


class TraceError(ValueError):
    """A trace could not be loaded; the message is shown to the user as is."""


def make_state(trace: Trace | dict[str, Any], name: str = "trace") -> dict[str, Any]:
    """Session-state value for a trace: plain, deep-copyable, JSON-safe."""
    text = trace_json(trace) if isinstance(trace, Trace) else json.dumps(trace, allow_nan=False)
    key = uuid.uuid4().hex
    if isinstance(trace, Trace):
        _remember(key, trace, len(text))
    return {"key": key, "name": name, "json": text}


def trace_json(trace: Trace) -> str:
    """The trace's JSON text, computed once per trace object (session state and download share it)."""
    text = trace.__dict__.get("_s2d2_json")
    if text is None:
        text = trace.to_json()
        trace.__dict__["_s2d2_json"] = text
    return text


def _remember(key: str, trace: Trace, size: int) -> None:
    global _parsed_bytes
    if key in _PARSED:
        _parsed_bytes -= _PARSED.pop(key)[1]
    _PARSED[key] = (trace, size)
    _parsed_bytes += size
    while _parsed_bytes > PARSED_BUDGET and len(_PARSED) > 1:
        _parsed_bytes -= _PARSED.popitem(last=False)[1][1]


def trace_from_state(state: Any) -> Optional[Trace]:
    """The parsed trace of a session state (None when the state holds no trace or an invalid one)."""
    if not isinstance(state, dict):
        return None
    text, data = state.get("json"), state.get("trace")
    if not isinstance(text, str) and not isinstance(data, dict):
        return None
    key = state.get("key")
    if isinstance(key, str) and key in _PARSED:
        _PARSED.move_to_end(key)
        return _PARSED[key][0]
    try:
        trace = Trace.from_json(text) if isinstance(text, str) else Trace.from_dict(data)
    except ValueError:
        return None
    if isinstance(key, str):
        _remember(key, trace, len(text) if isinstance(text, str) else len(trace_json(trace)))
    return trace


def read_upload(path: Optional[str], what: str = "trace .json file") -> bytes:
    """The bytes of an uploaded file, refused above the size limit before it is read; TraceError otherwise."""
    lim = limits()
    if not path or not isinstance(path, str):
        raise TraceError(f"No file received: choose a {what}.")
    try:
        size = os.path.getsize(path)
        if size > lim.max_upload_bytes:
            raise TraceError(f"File too large: {size / 1e6:.1f} MB (the limit is {lim.max_upload_mb:g} MB).")
        with open(path, "rb") as fh:
            return fh.read(lim.max_upload_bytes + 1)
    except OSError:
        raise TraceError(f"The uploaded file could not be read: choose a {what}.") from None


def parse_upload(path: Optional[str]) -> Trace:
    """Read and validate an uploaded trace file; raise TraceError with one readable message."""
    return parse_text(read_upload(path))


def parse_text(raw: str | bytes) -> Trace:
    lim = limits()
    if len(raw) > lim.max_upload_bytes:
        raise TraceError(f"File too large (the limit is {lim.max_upload_mb:g} MB).")
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise TraceError(f"Not a trace: this is not a text file (an image or a binary?). {TRACE_BOX}") from None
    try:
        trace = Trace.from_json(raw, lim)
    except (ValueError, RecursionError, TypeError, OverflowError) as exc:
        if looks_like_results(raw):
            raise TraceError(RESULTS_IN_TRACE_BOX) from None
        raise TraceError(f"Invalid trace file: {_short(str(exc))}") from None
    trace.__dict__["_s2d2_json"] = raw  # validated: state and download reuse the file's text (no re-encoding)
    return trace


TRACE_BOX = ("This box takes a trace (.json): one saved with ⬇ Download this trace, or written by "
             "`python -m s2d2 generate --trace out.json`.")
RESULTS_IN_TRACE_BOX = ("This is a sweep results file (the results.json of `python -m s2d2 bench`), not a trace: "
                        "open it with the Sweep tab's upload box. " + TRACE_BOX)


def looks_like_results(raw: str) -> bool:
    """A JSON object with a `cells` list and no trace header: a bench results file (read only after a refusal)."""
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return False
    return isinstance(data, dict) and isinstance(data.get("cells"), list) and "header" not in data


def _short(text: str, limit: int = 300) -> str:
    text = re.sub(r"\s+", " ", text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def export_dir() -> Path:
    """The one directory exported traces are written to (created on demand)."""
    d = Path(os.environ.get("S2D2_EXPORT_DIR") or Path(tempfile.gettempdir()) / "s2d2-exports")
    d.mkdir(parents=True, exist_ok=True)
    return d


def export_name(trace: Trace, kind: str = "trace") -> str:
    """A file name (no suffix) that says what the trace is, e.g. "s2d2-trace-tiny-s2d2-seed0"; safe characters only."""
    model = re.sub(r"[^A-Za-z0-9_.-]+", "-", trace.header.model.name)[:40].strip(".") or "model"
    method = re.sub(r"[^A-Za-z0-9_.-]+", "-", str(trace.header.config.get("method", "run")))[:20].strip(".")
    return f"s2d2-{kind}-{model}-{method or 'run'}-seed{trace.header.seed}"


def export_folder(trace: Trace) -> Path:
    """export_dir()/<content hash>/: one folder per distinct trace (loading it again reuses it); old ones pruned."""
    root = export_dir()
    folder = root / hashlib.sha256(trace_json(trace).encode()).hexdigest()[:20]
    folder.mkdir(exist_ok=True)
    os.utime(folder)  # recently used: pruned last
    prune_exports(root)
    return folder


def export_path(trace: Trace, directory: Optional[str] = None) -> str:
    """Write the trace JSON and return its path (for gr.DownloadButton), in `directory` or export_folder(trace)."""
    text = trace_json(trace)
    path = os.path.join(directory or str(export_folder(trace)), export_name(trace) + ".json")
    if not os.path.exists(path):
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
    return path


def prune_exports(root: Path, keep: int = MAX_EXPORTS, max_age: float = EXPORT_MAX_AGE_S) -> int:
    """Delete export folders older than `max_age` seconds, and the oldest beyond `keep`; returns how many."""
    try:
        folders = sorted((p for p in root.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime, reverse=True)
    except OSError:
        return 0
    now, removed = time.time(), 0
    for i, folder in enumerate(folders):
        try:
            if i >= keep or now - folder.stat().st_mtime > max_age:
                shutil.rmtree(folder, ignore_errors=True)
                removed += 1
        except OSError:
            continue
    return removed


def load_example(path: Path) -> Trace:
    return parse_text(path.read_bytes())


def describe_error(exc: BaseException) -> str:
    return str(exc) if isinstance(exc, TraceError) else f"Could not load the trace: {_short(str(exc))}"


def dumps_state(state: dict[str, Any]) -> str:
    return state["json"] if "json" in state else json.dumps(state["trace"], allow_nan=False)
