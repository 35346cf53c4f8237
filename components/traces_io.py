"""Traces as files and as session state: download, validated upload, and a small parse cache.

Session state holds a plain dict {"key": str, "trace": dict}; parsed `Trace` objects are memoised by key (a fresh
random key per load, so sessions never share entries by accident). Uploads are JSON only, never unpickled.
"""
from __future__ import annotations

import json
import os
import re
import tempfile
import uuid
from collections import OrderedDict
from pathlib import Path
from typing import Any, Optional

from s2d2.trace import Trace

MAX_UPLOAD_BYTES = 5 * 1024 * 1024
ASSETS = Path(__file__).resolve().parent.parent / "assets" / "traces"
_PARSED: "OrderedDict[str, Trace]" = OrderedDict()
_PARSED_SIZE = 32


class TraceError(ValueError):
    """A trace could not be loaded; the message is shown to the user as is."""


def make_state(trace: Trace | dict[str, Any], name: str = "trace") -> dict[str, Any]:
    """Session-state value for a trace: plain, deep-copyable, JSON-safe."""
    data = trace.to_dict() if isinstance(trace, Trace) else trace
    key = uuid.uuid4().hex
    if isinstance(trace, Trace):
        _remember(key, trace)
    return {"key": key, "name": name, "trace": data}


def _remember(key: str, trace: Trace) -> None:
    _PARSED[key] = trace
    _PARSED.move_to_end(key)
    while len(_PARSED) > _PARSED_SIZE:
        _PARSED.popitem(last=False)


def trace_from_state(state: Any) -> Optional[Trace]:
    """The parsed trace of a session state (None when the state holds no trace or an invalid one)."""
    if not isinstance(state, dict) or not isinstance(state.get("trace"), dict):
        return None
    key = state.get("key")
    if isinstance(key, str) and key in _PARSED:
        _PARSED.move_to_end(key)
        return _PARSED[key]
    try:
        trace = Trace.from_dict(state["trace"])
    except ValueError:
        return None
    if isinstance(key, str):
        _remember(key, trace)
    return trace


def parse_upload(path: Optional[str]) -> Trace:
    """Read and validate an uploaded trace file; raise TraceError with one readable message."""
    if not path:
        raise TraceError("No file received: choose a trace .json file.")
    try:
        size = os.path.getsize(path)
    except OSError:
        raise TraceError("The uploaded file could not be read.") from None
    if size > MAX_UPLOAD_BYTES:
        raise TraceError(f"File too large: {size / 1e6:.1f} MB (the limit is {MAX_UPLOAD_BYTES / 1e6:.0f} MB).")
    with open(path, "rb") as fh:
        raw = fh.read(MAX_UPLOAD_BYTES + 1)
    return parse_text(raw)


def parse_text(raw: str | bytes) -> Trace:
    if isinstance(raw, bytes) and len(raw) > MAX_UPLOAD_BYTES or isinstance(raw, str) and len(raw) > MAX_UPLOAD_BYTES:
        raise TraceError(f"File too large (the limit is {MAX_UPLOAD_BYTES / 1e6:.0f} MB).")
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise TraceError("Not a trace: the file is not UTF-8 text (upload a .json trace file).") from None
    try:
        return Trace.from_json(raw)
    except (ValueError, RecursionError, TypeError) as exc:
        raise TraceError(f"Invalid trace file: {_short(str(exc))}") from None


def _short(text: str, limit: int = 300) -> str:
    text = re.sub(r"\s+", " ", text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def export_path(trace: Trace, directory: Optional[str] = None) -> str:
    """Write the trace JSON to a fresh temp file and return its path (for gr.DownloadButton)."""
    d = directory or tempfile.mkdtemp(prefix="s2d2-trace-")
    model = re.sub(r"[^A-Za-z0-9_.-]+", "-", trace.header.model.name)[:40] or "model"
    method = re.sub(r"[^A-Za-z0-9_.-]+", "-", str(trace.header.config.get("method", "run")))[:20]
    path = os.path.join(d, f"s2d2-trace-{model}-{method}-seed{trace.header.seed}.json")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(trace.to_json())
    return path


def example_traces(directory: Path = ASSETS) -> dict[str, Path]:
    """Precomputed example traces shipped in assets/traces: label -> path (sorted by file name)."""
    if not directory.is_dir():
        return {}
    return {example_label(p.stem): p for p in sorted(directory.glob("*.json"))}


def example_label(stem: str) -> str:
    """"01-sdar-config-b--arithmetic" -> "sdar-config-b · arithmetic" (the numeric prefix only orders files)."""
    label = re.sub(r"^\d+-", "", stem)
    return label.replace("--", " · ").replace("_", " ")


def load_example(path: Path) -> Trace:
    return parse_text(path.read_bytes())


def describe_error(exc: BaseException) -> str:
    return str(exc) if isinstance(exc, TraceError) else f"Could not load the trace: {_short(str(exc))}"


def dumps_state(state: dict[str, Any]) -> str:
    return json.dumps(state["trace"], allow_nan=False)
