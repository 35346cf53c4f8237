"""After Gradio's /cancel (a client's job.cancel()) removed a queued event: free the session's decode
registration (components/serve/gpu_slot.py Jobs.withdraw), so a cancelled Run does not hold the session's one job.
The front door (components/serve/front_door.py) calls `after_cancel` once Gradio has answered the /cancel."""
from __future__ import annotations

from typing import Any

from components.serve import gpu_slot
from components.serve.client_limits import queue_events


def after_cancel(data: dict, client: str, blocks: Any) -> None:
    """Gradio's /cancel (a client's job.cancel()) removed a job's event from the queue: free the session's
    job registration (gpu_slot.Jobs.withdraw) unless an event of that job is still waiting."""
    session, index = data.get("session_hash"), data.get("fn_index")
    fn = blocks.fns.get(index) if isinstance(index, int) and not isinstance(index, bool) else None
    if not isinstance(session, str) or not is_job(fn):
        return
    waiting = queue_events(blocks._queue, running=False)
    if not any(e.session_hash == session and is_job(e.fn) for e in waiting):
        gpu_slot.JOBS.withdraw(session, client)


def is_job(fn: Any) -> bool:
    """Does the event run as the session's one job (a decode, an HTML export: admitted by gpu_slot.admit_decode)?"""
    return getattr(fn, "concurrency_id", None) in gpu_slot.DECODE_SLOTS or getattr(fn, "validator", None) is gpu_slot.admit_decode
