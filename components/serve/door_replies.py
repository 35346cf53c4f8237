"""How the front door (components/serve/front_door.py) answers a request itself: one line of JSON, never a
traceback or a server path; and the lines it refuses with."""
from __future__ import annotations

import json
from typing import Awaitable, Callable

Send = Callable[[dict], Awaitable[None]]

# the door's refusals: what to do, in one line
TOO_FAST = "◷ Too many requests from your address: slow down and try again in a few seconds."
TOO_MANY_QUEUED = ("◷ You already have several requests waiting in the queue: wait for them to finish, then try "
                   "again.")
QUEUE_NEARLY_FULL = "◷ The queue is nearly full: wait for your requests to finish, then try again."
TOO_MANY_NEW = "◷ Too many new pages from your address at once: wait a few seconds, then reload."
TOO_MANY_STREAMS = "◷ Too many open connections from your address: close some tabs and try again."


def quiet_errors(send: Send) -> Send:
    """A file route's refusal as one line without the path it was asked for (Gradio's echoes it)."""
    replaced = False

    async def filtered(message: dict) -> None:
        nonlocal replaced
        if message.get("type") == "http.response.start" and message.get("status", 200) >= 400:
            replaced = True
            await reply(send, message["status"], "File not found.")
            return
        if not replaced:
            await send(message)

    return filtered


async def reply(send: Send, status: int, message: str) -> None:
    """Answer with `status` and `message` as one line of JSON (under both keys clients read)."""
    body = json.dumps({"detail": message, "error": message}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
