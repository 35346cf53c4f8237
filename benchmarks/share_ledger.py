"""Who the server's handler time went to, for the load benchmarks: per page, the events run, the handler CPU they
were charged, and for each event how long it waited in Gradio's line and how long it ran.

Started inside the server process when S2D2_BENCH_SHARE_LEDGER names an output file (benchmarks/server.py passes it
through; the app never imports this). It wraps two things and changes neither's result:
- the CPU share's `charge` (components/serve/cpu_share.py): each charge is one handler step's own CPU seconds
  (`time.thread_time`), recorded with the page (session hash) whose request it served;
- Gradio's `Queue.process_events`: for every event it starts, the moment it started, the seconds it waited in the
  line (from joining it: `Event.enqueue_time`) and the seconds until its result was sent (the event's wall: handler,
  waiting for the interpreter, and sending the result).
Times are `time.monotonic()`, one clock for every process of the machine, so a benchmark can cut a phase out of the
records with its own clock. On SIGUSR1 the records so far are written to the file as JSON (once per request: writing
them all the time would load the server being measured). Bounded: at most MAX_RECORDS of each kind (later ones are
counted, not kept).
"""
from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

MAX_RECORDS = 400_000


def start(path: str) -> None:
    """Record charges and events from now on; write them to `path` on every SIGUSR1 (call from the main thread)."""
    import gradio.queueing as queueing
    from gradio.context import LocalContext

    from components.serve.cpu_share import CPU_SHARE
    from components.serve.front_door import event_client
    from components.serve.roster import ROSTER

    charges: list[tuple] = []  # (t, session, unit, member, cpu_s)
    events: list[tuple] = []  # (t_started, session, unit, member, API name, wait_s, wall_s)
    dropped = [0]
    lock = threading.Lock()
    charge = CPU_SHARE.charge

    def charged(ask: Any, seconds: float, now: Any = None) -> None:
        charge(ask, seconds, now)
        request = LocalContext.request.get(None)
        with lock:
            if len(charges) < MAX_RECORDS:
                charges.append((time.monotonic(), str(getattr(request, "session_hash", "") or ""), ask[0], ask[1],
                                seconds))
            else:
                dropped[0] += 1

    CPU_SHARE.charge = charged  # type: ignore[method-assign]
    process = queueing.Queue.process_events

    async def process_events(self: Any, batch_events: list, *args: Any, **kwargs: Any) -> Any:
        started = time.monotonic()
        try:
            return await process(self, batch_events, *args, **kwargs)
        finally:
            ended = time.monotonic()
            with lock:
                for e in batch_events:
                    if len(events) >= MAX_RECORDS:
                        dropped[0] += 1
                        continue
                    unit = event_client(e)
                    events.append((started, e.session_hash, unit, ROSTER.member(unit, e.session_hash),
                                   _name(e.fn), started - e.enqueue_time, ended - started))

    queueing.Queue.process_events = process_events  # type: ignore[method-assign]

    def write(*_: Any) -> None:
        with lock:
            data = {"charges": list(charges), "events": list(events), "dropped": dropped[0]}
        tmp = path + ".tmp"
        Path(tmp).write_text(json.dumps(data))
        os.replace(tmp, path)

    signal.signal(signal.SIGUSR1, write)


def _name(fn: Any) -> str:
    """An event's API name where it has one (what a client calls: "step"), else its function's."""
    return str(getattr(fn, "api_name", None) or getattr(fn, "name", "") or "")


def read(pid: int, path: str, since: int, timeout_s: float = 60.0) -> dict[str, Any]:
    """Ask the server `pid` to write its records to `path` and read them, once the file is newer than `since`
    (`st_mtime_ns` before the request: 0 when there was none)."""
    os.kill(pid, signal.SIGUSR1)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        p = Path(path)
        if p.exists() and p.stat().st_mtime_ns > since:
            return json.loads(p.read_text())
        threading.Event().wait(0.05)
    raise TimeoutError(f"the server did not write its ledger within {timeout_s:g} s")


def mtime(path: str) -> int:
    p = Path(path)
    return p.stat().st_mtime_ns if p.exists() else 0
