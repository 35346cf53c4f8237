"""Issue 35: in every handler's waiting line (a replay step's, an upload's, ...) ties on places held go to the unit,
then the page, within its fair part of the handler CPU (components/serve/fair_order.py, fair_queue.py,
cpu_share.py `over_part`), so a student's step goes ahead of a flooder's waiting steps even when neither runs
anything now, and students within their parts keep arrival order; the decode places keep places held, then
arrival. Injected clocks, no threads."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from components.serve import fair_queue, front_door, gpu_slot
from components.serve.cpu_share import CpuShare
from components.serve.fair_order import fair_order
from components.serve.roster import Roster

CLASS = "ip:10.0.0.1"
HONEST = "ip:10.1.0.1"


def test_least_recent_use_breaks_ties_between_pages_and_between_units():
    flood = [(CLASS, f"f{k}") for k in range(8) for _ in range(5)]  # eight flooder pages, five steps each, first
    waiting = flood + [(CLASS, "student")]
    used = {**{(CLASS, f"f{k}"): 4.0 for k in range(8)}, (CLASS, "student"): 0.2}
    assert fair_order(waiting, {})[0] == 0  # by places and arrival alone, the flooder's first step goes first
    assert fair_order(waiting, {}, used)[0] == len(flood)  # by recent use, the student's does
    floods = [(f"ip:10.66.1.{k}", "~rest") for k in range(8) for _ in range(4)]
    waiting = floods + [(HONEST, "~rest")]
    unit_used = {**{f"ip:10.66.1.{k}": 3.0 for k in range(8)}, HONEST: 0.1}
    assert fair_order(waiting, {}, {}, unit_used)[0] == len(floods)  # one honest visitor beside eight addresses
    held = {(HONEST, "~rest"): 1}  # its step runs already: places held still come first (no unit takes them all)
    assert fair_order(waiting, held, {}, unit_used)[0] != len(floods)


def test_a_page_with_an_event_running_waits_behind_every_page_with_none():
    """A flooder's page on another address runs a step and has its next one waiting; its unit holds fewer places
    than the class (three students' steps run), so by places alone its second step went ahead of a fourth
    student's first. A page already served waits behind every page that is not, whatever the units hold; with
    nobody else waiting, its event still goes first (nothing is held back)."""
    flooder = ("ip:10.66.0.1", "f")
    held = {(CLASS, "s1"): 1, (CLASS, "s2"): 1, (CLASS, "s3"): 1, flooder: 1}
    waiting = [flooder, flooder, (CLASS, "s4"), (CLASS, "s5")]
    assert [waiting[i] for i in fair_order(waiting, held)] == [(CLASS, "s4"), (CLASS, "s5"), flooder, flooder]
    assert [waiting[i] for i in fair_order(waiting, held, {flooder: 0.0, (CLASS, "s4"): 5.0})][:2] == [
        (CLASS, "s5"), (CLASS, "s4")]  # recent use orders pages among those with none running, never across
    assert fair_order([flooder, flooder], held) == [0, 1]  # alone in the line: served as before
    student_running = {**held, (CLASS, "s4"): 1}  # both pages busy: back to units, then pages, as before
    assert [waiting[i] for i in fair_order(waiting[:3], student_running)][0] == flooder


def test_a_units_use_counts_its_idle_pages_too():
    now = [100.0]
    share = CpuShare(lambda: 0.75, lambda: 10.0, clock=lambda: now[0])
    share.charge((CLASS, "s1"), 1.0)
    share.charge((CLASS, "s2"), 2.0)
    members, units = share.recent([(CLASS, "s1")])
    assert members == {(CLASS, "s1"): pytest.approx(1.0)} and units == {CLASS: pytest.approx(3.0)}
    now[0] += 10.0  # one window: both decay by e
    assert share.recent([(CLASS, "s2")])[1][CLASS] == pytest.approx(3.0 / 2.718281828, rel=1e-6)


def fake_event(ip: str, session: str, line: str) -> SimpleNamespace:
    request = SimpleNamespace(headers={"x-forwarded-for": ip}, client=SimpleNamespace(host="127.0.0.1"))
    return SimpleNamespace(request=request, username=None, session_hash=session, concurrency_id=line)


def test_pages_within_their_parts_keep_arrival_order_whatever_each_used(monkeypatch):
    """A student whose last step was drawn (50 ms) is not sent behind classmates whose steps were cached (nearly
    nothing) again and again: both are within their parts, so the first to ask goes first."""
    monkeypatch.setenv("S2D2_TRUSTED_PROXY_HOPS", "1")
    roster = Roster()
    monkeypatch.setattr(fair_queue, "ROSTER", roster)
    for page in ("drew", "cached"):
        roster.arrive(CLASS, page)
    share = CpuShare(lambda: 0.75, lambda: 10.0, clock=lambda: 100.0)
    monkeypatch.setattr(fair_queue, "CPU_SHARE", share)
    share.charge((CLASS, "drew"), 0.5)  # within its part: 0.75 / 2 pages x 10 s = 3.75 s
    share.charge((CLASS, "cached"), 0.001)
    line = SimpleNamespace(queue=[])
    queue = SimpleNamespace(event_queue_per_concurrency_id={"steps": line}, active_jobs=[None],
                            create_event_queue_for_fn=lambda f: None)
    fair_queue.install(queue, SimpleNamespace(concurrency_id="steps"), front_door.event_client)
    line.queue.append(fake_event("10.0.0.1", "drew", "steps"))
    line.queue.append(fake_event("10.0.0.1", "cached", "steps"))
    assert [e.session_hash for e in line.queue] == ["drew", "cached"]


def flooded_line(monkeypatch, line_id: str) -> SimpleNamespace:
    """A line `line_id` where eight flooder pages behind the class's address (all open pages, with heavy recent
    use) have five events each waiting and two running, and then one student's event joins."""
    monkeypatch.setenv("S2D2_TRUSTED_PROXY_HOPS", "1")
    roster = Roster()
    monkeypatch.setattr(fair_queue, "ROSTER", roster)
    for page in [f"f{k}" for k in range(8)] + ["student"]:  # every page is open: each counts as a member
        roster.arrive(CLASS, page)
    share = CpuShare(lambda: 0.75, lambda: 10.0, clock=lambda: 100.0)
    monkeypatch.setattr(fair_queue, "CPU_SHARE", share)
    for k in range(8):
        share.charge((CLASS, f"f{k}"), 2.0)  # the flooder's pages have stepped a heavy trace
    share.charge((CLASS, "student"), 0.1)
    line = SimpleNamespace(queue=[])
    queue = SimpleNamespace(event_queue_per_concurrency_id={line_id: line}, active_jobs=[None, None],
                            create_event_queue_for_fn=lambda f: None)
    fair_queue.install(queue, SimpleNamespace(concurrency_id=line_id), front_door.event_client)
    queue.active_jobs[0] = [fake_event("10.0.0.1", "f0", line_id)]
    queue.active_jobs[1] = [fake_event("10.0.0.1", "f1", line_id)]
    for k in range(8):
        for _ in range(5):
            line.queue.append(fake_event("10.0.0.1", f"f{k}", line_id))
    line.queue.append(fake_event("10.0.0.1", "student", line_id))
    return line


def test_in_a_steps_line_a_students_step_goes_ahead_of_a_flooders_waiting_steps(monkeypatch):
    line = flooded_line(monkeypatch, "step-line")
    assert line.queue[0].session_hash == "student"  # next free place: the student's, not a flooder page's


def test_the_decode_places_keep_places_held_then_arrival(monkeypatch):
    line = flooded_line(monkeypatch, gpu_slot.GPU_RUN)
    assert line.queue[0].session_hash == "f2"  # a page holding no place, first to arrive: CPU use plays no part
