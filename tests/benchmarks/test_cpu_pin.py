"""`load_test --pin` (benchmarks/cpu_pin.py): the server gets the lowest usable core and the clients the others; it is
on by default with two or more cores, off with --no-pin or one core; the server process and the benchmark's own
threads really run on their sets."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

from benchmarks.cpu_pin import pin_clients, plan, server_preexec, set_thread_cores


def test_the_plan_splits_the_usable_cores_and_says_why_when_it_does_not():
    p = plan(None, {3, 1, 2})
    assert p and p.server == {1} and p.clients == {2, 3}
    assert p.line() == "pinned: server on CPU 1, clients on CPU 2,3"
    assert plan(True, {0, 1}).server == {0}
    assert not plan(False, {0, 1}) and plan(False, {0, 1}).line() == "not pinned (--no-pin)"
    assert not plan(None, {0}) and plan(True, {0}).line() == "not pinned (1 usable core)"
    assert server_preexec(plan(None, {0})) is None


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="pinning needs two usable cores")
def test_the_server_and_every_client_thread_run_on_their_own_cores():
    before = os.sched_getaffinity(0)
    pinning = plan(None)
    child = subprocess.run([sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"],
                           capture_output=True, text=True, preexec_fn=server_preexec(pinning), check=True)
    assert child.stdout.strip() == str(sorted(pinning.server))
    started, release, seen = threading.Event(), threading.Event(), []

    def worker() -> None:  # a thread that exists before the pinning
        started.set()
        release.wait()
        seen.append(os.sched_getaffinity(0))

    t = threading.Thread(target=worker)
    t.start()
    started.wait()
    try:
        pin_clients(pinning)
        release.set()
        t.join()
        assert os.sched_getaffinity(0) == pinning.clients and seen == [pinning.clients]
    finally:
        release.set()
        for task in os.listdir("/proc/self/task"):
            set_thread_cores(int(task), before)  # a thread that ended since it was listed is skipped


def test_a_thread_that_ended_before_it_is_pinned_is_skipped():
    t = threading.Thread(target=lambda: None)
    t.start()
    t.join()
    # join returns once Python is done with the thread; the kernel drops its task a moment later (CI once still
    # listed it right after join), so wait for that, bounded, before pinning the ended thread
    assert t.native_id is not None
    task, deadline = f"/proc/self/task/{t.native_id}", time.monotonic() + 30
    while os.path.exists(task) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not os.path.exists(task), "the joined thread's task was still listed after 30 s"
    set_thread_cores(t.native_id, os.sched_getaffinity(0))  # gone now: pinning it must not raise
