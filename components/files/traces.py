"""Traces as files and as session state: bounded upload, validated parse, bounded exports, a small parse cache.

Session state holds a small handle {"key": str, "name": str}; the trace's JSON text lives in the state store
(components/serve/state_budget.py: compressed, charged to the visitor, under a global and a per-client byte budget).
Parsed `Trace` objects are memoised by key in a cache bounded by the size of the traces, not their count. A handle
whose text the store dropped reads as no trace. Uploads are JSON only, never unpickled, read up to the size limit
(S2D2_MAX_UPLOAD_MB) and validated before anything is built. Exported traces live in the export folder (disk.py:
inside the app's cache, one folder per distinct trace, pruned by age, count and bytes).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any, Optional

from s2d2.limits import limits
from s2d2.trace import Trace

from components.serve.disk_budget import DISK, export_dir
from components.serve.state_budget import STORE

MAX_EXPORTS = 256  # trace folders kept in the export directory
EXPORT_MAX_AGE_S = 3600.0  # older ones are deleted at the next export
ASSETS = Path(__file__).resolve().parents[2] / "assets" / "traces"
PARSED_BUDGET = 16 * 1024 * 1024  # JSON bytes of the parsed traces kept in memory (their objects take about 2x more)
_PARSED: "OrderedDict[str, tuple[Any, int]]" = OrderedDict()
_parsed_bytes = 0


class TraceError(ValueError):
    """A trace could not be loaded; the message is shown to the user as is."""


def make_state(trace: Trace | dict[str, Any], name: str = "trace", pinned: bool = False) -> dict[str, Any]:
    """Session-state value for a trace: a small handle into the state store (plain, deep-copyable, JSON-safe).
    `pinned` (the bundled examples) keeps the text whatever the budgets."""
    text = trace_json(trace) if isinstance(trace, Trace) else json.dumps(trace, allow_nan=False)
    key = STORE.put(text, pinned=pinned)
    if isinstance(trace, Trace):
        remember_parsed(key, trace, len(text))
    return {"key": key, "name": name}


def trace_json(trace: Trace) -> str:
    """The trace's JSON text, computed once per trace object (session state and download share it)."""
    text = trace.__dict__.get("_s2d2_json")
    if text is None:
        text = trace.to_json()
        trace.__dict__["_s2d2_json"] = text
    return text


def parsed(key: Any) -> Any:
    """The parsed value memoised under a state key (a Trace, or a comparison's traces), or None."""
    if isinstance(key, str) and key in _PARSED:
        _PARSED.move_to_end(key)
        return _PARSED[key][0]
    return None


def remember_parsed(key: str, trace: Any, size: int) -> None:
    """Memoise a parsed value under its state key; `size` (its JSON bytes) counts toward PARSED_BUDGET."""
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
    key = state.get("key")
    hit = parsed(key)
    if isinstance(hit, Trace):
        return hit
    text, data = state.get("json"), state.get("trace")  # older handles carried the text themselves
    if isinstance(key, str) and not isinstance(text, str) and not isinstance(data, dict):
        text = STORE.get(key)
    if not isinstance(text, str) and not isinstance(data, dict):
        return None
    try:
        trace = Trace.from_json(text) if isinstance(text, str) else Trace.from_dict(data)
    except ValueError:
        return None
    if isinstance(key, str):
        remember_parsed(key, trace, len(text) if isinstance(text, str) else len(trace_json(trace)))
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
    trace = parse_text(read_upload(path))
    trace.__dict__["_s2d2_source"] = path  # its download can be this very file (export_path links it)
    return trace


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


def export_name(trace: Trace, kind: str = "trace") -> str:
    """A file name (no suffix) that says what the trace is, e.g. "s2d2-trace-tiny-s2d2-seed0"; safe characters only."""
    model = re.sub(r"[^A-Za-z0-9_.-]+", "-", trace.header.model.name)[:40].strip(".") or "model"
    method = re.sub(r"[^A-Za-z0-9_.-]+", "-", str(trace.header.config.get("method", "run")))[:20].strip(".")
    return f"s2d2-{kind}-{model}-{method or 'run'}-seed{trace.header.seed}"


def _folder_of(trace: Trace) -> Path:
    return export_dir() / hashlib.sha256(trace_json(trace).encode("utf-8", "surrogatepass")).hexdigest()[:20]


def export_folder(trace: Trace) -> Path:
    """export_dir()/<content hash>/: one folder per distinct trace (loading it again reuses it); old ones pruned."""
    root = export_dir()
    folder = _folder_of(trace)
    folder.mkdir(exist_ok=True)
    os.utime(folder)  # recently used: pruned last
    prune_exports(root)
    return folder


def export_path(trace: Trace, directory: Optional[str] = None) -> Optional[str]:
    """Write the trace JSON and return its path (for gr.DownloadButton), in `directory` or export_folder(trace);
    None (no download offered) when the app's disk budget has no room for it."""
    text = trace_json(trace)
    name = export_name(trace) + ".json"
    if directory is None:
        if not (_folder_of(trace) / name).exists() and not DISK.make_room(len(text)):
            return None
        directory = str(export_folder(trace))
    path = os.path.join(directory, name)
    source = trace.__dict__.get("_s2d2_source")
    if not os.path.exists(path) and source:
        try:
            os.link(source, path)  # the uploaded file is the trace's text: a second name, not a second copy
        except OSError:
            pass
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


