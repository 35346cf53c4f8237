"""Fair shares of the server's Python time (components/serve/cpu_share.py): recent use and fair parts on an
injected clock, the guard's charge of a handler's own CPU time, refusal only while others wait, and which events
of the real app are metered."""
from __future__ import annotations

import math
import time
from types import SimpleNamespace

import gradio as gr
import pytest

from components.serve import cpu_share, event_guard, gpu_slot
from components.serve.chains import door_parent
from components.serve.cpu_share import OVER_SHARE, CpuShare

WINDOW, SHARE = 10.0, 0.5
ME = ("ip:6.6.6.6", "~rest")  # the guard's (unit, member) for the request below: a session with no open page


def bucket() -> tuple[CpuShare, list[float]]:
    now = [100.0]
    return CpuShare(lambda: SHARE, lambda: WINDOW, clock=lambda: now[0]), now


def burn(seconds: float) -> None:
    """Spend `seconds` of this thread's CPU time (not wall time: a busy machine only makes it take longer)."""
    start = time.thread_time()
    while time.thread_time() - start < seconds:
        pass


def test_recent_use_decays_over_the_window_and_parts_divide_by_unit_then_member():
    share, now = bucket()
    a, b = ("ip:1", "s1"), ("ip:1", "s2")
    share.charge(a, 2.0)
    share.charge(a, -5)  # a negative charge (a clock oddity) gives nothing back
    assert share.used(a) == pytest.approx(2.0)
    now[0] += WINDOW
    assert share.used(a) == pytest.approx(2.0 / math.e)  # decays with the window as its time constant
    assert share.used(b) == 0.0  # per member
    assert share.part(a, []) == pytest.approx(SHARE)  # alone: the whole share
    assert share.part(a, [b]) == pytest.approx(SHARE / 2)  # two sessions of one unit
    assert share.part(a, [b, ("ip:2", "x")]) == pytest.approx(SHARE / 4)  # a half for its unit, split in two
    assert share.part(("ip:2", "x"), [a, b]) == pytest.approx(SHARE / 2)  # the stranger keeps half
    now[0] += 100 * WINDOW
    assert share.part(("ip:2", "x"), []) == pytest.approx(SHARE)  # a's use decayed: no longer active


def test_a_member_over_its_part_is_refused_only_while_others_wait():
    share, _ = bucket()
    asked = []
    other = ("ip:2", "x")

    def others() -> list:
        asked.append(1)
        return [ME, other]

    assert share.refusal(ME, others) is None and not asked  # the queue is read only for a member with recent use
    share.charge(ME, SHARE / 2 * WINDOW * math.e)  # e times its allowance of half the share
    assert share.refusal(ME, lambda: [ME]) is None  # alone on the server: never slowed
    assert share.refusal(ME, others) == OVER_SHARE.format(seconds=10)  # e -> 1 takes one window
    assert share.refusal(other, others) is None


@pytest.mark.parametrize("name, value, expect", [
    ("S2D2_CPU_SHARE", "0", "S2D2_CPU_SHARE: expected a number in [0.01, 64], got 0"),
    ("S2D2_CPU_SHARE", "nan", "S2D2_CPU_SHARE: expected a number in [0.01, 64], got nan"),
    ("S2D2_CPU_WINDOW_S", "-1", "S2D2_CPU_WINDOW_S: expected a number in [0.5, 3600], got -1"),
    ("S2D2_CPU_WINDOW_S", "many", "S2D2_CPU_WINDOW_S: expected a number in [0.5, 3600], got 'many'"),
    ("S2D2_HANDLER_CONCURRENCY", "0", "S2D2_HANDLER_CONCURRENCY: expected a whole number in [1, 64], got 0"),
    ("S2D2_HANDLER_CONCURRENCY", "2.5", "S2D2_HANDLER_CONCURRENCY: expected a whole number in [1, 64], got '2.5'"),
])
def test_the_settings_are_bounded(monkeypatch, name, value, expect):
    monkeypatch.setenv(name, value)
    read = {"S2D2_CPU_SHARE": cpu_share.cpu_share, "S2D2_CPU_WINDOW_S": cpu_share.cpu_window_s,
            "S2D2_HANDLER_CONCURRENCY": cpu_share.handler_slots}[name]
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
    handler = event_guard.guarded(lambda: burn(0.05) or {"ok": 1}, "step", lambda: waiting.append(1) or [ME])
    assert handler() == {"ok": 1}
    used = visitor.used(ME)
    assert used >= 0.05  # at least the 50 ms of CPU it burnt (the injected clock stands still: nothing decays)

    def stream():
        burn(0.02)
        yield {"n": 1}
        burn(0.02)
        yield {"n": 2}

    assert list(event_guard.guarded(stream, "stream", lambda: [ME])()) == [{"n": 1}, {"n": 2}]
    assert visitor.used(ME) >= used + 0.04  # every step of a stream is charged
    unmetered = event_guard.guarded(lambda: burn(0.05), "run")  # no `contended`: a decode, never charged
    before = visitor.used(ME)
    unmetered()
    assert visitor.used(ME) == before


def test_the_guard_refuses_a_spent_visitor_with_one_line_while_others_wait(visitor):
    ran, others = [], [[ME, ("ip:1.1.1.1", "x")]]
    handler = event_guard.guarded(lambda: ran.append(1) or {"ok": 1}, "step", lambda: others[0])
    visitor.charge(ME, SHARE / 2 * WINDOW * math.e)
    with pytest.raises(gr.Error) as info:
        handler()
    assert info.value.message == OVER_SHARE.format(seconds=10) and not ran  # refused before any work
    others[0] = [ME]
    assert handler() == {"ok": 1} and ran == [1]  # alone now: let through
    stream = event_guard.guarded(lambda: (yield {"n": 1}), "stream", lambda: [ME, ("ip:1.1.1.1", "x")])
    with pytest.raises(gr.Error):
        next(stream())


def test_contenders_are_the_members_of_the_queues_events(monkeypatch):
    from components.serve import roster

    monkeypatch.setattr(event_guard, "ROSTER", roster.Roster())
    event_guard.ROSTER.arrive("ip:1.1.1.1", "page")  # a session with an open page counts as itself

    def event(ip: str, session: str) -> SimpleNamespace:
        request = SimpleNamespace(headers={}, client=SimpleNamespace(host=ip))
        return SimpleNamespace(request=request, username=None, session_hash=session)

    def demo(waiting: list, running: list) -> SimpleNamespace:
        queue = SimpleNamespace(event_queue_per_concurrency_id={"x": SimpleNamespace(queue=waiting)},
                                active_jobs=[running, None])
        return SimpleNamespace(_queue=queue)

    assert event_guard.contenders(demo([event("6.6.6.6", "f1")], [event("1.1.1.1", "page")])) == [
        ("ip:6.6.6.6", "~rest"), ("ip:1.1.1.1", "page")]
    assert event_guard.contenders(SimpleNamespace()) == []


def test_the_apps_views_are_metered_and_its_decodes_and_stop_are_not():
    import app

    metered, unmetered = set(), set()
    for block_fn in app.demo.fns.values():
        if block_fn.fn is None:
            continue
        (metered if block_fn.fn.s2d2_metered else unmetered).add(block_fn.name)
        if block_fn.concurrency_id in gpu_slot.DECODE_SLOTS:
            assert not block_fn.fn.s2d2_metered, block_fn.name
        if door_parent(app.demo.fns, block_fn) is not None or any(t in ("load", "unload") for _, t in block_fn.targets):
            assert block_fn.fn.s2d2_metered and not block_fn.fn.s2d2_refuses, block_fn.name
    assert all(block_fn.fn.s2d2_refuses for block_fn in app.demo.fns.values() if block_fn.name == "step_views")
    assert {"step_views", "server_step", "restyle", "upload_trace", "html_replay", "page_load", "on_unload", "after_run"} <= metered
    assert {"run", "rerun_whatif", "stop"} <= unmetered
