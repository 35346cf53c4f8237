"""What the front door (components/serve/front_door.py) checks in a request's body and headers, before Gradio reads them:
the body read up to a cap (declared or received), JSON values bounded in nesting and string length with lone
surrogates replaced, an event's values counted against its inputs, an event the page runs only in JavaScript
refused. Every check raises `Refusal` (status, one line)."""
from __future__ import annotations

from typing import Any, Awaitable, Callable, Optional

from components.escape import LONE_SURROGATE, without_surrogates

MAX_FIELD_CHARS = 8192
MAX_DEPTH = 32
Receive = Callable[[], Awaitable[dict]]


class Refusal(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


def count_values(fn: Any, values: Any, by_index: bool) -> None:
    """Refusal for an event sent fewer values than Gradio will pass its handler (Gradio would fail on it with a
    traceback in the log): every input by index; by name, every input or those the API shows (Gradio fills in
    the others, e.g. gr.State, only when exactly those are sent)."""
    inputs = list(getattr(fn, "inputs", ()) or ())
    if fn is None or not isinstance(values, list) or len(values) >= len(inputs):
        return
    shown = sum(not getattr(block, "skip_api", False) for block in inputs)
    if by_index or len(values) != shown:
        wanted = len(inputs) if by_index else shown
        raise Refusal(400, f"This event takes {wanted} value{'' if wanted == 1 else 's'}; the request sent "
                           f"{len(values)}.")


NOT_A_FILE = "This event takes a file: choose one with its upload button."


def file_values(fn: Any, values: Any, by_index: bool) -> None:
    """Refusal for a value sent to a file input (an upload button or file box) that is not a file Gradio's upload
    made (Gradio would fail on it with a traceback in the log): None or a FileData record of an uploaded file, or
    for a box of many files a list of them. Values map to the inputs as count_values says they are counted."""
    from gradio.data_classes import FileData, ListFiles

    inputs = list(getattr(fn, "inputs", ()) or ())
    if fn is None or not isinstance(values, list):
        return
    if not by_index and len(values) != len(inputs):
        inputs = [block for block in inputs if not getattr(block, "skip_api", False)]
    for block, value in zip(inputs, values):
        model = getattr(block, "data_model", None)
        many = isinstance(model, type) and issubclass(model, ListFiles)
        if not (isinstance(model, type) and (many or issubclass(model, FileData))) or value is None:
            continue
        if not (all(map(is_file_record, value)) if many and isinstance(value, list) else is_file_record(value)):
            raise Refusal(400, NOT_A_FILE)


def is_file_record(value: Any) -> bool:
    """Is `value` a file Gradio's upload made: shaped as its FileData (a dict with a text path and meta
    {"_type": "gradio.FileData"}) and inside its upload folder (a path elsewhere, or a URL, Gradio refuses with a
    traceback in the log)?"""
    from gradio import utils as gradio_utils

    if not (isinstance(value, dict) and isinstance(value.get("path"), str)
            and value.get("meta") == {"_type": "gradio.FileData"}):
        return False
    try:
        return gradio_utils.is_in_or_equal(gradio_utils.abspath(value["path"]), gradio_utils.get_upload_folder())
    except (OSError, ValueError):  # a path the file system cannot even resolve
        return False


def checked(value: Any, depth: int = 0) -> tuple[Any, bool]:
    """(value with lone surrogates replaced, whether anything changed); Refusal for a value nested deeper than
    MAX_DEPTH or a string longer than MAX_FIELD_CHARS."""
    if depth > MAX_DEPTH:
        raise Refusal(400, "The request is nested too deeply to read.")
    if isinstance(value, str):
        if len(value) > MAX_FIELD_CHARS:
            raise Refusal(413, f"A value in this request is longer than {MAX_FIELD_CHARS} characters.")
        if LONE_SURROGATE.search(value):
            return without_surrogates(value), True
        return value, False
    if isinstance(value, list):
        pairs = [checked(v, depth + 1) for v in value]
        return [v for v, _ in pairs], any(c for _, c in pairs)
    if isinstance(value, dict):
        out, changed = {}, False
        for k, v in value.items():
            key, c1 = checked(k, depth + 1) if isinstance(k, str) else (k, False)
            out[key], c2 = checked(v, depth + 1)
            changed = changed or c1 or c2
        return out, changed
    return value, False


async def read_body(scope: dict, receive: Receive, cap: int) -> bytes:
    """The whole request body; Refusal(413) past `cap` bytes (declared or received)."""
    length = header(scope, b"content-length")
    if length is not None and length.isdigit() and int(length) > cap:
        raise Refusal(413, f"This request is larger than {cap // 1024} kB.")
    chunks, size = [], 0
    while True:
        message = await receive()
        if message.get("type") == "http.disconnect":
            raise Refusal(400, "The request was cut short.")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > cap:
            raise Refusal(413, f"This request is larger than {cap // 1024} kB.")
        chunks.append(chunk)
        if not message.get("more_body"):
            return b"".join(chunks)


def replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def again() -> dict:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()  # later reads wait for the disconnect, as they would

    return again


def header(scope: dict, name: bytes) -> Optional[str]:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return value.decode("latin-1").strip()
    return None


def with_length(scope: dict, length: int) -> dict:
    headers = [(k, v) for k, v in scope.get("headers", ()) if k.lower() != b"content-length"]
    return {**scope, "headers": headers + [(b"content-length", str(length).encode())]}


PAGE_ONLY = "This event runs in the page only: there is nothing for the server to do."


def refuse_page_only(fn: Any) -> None:
    """Refusal for an event the page runs only in JavaScript (no Python function: Gradio would fail on it with an
    IndexError in the server's log)."""
    if fn is not None and getattr(fn, "fn", True) is None:
        raise Refusal(400, PAGE_ONLY)
