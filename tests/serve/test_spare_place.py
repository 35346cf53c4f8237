"""components/serve/spare_place.py: in a handler line the last free place goes only to a page within its fair part
(and its unit within the unit's); Gradio's own `get_events` (what its start loop calls) decides with it."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
from gradio.queueing import EventQueue, Queue

from components.serve import fair_queue, front_door, spare_place
from components.serve.cpu_share import CPU_SHARE
from components.serve.roster import Roster

FLOODER, STUDENT = "9.9.9.9", "10.0.0.1"


def event(ip: str, session: str) -> SimpleNamespace:
    request = SimpleNamespace(headers={"x-forwarded-for": ip}, client=SimpleNamespace(host="127.0.0.1"))
    return SimpleNamespace(request=request, username=None, fn=SimpleNamespace(batch=False), session_hash=session,
                           concurrency_id="x", _id=f"{ip}/{session}")


@pytest.fixture()
def line(monkeypatch):
    """A real Gradio line of four places, installed as the front door installs it, the flooder over its part."""
    monkeypatch.setenv("S2D2_TRUSTED_PROXY_HOPS", "1")
    monkeypatch.setattr(fair_queue, "ROSTER", Roster())
    monkeypatch.setattr(spare_place, "RECHECK_S", 0.0)  # every read decides afresh (no clock in the test)
    over = {f"ip:{FLOODER}"}  # the units over their part (and their pages)
    monkeypatch.setattr(CPU_SHARE, "over_part", lambda asks: (
        {ask: float(ask[0] in over) for ask in asks}, {ask[0]: float(ask[0] in over) for ask in asks}))
    gradio_line = EventQueue("x", 4)
    queue = SimpleNamespace(event_queue_per_concurrency_id={"x": gradio_line}, active_jobs=[None] * 8,
                            create_event_queue_for_fn=lambda f: None)
    fair_queue.install(queue, SimpleNamespace(concurrency_id="x"), front_door.event_client)
    return SimpleNamespace(gradio=gradio_line, queue=queue, over=over)


def start(line) -> list:
    """Gradio's get_events until it starts nothing: the events started, running as its start loop runs them."""
    started = []
    while (batch := Queue.get_events(line.queue)) is not None:
        started.append(batch[0][0].session_hash)
        jobs = line.queue.active_jobs
        jobs[jobs.index(None)] = batch[0]
        line.gradio.current_concurrency += 1
    return started


def test_pages_over_their_part_hold_at_most_all_places_but_one_and_a_student_finds_it_at_once(line):
    for k in range(10):
        line.gradio.queue.append(event(FLOODER, f"f{k % 8}"))
    assert len(start(line)) == 3  # the fourth place waits for someone within their part
    line.gradio.queue.append(event(STUDENT, "student"))
    assert start(line) == ["student"]
    assert line.gradio.concurrency_limit == 4  # all places taken: Gradio sees its own limit


def test_while_nobody_is_over_their_part_every_place_goes_to_whoever_asks(line):
    line.over.clear()
    for k in range(10):
        line.gradio.queue.append(event(FLOODER, f"f{k % 8}"))
    assert len(start(line)) == 4


def test_a_head_within_its_part_takes_the_last_place_and_a_decode_line_is_left_as_it_is(line, monkeypatch):
    for k in range(3):
        line.gradio.queue.append(event(STUDENT, f"s{k}"))
    line.gradio.queue.append(event(STUDENT, "s3"))
    assert len(start(line)) == 4
    decodes = EventQueue("gpu", 4)
    queue = SimpleNamespace(event_queue_per_concurrency_id={"gpu": decodes}, active_jobs=[None],
                            create_event_queue_for_fn=lambda f: None)
    fair_queue.install(queue, SimpleNamespace(concurrency_id="gpu"), front_door.event_client)
    assert type(decodes) is EventQueue and decodes.concurrency_limit == 4
