"""Where the app server's event loop spends its time, for the load benchmarks: a sampling profiler of the
event-loop thread (uvicorn's, where Gradio's loop runs), started inside the server process when
S2D2_BENCH_LOOP_PROFILE names an output file (benchmarks/server.py passes it through; the app never imports this).

Every `interval_s` a daemon thread reads the loop thread's stack (`sys._current_frames`) and counts it, folded
to its innermost DEPTH frames. A sample whose innermost frame is the selector's wait is the loop idle; anything else
is the loop busy (running a callback, or waiting for the interpreter inside one). The sampler needs the interpreter
too, so moments where the loop gives it up (a socket write, a read) are over-sampled a little: read the shares as
where the loop waits and works, not as exact times. How late the sampler woke (over 50 ms) is kept too: the
interpreter held by others. Every `flush_s` the counts so far are written to the file as JSON, so a killed server
still leaves its profile. `python -m benchmarks.loop_sampler FILE` prints the busiest frames.

Bounded: one thread, at most MAX_STACKS distinct folded stacks kept (the rest count under "other").
"""
from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections import Counter
from pathlib import Path

MAX_STACKS = 5000
DEPTH = 14  # frames kept per sample, innermost first
IDLE = ("select", "poll", "epoll", "_run_once")  # the selector's wait: the loop has nothing to do


def _frames(frame: object) -> list[str]:
    out: list[str] = []
    while frame is not None and len(out) < 64:
        code = frame.f_code  # type: ignore[attr-defined]
        path = code.co_filename
        short = path.split("site-packages/")[-1] if "site-packages/" in path else "/".join(path.rsplit("/", 2)[-2:])
        out.append(f"{short}:{code.co_name}")
        frame = frame.f_back  # type: ignore[attr-defined]
    return out


def start(path: str, interval_s: float = 0.005, flush_s: float = 5.0) -> threading.Event:
    """Sample the event loop thread's stack every `interval_s` into `path`; set the returned event to stop (the
    counts are written once more then)."""
    stopped = threading.Event()
    loop_thread: list = [None]
    counts: Counter = Counter()
    gaps: list[float] = []  # sampler wake-up lateness: the interpreter held by someone else

    def run() -> None:
        last_flush = time.monotonic()
        while not stopped.is_set():
            t0 = time.monotonic()
            time.sleep(interval_s)
            late = time.monotonic() - t0 - interval_s
            if late > 0.05:
                gaps.append(round(late, 3))
            loop_id = loop_thread[0]
            frames = sys._current_frames()
            if loop_id is None or loop_id not in frames:  # find the thread running the asyncio loop (uvicorn's)
                loop_id = loop_thread[0] = next((tid for tid, f in frames.items()
                                                 if any("run_forever" in x for x in _frames(f))), None)
            frame = frames.get(loop_id) if loop_id is not None else None
            if frame is not None:
                stack = _frames(frame)[:DEPTH]
                key = " <- ".join(stack)
                counts[key if key in counts or len(counts) < MAX_STACKS else "other"] += 1
            if time.monotonic() - last_flush > flush_s:
                last_flush = time.monotonic()
                write()
        write()

    def write() -> None:
        tmp = path + ".tmp"
        Path(tmp).write_text(json.dumps({"interval_s": interval_s, "counts": dict(counts),
                                         "late": sorted(gaps)[-200:], "n_late": len(gaps)}))
        os.replace(tmp, path)

    threading.Thread(target=run, daemon=True, name="loop-sampler").start()
    return stopped


def summarize(path: str, top: int = 25) -> None:
    """Print the loop's busy share and its busiest frames (inclusive: a frame counts once per sample it is in)."""
    data = json.loads(Path(path).read_text())
    counts: dict[str, int] = data["counts"]
    total = sum(counts.values())
    idle = sum(n for k, n in counts.items() if k.split(" <- ")[0].split(":")[-1] in IDLE)
    print(f"samples {total} (every {data['interval_s'] * 1e3:.0f} ms): loop idle {idle / max(1, total):.0%}; "
          f"sampler late >50 ms {data['n_late']} times, worst {data['late'][-5:]}")
    inclusive: Counter = Counter()
    for key, n in counts.items():
        if key.split(" <- ")[0].split(":")[-1] in IDLE:
            continue
        for frame in set(key.split(" <- ")):
            inclusive[frame] += n
    busy = max(1, total - idle)
    for frame, n in inclusive.most_common(top):
        print(f"{n / busy:6.1%} of busy  {frame}")
    print("innermost busy stacks:")
    stacks = Counter({k: n for k, n in counts.items() if k.split(" <- ")[0].split(":")[-1] not in IDLE})
    for key, n in stacks.most_common(12):
        print(f"{n / busy:6.1%}  {' <- '.join(key.split(' <- ')[:7])}")


if __name__ == "__main__":
    summarize(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 25)
