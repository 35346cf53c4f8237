"""Refusals that slow their sender (components/serve/refusal_hold.py): a page refused again and again gets each
further 429 a moment late, bounded per unit and in all; a page refused now and then, an admitted request and another
page of the same unit are answered at once. No sleeps: the clock is injected and the holds are recorded."""
from __future__ import annotations

import asyncio
import json
import threading
from collections import OrderedDict
from types import SimpleNamespace

import pytest

from components.serve import client_limits, front_door, gpu_slot
from components.serve.fair_rate import FairRate
from components.serve import refusal_hold
from components.serve.refusal_hold import FREE, PER_UNIT, TOTAL, RefusalHold
from components.serve.roster import ROSTER

FLOODER, STUDENT = ("ip:10.1.0.1", "flood"), ("ip:10.1.0.1", "student")
PUBLIC = 0  # the stand-in's one event: a step


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    """The door's tables fresh for each test; one trusted proxy hop, so X-Forwarded-For names the visitor."""
    monkeypatch.setenv("S2D2_TRUSTED_PROXY_HOPS", "1")
    monkeypatch.setenv("S2D2_CLIENT_RATE", "10000")
    monkeypatch.delenv("S2D2_TRUSTED_PROXIES", raising=False)
    for name, value in (("RATE", FairRate(client_limits.client_rate)), ("SESSIONS", client_limits.Sessions()),
                        ("LISTENERS", client_limits.Listeners()), ("NEW_SESSIONS", client_limits.Rate(lambda: 1e4))):
        monkeypatch.setattr(front_door, name, value)
    monkeypatch.setattr(gpu_slot, "JOBS", gpu_slot.Jobs())


def queued(ip: str, session: str) -> SimpleNamespace:
    """A stand-in of an event waiting in Gradio's queue, from `ip`'s page `session`."""
    request_ = SimpleNamespace(headers={"x-forwarded-for": ip}, client=SimpleNamespace(host="127.0.0.1"))
    fn = SimpleNamespace(api_name="step", api_visibility="public", fn=print, inputs=[object()] * 2,
                         concurrency_id="default")
    return SimpleNamespace(request=request_, username=None, session_hash=session, fn=fn)


def blocks(waiting: list) -> SimpleNamespace:
    """A stand-in of Gradio's blocks: one public step event, a queue holding `waiting`, an empty state holder."""
    queue = SimpleNamespace(event_queue_per_concurrency_id={"x": SimpleNamespace(queue=list(waiting))},
                            active_jobs=[None], pending_event_ids_session={})
    holder = SimpleNamespace(session_data=OrderedDict(), time_last_used={}, lock=threading.Lock())
    return SimpleNamespace(fns={PUBLIC: waiting[0].fn}, _queue=queue, state_holder=holder)


def request(door, path: str, body: dict, ip: str = "10.1.0.1", blocks_=None) -> tuple[int, bytes]:
    """(status, reply body) of one POST through `door`."""
    scope = {"type": "http", "path": path, "method": "POST", "query_string": b"", "client": ("127.0.0.1", 5000),
             "headers": [(b"x-forwarded-for", ip.encode()), (b"content-type", b"application/json")],
             "app": SimpleNamespace(get_blocks=lambda: blocks_)}
    raw, out = json.dumps(body).encode(), []

    async def receive():
        return {"type": "http.request", "body": raw, "more_body": False}

    async def send(message):
        out.append(message)

    asyncio.run(door(scope, receive, send))
    status = next(m["status"] for m in out if m["type"] == "http.response.start")
    return status, b"".join(m.get("body", b"") for m in out if m["type"] == "http.response.body")


def holder(seconds: float = 0.5) -> tuple[RefusalHold, list[float]]:
    now, slept = [100.0], []

    async def sleep(s: float) -> None:
        slept.append(s)

    hold = RefusalHold(lambda: seconds, clock=lambda: now[0], sleep=sleep)
    hold.now = now  # type: ignore[attr-defined]
    return hold, slept


def test_only_a_persistent_run_of_refusals_is_held_and_it_is_forgotten_over_time():
    hold, _ = holder()
    assert [hold.delay(FLOODER) for _ in range(int(FREE))] == [0.0] * int(FREE)  # refused now and then: at once
    assert hold.delay(FLOODER) == 0.5  # one more within seconds: held
    hold.release(FLOODER)
    assert hold.delay(STUDENT) == 0.0  # another page of the same address counts its own refusals
    hold.now[0] += 60  # a minute later the run is forgotten
    assert hold.delay(FLOODER) == 0.0


def test_held_refusals_are_bounded_per_unit_and_in_all():
    hold, _ = holder()
    for _ in range(int(FREE)):
        hold.delay(FLOODER)
    assert [hold.delay(FLOODER) for _ in range(PER_UNIT)] == [0.5] * PER_UNIT
    assert hold.delay(FLOODER) == 0.0  # the unit's places are full: answered at once, as without holding
    hold.release(FLOODER)
    assert hold.delay(FLOODER) == 0.5 and hold.held[FLOODER[0]] == PER_UNIT
    total = RefusalHold(lambda: 0.5, clock=lambda: 0.0)
    units = [(f"ip:10.2.{i // 250}.{i % 250}", "p") for i in range(TOTAL // PER_UNIT + 1)]
    for unit in units:
        for _ in range(int(FREE)):
            total.delay(unit)
    held = [total.delay(unit) for unit in units for _ in range(PER_UNIT)]
    assert held.count(0.5) == TOTAL  # however many addresses, at most TOTAL held at once


def test_hold_waits_and_then_frees_its_place():
    hold, slept = holder()
    for _ in range(int(FREE)):
        asyncio.run(hold.hold(FLOODER))
    assert slept == []
    asyncio.run(hold.hold(FLOODER))
    assert slept == [0.5] and hold.held[FLOODER[0]] == 0


def test_the_setting_is_read_in_milliseconds_zero_turns_it_off(monkeypatch):
    monkeypatch.setenv("S2D2_REFUSAL_HOLD_MS", "0")
    off = RefusalHold(clock=lambda: 0.0)
    assert max(off.delay(FLOODER) for _ in range(50)) == 0.0
    monkeypatch.setenv("S2D2_REFUSAL_HOLD_MS", "250")
    assert refusal_hold.refusal_hold_s() == pytest.approx(0.25)
    monkeypatch.setenv("S2D2_REFUSAL_HOLD_MS", "9000")
    with pytest.raises(ValueError, match="S2D2_REFUSAL_HOLD_MS"):
        refusal_hold.refusal_hold_s()


def test_the_door_holds_a_pages_persistent_429s_and_nothing_else(monkeypatch):
    hold, slept = holder()
    monkeypatch.setattr(front_door, "HOLD", hold)
    ROSTER.arrive("ip:10.1.0.1", "flood")  # two open pages of one address
    ROSTER.arrive("ip:10.1.0.1", "student")
    try:
        full = blocks(waiting=[queued("10.1.0.1", "flood")] * 6)  # the flooding page's own queue cap is reached
        join = {"data": [None, 0], "fn_index": PUBLIC, "session_hash": "flood"}
        answers = [request(front_door.FrontDoor(lambda *a: None), "/gradio_api/queue/join", join, blocks_=full)
                   for _ in range(int(FREE) + 3)]
        assert {status for status, _ in answers} == {429}
        assert len({body for _, body in answers}) == 1  # the same one line, held or not
        assert slept == [0.5] * 3  # the refusals past FREE were held
        student = {"data": [None, 0], "fn_index": PUBLIC, "session_hash": "student"}
        assert request(front_door.FrontDoor(_ok), "/gradio_api/queue/join", student, blocks_=full)[0] == 200
        assert slept == [0.5] * 3  # an admitted request is never held
    finally:
        ROSTER.leave("ip:10.1.0.1", "flood")
        ROSTER.leave("ip:10.1.0.1", "student")


async def _ok(scope, receive, send):
    await receive()
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"{}"})
