"""Where one event's wall goes inside the server, for the load benchmarks: Gradio's preprocess of the inputs, the
call of the handler (and, within it, the hand-off to a worker thread), Gradio's postprocess of the outputs, and the
rest of the time its place was held (sending the result, Gradio's own bookkeeping).

Started inside the server process when S2D2_BENCH_EVENT_SPLIT names an output file (benchmarks/server.py passes it
through; the app never imports this). It wraps, without changing any result:
- Gradio's `Queue.process_events` (one record per event: its API name, its wait in Gradio's line, its wall from
  start to result sent);
- `Blocks.preprocess_data`, `call_function` and `postprocess_data` (each one's wall, added to the running event's
  record through a context variable, which follows the event's task);
- `anyio.to_thread.run_sync`, as Gradio calls it: how many worker-thread hops the event made, the seconds each
  waited from being handed off to starting on its thread (a free thread and the interpreter), and the seconds it ran.
Times are `time.monotonic()`. On SIGUSR2 (SIGUSR1 is the share ledger's) the records so far are written to the file
as JSON. Bounded: at most
MAX_RECORDS events (later ones are counted, not kept).

`python -m benchmarks.event_split FILE [--api step]` prints p50 / p95 of each part for the events of that API name.
"""
from __future__ import annotations

import argparse
import contextvars
import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any, Optional

from benchmarks.percentiles import pct

MAX_RECORDS = 200_000
PARTS = ["wait", "wall", "pre", "call", "post", "rest", "hops", "hop_wait", "hop_run"]
CURRENT: contextvars.ContextVar[Optional[dict[str, Any]]] = contextvars.ContextVar("s2d2_event_split", default=None)


def start(path: str) -> None:
    """Record every event's split from now on; write the records to `path` on every SIGUSR2 (main thread)."""
    import anyio.to_thread
    import gradio.blocks as blocks
    import gradio.queueing as queueing

    records: list[dict[str, Any]] = []
    dropped = [0]
    lock = threading.Lock()
    process = queueing.Queue.process_events

    async def process_events(self: Any, batch_events: list, *args: Any, **kwargs: Any) -> Any:
        started = time.monotonic()
        record = {"t": started, "api": _name(batch_events[0].fn) if batch_events else "", "pre": 0.0,
                  "session": str(getattr(batch_events[0], "session_hash", "") or "") if batch_events else "",
                  "call": 0.0, "post": 0.0,
                  "hops": 0, "hop_wait": 0.0, "hop_run": 0.0,
                  "wait": started - min((e.enqueue_time for e in batch_events), default=started)}
        token = CURRENT.set(record)
        try:
            return await process(self, batch_events, *args, **kwargs)
        finally:
            CURRENT.reset(token)
            record["wall"] = time.monotonic() - started
            record["rest"] = record["wall"] - record["pre"] - record["call"] - record["post"]
            with lock:
                if len(records) < MAX_RECORDS:
                    records.append(record)
                else:
                    dropped[0] += 1

    queueing.Queue.process_events = process_events  # type: ignore[method-assign]
    for method, part in (("preprocess_data", "pre"), ("call_function", "call"), ("postprocess_data", "post")):
        setattr(blocks.Blocks, method, _timed(getattr(blocks.Blocks, method), part))
    anyio.to_thread.run_sync = _hops(anyio.to_thread.run_sync)  # Gradio calls it as anyio.to_thread.run_sync

    def write(*_: Any) -> None:
        with lock:
            data = {"events": list(records), "dropped": dropped[0]}
        tmp = path + ".tmp"
        Path(tmp).write_text(json.dumps(data))
        os.replace(tmp, path)

    signal.signal(signal.SIGUSR2, write)


def _timed(method: Any, part: str) -> Any:
    async def timed(*args: Any, **kwargs: Any) -> Any:
        t0 = time.monotonic()
        try:
            return await method(*args, **kwargs)
        finally:
            record = CURRENT.get()
            if record is not None:
                record[part] += time.monotonic() - t0
    return timed


def _hops(run_sync: Any) -> Any:
    async def counted(func: Any, *args: Any, **kwargs: Any) -> Any:
        record = CURRENT.get()
        if record is None:
            return await run_sync(func, *args, **kwargs)
        handed = time.monotonic()
        began: list[float] = []

        def timed_func(*a: Any) -> Any:
            began.append(time.monotonic())
            return func(*a)

        try:
            return await run_sync(timed_func, *args, **kwargs)
        finally:
            ended = time.monotonic()
            record["hops"] += 1
            if began:
                record["hop_wait"] += began[0] - handed
                record["hop_run"] += ended - began[0]
    return counted


def _name(fn: Any) -> str:
    return str(getattr(fn, "api_name", None) or getattr(fn, "name", "") or "")


def read(pid: int, path: str, timeout_s: float = 60.0) -> dict[str, Any]:
    """Ask the server `pid` to write its records to `path` and read them once the file is newer than now."""
    p = Path(path)
    since = p.stat().st_mtime_ns if p.exists() else 0
    os.kill(pid, signal.SIGUSR2)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if p.exists() and p.stat().st_mtime_ns > since:
            return json.loads(p.read_text())
        threading.Event().wait(0.05)
    raise TimeoutError(f"the server did not write its event split within {timeout_s:g} s")


def split_table(events: list[dict[str, Any]], api: str, t0: float = float("-inf"), t1: float = float("inf"),
                sessions: Optional[set] = None) -> list[str]:
    """p50 / p95 of each part (seconds, hops as counts) over the events named `api` started within [t0, t1] (and,
    given `sessions`, of those pages only)."""
    chosen = [e for e in events if e.get("api") == api and t0 <= e.get("t", 0.0) <= t1
              and (sessions is None or e.get("session") in sessions)]
    lines = [f"{len(chosen)} events named {api!r}" + (" from the students' pages" if sessions is not None else "")]
    for part in PARTS:
        values = [float(e[part]) for e in chosen if part in e]
        unit = "" if part == "hops" else " s"
        lines.append(f"  {part:9s} p50 {pct(values, 0.5):8.3f}{unit}  p95 {pct(values, 0.95):8.3f}{unit}")
    return lines


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("file")
    ap.add_argument("--api", default="step")
    args = ap.parse_args(argv)
    data = json.loads(Path(args.file).read_text())
    print("\n".join(split_table(data["events"], args.api)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
