"""Each visitor's share of the server's Python time (components/serve/cpu_share.py): the bucket's arithmetic on an
injected clock, the guard's charge of a handler's own CPU time, refusal only while other visitors wait, and which
events of the real app are metered."""
from __future__ import annotations

import time
from types import SimpleNamespace

import gradio as gr
import pytest

from components.serve import cpu_share, event_guard, gpu_slot
from components.serve.cpu_share import OVER_SHARE, CpuShare

BURST, SHARE = 10.0, 0.5


def bucket() -> tuple[CpuShare, list[float]]:
    now = [100.0]
    return CpuShare(lambda: SHARE, lambda: BURST, clock=lambda: now[0]), now


def burn(seconds: float) -> None:
    """Spend `seconds` of this thread's CPU time (not wall time: a busy machine only makes it take longer)."""
    start = time.thread_time()
    while time.thread_time() - start < seconds:
        pass


def test_a_bucket_starts_full_refills_at_the_share_and_owes_at_most_one_bucket():
    share, now = bucket()
    assert share.wait_s("a") == 0.0
    share.charge("a", BURST - 1)
    assert share.wait_s("a") == 0.0  # one second left
    share.charge("a", 3)
    assert share.wait_s("a") == pytest.approx(2 / SHARE)  # owes 2 s, earned back at 0.5 s a second
    now[0] += 2
    assert share.wait_s("a") == pytest.approx(1 / SHARE)
    now[0] += 2.001
    assert share.wait_s("a") == 0.0
    share.charge("a", 10_000)  # never owes more than a full bucket: the wait is bounded
    assert share.wait_s("a") == pytest.approx(BURST / SHARE)
    now[0] += 10_000
    share.charge("a", 1)
    share.charge("a", BURST - 1 - 1e-6)
    assert share.wait_s("a") == 0.0  # refilled to the top, not beyond it
    assert share.wait_s("b") == 0.0 and share.wait_s("a") == 0.0  # buckets are per client
    share.charge("a", -5)  # a negative charge (a clock oddity) gives nothing back
    share.charge("a", 0.01)
    assert share.wait_s("a") > 0


def test_a_spent_visitor_is_refused_only_while_others_wait():
    share, _ = bucket()
    asked = []

    def others() -> bool:
        asked.append(1)
        return True

    assert share.refusal("a", others) is None and not asked  # the queue is read only for a spent bucket
    share.charge("a", BURST + 3)
    assert share.refusal("a", lambda: False) is None  # alone on the server: never slowed
    assert share.refusal("a", others) == OVER_SHARE.format(seconds=6)  # 3 s owed at 0.5 s a second
    assert share.refusal("b", others) is None


@pytest.mark.parametrize("name, value, expect", [
    ("S2D2_CLIENT_CPU_SHARE", "0", "S2D2_CLIENT_CPU_SHARE: expected a number in [0.01, 64], got 0"),
    ("S2D2_CLIENT_CPU_SHARE", "nan", "S2D2_CLIENT_CPU_SHARE: expected a number in [0.01, 64], got nan"),
    ("S2D2_CLIENT_CPU_BURST_S", "-1", "S2D2_CLIENT_CPU_BURST_S: expected a number in [0.1, 3600], got -1"),
    ("S2D2_CLIENT_CPU_BURST_S", "many", "S2D2_CLIENT_CPU_BURST_S: expected a number in [0.1, 3600], got 'many'"),
])
def test_the_settings_are_bounded(monkeypatch, name, value, expect):
    monkeypatch.setenv(name, value)
    read = {"S2D2_CLIENT_CPU_SHARE": cpu_share.client_cpu_share,
            "S2D2_CLIENT_CPU_BURST_S": cpu_share.client_cpu_burst_s}[name]
    with pytest.raises(ValueError) as info:
        read()
    assert str(info.value) == expect


@pytest.fixture
def visitor(monkeypatch):
    """A fresh CPU_SHARE for the guard, and a request from 6.6.6.6 (the client key the guard charges)."""
    from gradio.context import LocalContext

    share, now = bucket()
    monkeypatch.setattr(event_guard, "CPU_SHARE", share)
    request = SimpleNamespace(headers={}, client=SimpleNamespace(host="6.6.6.6"), username=None, session_hash="s")
    token = LocalContext.request.set(request)
    yield share
    LocalContext.request.reset(token)


def test_the_guard_charges_a_handlers_own_cpu_time_to_its_visitor(visitor):
    waiting = []
    handler = event_guard.guarded(lambda: burn(0.05) or {"ok": 1}, "step", lambda key: waiting.append(key) or True)
    assert handler() == {"ok": 1}
    tokens = visitor._buckets["ip:6.6.6.6"][0]
    assert tokens <= BURST - 0.05  # at least the 50 ms of CPU it burnt (the injected clock refills nothing)

    def stream():
        burn(0.02)
        yield {"n": 1}
        burn(0.02)
        yield {"n": 2}

    assert list(event_guard.guarded(stream, "stream", lambda key: True)()) == [{"n": 1}, {"n": 2}]
    assert visitor._buckets["ip:6.6.6.6"][0] <= tokens - 0.04  # every step of a stream is charged
    unmetered = event_guard.guarded(lambda: burn(0.05), "run")  # no `contended`: a decode, never charged
    before = visitor._buckets["ip:6.6.6.6"][0]
    unmetered()
    assert visitor._buckets["ip:6.6.6.6"][0] == before and not waiting


def test_the_guard_refuses_a_spent_visitor_with_one_line_while_others_wait(visitor):
    ran, others = [], [True]
    handler = event_guard.guarded(lambda: ran.append(1) or {"ok": 1}, "step", lambda key: others[0])
    visitor.charge("ip:6.6.6.6", BURST + 2)
    with pytest.raises(gr.Error) as info:
        handler()
    assert info.value.message == OVER_SHARE.format(seconds=4) and not ran  # refused before any work
    others[0] = False
    assert handler() == {"ok": 1} and ran == [1]  # alone now: let through
    stream = event_guard.guarded(lambda: (yield {"n": 1}), "stream", lambda key: True)
    with pytest.raises(gr.Error):
        next(stream())


def test_others_waiting_reads_the_queue_for_other_visitors():
    def event(ip: str) -> SimpleNamespace:
        request = SimpleNamespace(headers={}, client=SimpleNamespace(host=ip))
        return SimpleNamespace(request=request, username=None)

    def demo(waiting: list, running: list) -> SimpleNamespace:
        queue = SimpleNamespace(event_queue_per_concurrency_id={"x": SimpleNamespace(queue=waiting)},
                                active_jobs=[running, None])
        return SimpleNamespace(_queue=queue)

    assert not event_guard.others_waiting(demo([event("6.6.6.6")], [event("6.6.6.6")]), "ip:6.6.6.6")
    assert event_guard.others_waiting(demo([event("1.1.1.1")], []), "ip:6.6.6.6")
    assert event_guard.others_waiting(demo([], [event("1.1.1.1")]), "ip:6.6.6.6")
    assert not event_guard.others_waiting(SimpleNamespace(), "ip:6.6.6.6")


def test_the_apps_views_are_metered_and_its_decodes_and_stop_are_not():
    import app

    metered, unmetered = set(), set()
    for block_fn in app.demo.fns.values():
        if block_fn.fn is None:
            continue
        (metered if block_fn.fn.s2d2_metered else unmetered).add(block_fn.name)
        if block_fn.concurrency_id in gpu_slot.DECODE_SLOTS:
            assert not block_fn.fn.s2d2_metered, block_fn.name
        if block_fn.trigger_after is not None or any(t in ("load", "unload") for _, t in block_fn.targets):
            assert block_fn.fn.s2d2_metered and not block_fn.fn.s2d2_refuses, block_fn.name
    assert all(block_fn.fn.s2d2_refuses for block_fn in app.demo.fns.values() if block_fn.name == "step_views")
    assert {"step_views", "server_step", "restyle", "upload_trace", "html_replay", "page_load", "on_unload", "after_run"} <= metered
    assert {"run", "rerun_whatif", "stop"} <= unmetered
