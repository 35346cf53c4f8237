"""One fair line for every event handler: how many run at once, all kinds together, and who goes next.

The app's handlers (replay steps, views, uploads, the tour, a page's load) run in one Python process, and one
interpreter runs Python on one core at a time. Gradio gives each kind of event a line of its own with its own
places (its default concurrency limit per kind), so a flooder's heavy steps ran four at a time in the steps'
line while a student's step ran beside them, sharing the interpreter with all of them: measured on two cores, a
student's step waited seconds behind a flood, and fair order inside one kind's line could not help across kinds.

So every queued event that sets no concurrency of its own joins one line, HANDLERS, with S2D2_HANDLER_CONCURRENCY
places in all (default 4): a student's step waits for at most the handlers already running, then goes ahead of
whoever used more of the server recently (components/serve/fair_queue.py keeps the line in fair order, with recent
use from components/serve/cpu_share.py: unit first, then page, least recent use first). Decodes, Compare and the
HTML export keep the lines they name (`concurrency_id` and `concurrency_limit` set where they are wired): a Run
decodes in the shared batch, never behind a replay step, and a step never waits for a decode.
"""
from __future__ import annotations

from typing import Any, Mapping

from components.serve.settings import env_int

HANDLERS = "handlers"  # the concurrency id of the one line


def handler_slots() -> int:
    """S2D2_HANDLER_CONCURRENCY: event handlers running at once, every kind together (replay steps, views, uploads,
    page loads), default 4 (decodes, Compare and exports have places of their own). Before the one line, each kind
    had this many. Fewer at once means less sharing of the interpreter, but a running handler also waits for the
    interpreter while Gradio's event loop holds it: with 2, thirty students beside a flooder on a loaded two-core
    machine were served fewer steps than with 4 (docs/operating-a-space.md, the teacher's page)."""
    return env_int("S2D2_HANDLER_CONCURRENCY", 4, 1, 64)


def one_line(fns: Mapping[Any, Any]) -> int:
    """Put every queued Python event of `fns` (Gradio's BlockFunctions) that sets no concurrency of its own into the
    HANDLERS line; returns how many are in it. Idempotent."""
    joined = 0
    for block_fn in fns.values():
        if getattr(block_fn, "fn", None) is None or getattr(block_fn, "queue", True) is False:
            continue  # runs in the page only, or outside the queue (Stop)
        if getattr(block_fn, "concurrency_limit", "default") != "default":
            continue  # names its own places: decodes, Compare, the HTML export
        block_fn.concurrency_id = HANDLERS
        joined += 1
    return joined
