"""Where a run was decoded, in words for a trace's header line (Replay's title, the HTML replay's heading).

The trace header's `decoded_in` record (s2d2/trace/records.py) names the page decoder's runtime, version, backend
and dtype; a trace without it was decoded by the library itself (this server, or `python -m s2d2`), so it reads
"decoded on the server". Pure text: the callers escape it for their markup.
"""
from __future__ import annotations

from s2d2.trace import Header


def decoded_words(header: Header) -> str:
    """"decoded in the browser (onnxruntime-web 1.30.0, wasm, float32)" or "decoded on the server"."""
    d = header.decoded_in
    if d is None or d.where == "server":
        return "decoded on the server"
    return f"decoded in the browser ({d.runtime} {d.runtime_version}, {d.backend}, {d.dtype})"
