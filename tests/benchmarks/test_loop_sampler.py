"""The event-loop sampler of the load benchmarks (benchmarks/loop_sampler.py): it finds the thread running an
asyncio loop among the process's threads, counts where that loop works, and its summary names the busy frame."""
from __future__ import annotations

import asyncio
import json
import threading
import time

from benchmarks import loop_sampler


def spin() -> int:
    return sum(i * i for i in range(20_000))


def test_the_sampler_finds_the_loop_thread_and_counts_where_it_works(tmp_path, capsys):
    done = threading.Event()

    async def work() -> None:
        while not done.is_set():
            spin()  # the loop's work: pure Python on the loop thread
            await asyncio.sleep(0)

    loop = threading.Thread(target=lambda: asyncio.run(work()), daemon=True)
    loop.start()
    path = tmp_path / "profile.json"
    stop = loop_sampler.start(str(path), interval_s=0.002, flush_s=0.05)

    def spin_samples() -> int:
        if not path.exists():
            return 0
        counts = json.loads(path.read_text())["counts"]
        return sum(n for key, n in counts.items() if "test_loop_sampler.py:spin" in key)

    deadline = time.monotonic() + 120
    while spin_samples() < 20 and time.monotonic() < deadline:  # a condition, bounded: not a timing assertion
        done.wait(0.05)
    stop.set()
    done.set()
    loop.join(timeout=60)
    assert spin_samples() >= 20
    loop_sampler.summarize(str(path), top=10)
    out = capsys.readouterr().out
    assert "loop idle" in out and "test_loop_sampler.py:spin" in out


def test_the_summary_reads_the_selector_wait_as_idle(tmp_path, capsys):
    path = tmp_path / "p.json"
    idle = "python3.11/selectors.py:select <- asyncio/base_events.py:_run_once <- asyncio/base_events.py:run_forever"
    busy = "a/b.py:work <- asyncio/events.py:_run <- asyncio/base_events.py:run_forever"
    path.write_text(json.dumps({"interval_s": 0.005, "counts": {idle: 30, busy: 10}, "late": [], "n_late": 0}))
    loop_sampler.summarize(str(path))
    out = capsys.readouterr().out
    assert "loop idle 75%" in out and "100.0% of busy  a/b.py:work" in out
