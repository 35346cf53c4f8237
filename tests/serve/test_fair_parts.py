"""Issue 35, figure (c) at the policy level: a flooder behind the class's own address cannot spend the class's
request rate, queue places or open streams. Each is work-conserving (a page alone may use the unit's whole
allowance) and split by page while others of the unit ask (components/serve/fair_rate.py, fair_places.py); forged
hashes are one member (REST); the unit's total stays bounded. Clocks are injected: nothing sleeps."""
from __future__ import annotations

from collections import Counter
from types import SimpleNamespace

import pytest

from components.serve import client_limits, fair_queue, front_door
from components.serve.fair_places import may_queue, may_take
from components.serve.fair_rate import FairRate
from components.serve.roster import REST, Roster

CLASS = "ip:10.0.0.1"


def rate(per_s: float = 20.0, burst: float | None = None) -> FairRate:
    return FairRate(lambda: per_s, (lambda: burst) if burst is not None else None, clock=lambda: 0.0)


def test_a_page_alone_may_use_the_units_whole_allowance():
    r = rate(20.0)
    assert sum(r.allow(CLASS, "flooder", scale=2.0, now=0.0) for _ in range(200)) == 120  # the burst, 3 x 20 x 2
    admitted = sum(r.allow(CLASS, "flooder", scale=2.0, now=1 + k / 1000) for k in range(10_000))
    assert 400 <= admitted <= 440  # then the unit's rate, 40 a second over those 10 s, and what decayed meanwhile


def simulate(r: FairRate, seconds: float, students: int, every_s: float, flood_per_s: float,
             flooder: str = "flooder", scale: float = 1.0) -> tuple[int, int, int]:
    """Students (one request each every `every_s`, staggered) beside a flooder sending `flood_per_s`; returns
    (student requests, allowed of them, flooder requests allowed)."""
    asked = served = flood = 0
    ticks = sorted([(k * every_s + i * every_s / students, f"s{i}") for i in range(students)
                    for k in range(int(seconds / every_s))]
                   + [(k / flood_per_s, flooder) for k in range(int(seconds * flood_per_s))])
    for now, who in ticks:
        ok = r.allow(CLASS, who, scale=scale, now=now)
        if who == flooder:
            flood += ok
        else:
            asked, served = asked + 1, served + ok
    return asked, served, flood


def test_a_flooder_behind_the_class_address_cannot_spend_the_students_requests():
    members = 31  # thirty students and the flooder's page
    scale = client_limits.unit_rate_scale(members)
    r = rate(20.0)
    asked, served, flood = simulate(r, 60.0, 30, 2.0, 500.0, scale=scale)
    assert served == asked == 900  # every student's step is let through
    top, per_s = 60 * scale, 20 * scale
    part_per_s = per_s / members  # the flooder's part of the unit's rate while the class asks
    assert flood <= top + part_per_s * 60 * 1.2  # its burst while alone, then about one page's part


def test_the_single_bucket_this_replaces_let_the_flooder_starve_the_class():
    """The shape of the rule that failed figure (c): one bucket for the unit (client_limits.Rate)."""
    bucket = client_limits.Rate(lambda: 20.0, clock=lambda: 0.0)
    one_bucket = SimpleNamespace(allow=lambda unit, member, scale, now: bucket.allow(unit, now=now, scale=scale))
    asked, served, _ = simulate(one_bucket, 60.0, 30, 2.0, 500.0, scale=client_limits.unit_rate_scale(31))
    assert served < asked * 0.2  # most of the class's steps are refused with the flooder's


def test_forged_hashes_are_one_member_so_they_do_not_multiply_a_share():
    roster = Roster()
    for i in range(30):
        roster.arrive(CLASS, f"s{i}")
    forged = [roster.member(CLASS, f"forged-{k}") for k in range(1000)]
    assert set(forged) == {REST}  # every hash that never opened a page is the unit's REST
    r = rate(20.0)
    asked, served, rest = simulate(r, 30.0, 30, 2.0, 500.0, flooder=REST, scale=client_limits.unit_rate_scale(30))
    assert served == asked and rest <= 60 * client_limits.unit_rate_scale(30) * 1.6


def test_the_units_total_stays_bounded_however_many_pages_flood():
    r = rate(10.0)
    scale = client_limits.unit_rate_scale(48)
    total = sum(r.allow(CLASS, f"p{k % 48}", scale=scale, now=k / 2000) for k in range(60 * 2000))
    assert total <= 10 * scale * 60 + 2 * 30 * scale  # the unit's rate over a minute, plus at most two bursts


def test_a_page_over_its_part_gets_its_next_request_once_its_use_decays():
    r = rate(1.0, burst=3.0)
    assert [r.allow(CLASS, "a", now=0.0) for _ in range(4)] == [True, True, True, False]  # alone: the whole burst
    assert r.allow(CLASS, "b", now=0.0)  # another page asks: its part is there
    assert not r.allow(CLASS, "a", now=0.5)  # a is past its part (1.5) while b asks
    assert r.allow(CLASS, "a", now=20.0)  # b went quiet, a's use decayed: a is let in again


def test_a_page_that_closed_holds_no_part_of_the_next_pages_allowance(monkeypatch):
    # a student who closed a tab a moment ago is not asking: the page opened next gets the whole allowance at once
    monkeypatch.setattr(front_door, "ROSTER", Roster())
    monkeypatch.setattr(front_door, "RATE", rate(1.0, burst=6.0))
    monkeypatch.setattr(front_door, "STOP_RATE", rate(1.0, burst=6.0))
    for page in ("old", "new"):
        front_door.ROSTER.arrive(CLASS, page)
    assert sum(front_door.RATE.allow(CLASS, "old", now=0.0) for _ in range(6)) == 6
    assert sum(front_door.RATE.allow(CLASS, "new", now=0.0) for _ in range(6)) == 3  # beside old: its half
    front_door.heartbeat_closed(CLASS, "old")
    assert front_door.RATE.allow(CLASS, "new", now=0.0)  # old left: new is alone with the whole burst
    assert sum(front_door.RATE.allow(CLASS, "new", now=0.0) for _ in range(6)) == 2  # up to 6 in all, not past


# -- held places: queue places and open streams (fair_places) ------------------------------------------------------

def test_a_unit_below_its_cap_lets_anyone_take_a_place_and_a_full_one_only_those_under_their_part():
    assert may_take({"flooder": 47}, "flooder", 48)  # alone, the whole cap
    assert not may_take({"flooder": 48}, "flooder", 48)
    assert may_take({"flooder": 48}, "s1", 48)  # the unit is full of the flooder's: a student still gets one
    held = Counter({"flooder": 48})
    for i in range(40):  # forty students each take a place while the flooder holds the cap
        assert may_take(held, f"s{i}", 48) and not may_take(held, "flooder", 48)
        held[f"s{i}"] += 1
    for i in range(40):  # and then take all they are let: never past their part, never past twice the cap
        while may_take(held, f"s{i}", 48):
            held[f"s{i}"] += 1
    assert sum(held.values()) <= 2 * 48  # bounded: twice the cap at most


def test_streams_a_flooder_holds_do_not_keep_a_students_heartbeat_out(monkeypatch):
    monkeypatch.setenv("S2D2_CLIENT_STREAMS", "8")
    listeners = client_limits.Listeners()
    opened = sum(listeners.open(f"forged-{k}", CLASS, member=REST) for k in range(100))
    assert opened == 8  # the forged streams fill the unit's cap, as one member
    assert listeners.open("student", CLASS, heartbeat=True, member="student")  # a page's heartbeat still opens
    assert not listeners.open("forged-x", CLASS, member=REST)
    listeners.close("student", CLASS, heartbeat=True, member="student")
    assert listeners.open("student2", CLASS, heartbeat=True, member="student2")


def test_a_heartbeat_holds_its_own_pages_part_and_a_stream_its_pages(monkeypatch):
    monkeypatch.setattr(front_door, "ROSTER", Roster())
    assert front_door.stream_member(CLASS, "page", heartbeat=True) == "page"  # about to be counted
    assert front_door.stream_member(CLASS, "page", heartbeat=False) == REST  # no page yet: REST
    front_door.ROSTER.arrive(CLASS, "page")
    assert front_door.stream_member(CLASS, "page", heartbeat=False) == "page"
    monkeypatch.setenv("S2D2_UNIT_SESSIONS", "1")
    assert front_door.stream_member(CLASS, "other", heartbeat=True) == REST  # the roster is full: REST


def fake_event(ip: str, session: str) -> SimpleNamespace:
    request = SimpleNamespace(headers={"x-forwarded-for": ip}, client=SimpleNamespace(host="127.0.0.1"))
    return SimpleNamespace(request=request, username=None, fn=None, session_hash=session, concurrency_id="x")


def test_a_flooder_filling_the_units_queue_places_leaves_a_student_room(monkeypatch):
    monkeypatch.setenv("S2D2_TRUSTED_PROXY_HOPS", "1")
    monkeypatch.setenv("S2D2_CLIENT_QUEUED", "6")
    monkeypatch.setenv("S2D2_UNIT_QUEUED", "12")
    roster = Roster()
    monkeypatch.setattr(front_door, "ROSTER", roster)
    for page in ("f1", "f2", "student"):
        roster.arrive(CLASS, page)
    fns = {0: SimpleNamespace(api_name="step", api_visibility="public", fn=print, trigger_after=None,
                              concurrency_id="x", validator=None, inputs=[])}
    waiting = [fake_event("10.0.0.1", "f1") for _ in range(6)] + [fake_event("10.0.0.1", "f2") for _ in range(6)]
    queue = SimpleNamespace(event_queue_per_concurrency_id={"x": SimpleNamespace(queue=waiting)}, active_jobs=[None])
    blocks = SimpleNamespace(fns=fns, _queue=queue, state_holder=None)
    monkeypatch.setattr(front_door, "count_values", lambda *a, **k: None)
    monkeypatch.setattr(front_door, "file_values", lambda *a, **k: None)
    with pytest.raises(front_door.Refusal):  # the unit holds its 12: the flooder's page is refused
        front_door.admit_request("/queue/join", {"fn_index": 0, "session_hash": "f1"}, "ip:10.0.0.1", blocks)
    front_door.admit_request("/queue/join", {"fn_index": 0, "session_hash": "student"}, "ip:10.0.0.1", blocks)


# -- the server's queue, nearly full (fair_places.may_queue), and every waiting line in fair order ----------------

STRANGER = "ip:9.9.9.9"


def test_a_nearly_full_queue_lets_students_in_and_holds_the_unit_that_filled_it():
    line = 56
    held = Counter({(STRANGER, f"f{k}"): 6 for k in range(8)})  # a stranger's eight pages hold 48 places
    held[(CLASS, "s0")] = 8
    assert not may_queue(held, (STRANGER, "f0"), line)  # over its part: it waits for its events to drain
    assert all(may_queue(held, (CLASS, f"s{i}"), line) for i in range(1, 30))  # every student still joins
    own = Counter({(CLASS, f"f{k}"): 6 for k in range(8)})  # the same flooder behind the class's own address
    own.update({(CLASS, f"s{i}"): 1 for i in range(8)})
    assert not may_queue(own, (CLASS, "f3"), line) and may_queue(own, (CLASS, "s9"), line)
    assert may_queue(Counter({(STRANGER, "x"): 56}), (CLASS, "s0"), line)  # a unit holding none always joins


def test_a_students_step_waits_behind_one_of_the_flooders_not_its_backlog(monkeypatch):
    monkeypatch.setenv("S2D2_TRUSTED_PROXY_HOPS", "1")
    monkeypatch.setattr(fair_queue, "ROSTER", Roster())
    fn = SimpleNamespace(concurrency_id="x")  # a replay step's line (fake_event's concurrency id)
    line = SimpleNamespace(queue=[])
    queue = SimpleNamespace(event_queue_per_concurrency_id={"x": line}, active_jobs=[None],
                            create_event_queue_for_fn=lambda f: None)
    fair_queue.install(queue, fn, front_door.event_client)
    queue.active_jobs[0] = [fake_event("9.9.9.9", "f") for _ in range(4)]  # the flooder's steps run
    for _ in range(40):
        line.queue.append(fake_event("9.9.9.9", "f"))  # and forty more wait
    line.queue.append(fake_event("10.0.0.1", "student"))
    assert line.queue[0].session_hash == "student"  # the next free place is the student's


def test_the_door_puts_every_queued_events_line_in_fair_order_not_only_the_decodes(monkeypatch):
    monkeypatch.setattr(front_door, "count_values", lambda *a, **k: None)
    monkeypatch.setattr(front_door, "file_values", lambda *a, **k: None)
    step = SimpleNamespace(api_name="step", api_visibility="public", fn=print, trigger_after=None,
                           concurrency_id="x", validator=None, inputs=[], queue=True)
    line = SimpleNamespace(queue=[])
    queue = SimpleNamespace(event_queue_per_concurrency_id={"x": line}, active_jobs=[None],
                            create_event_queue_for_fn=lambda f: None)
    blocks = SimpleNamespace(fns={0: step}, _queue=queue, state_holder=None)
    front_door.admit_request("/queue/join", {"fn_index": 0, "session_hash": "page"}, CLASS, blocks)
    assert isinstance(line.queue, fair_queue.FairLine)


def test_the_default_queue_holds_two_units_full_backlogs_and_the_places_kept_for_newcomers(monkeypatch):
    """A stranger alone may fill its unit's cap (work-conserving); a class arriving then must still find room in
    Gradio's max_size, which counts waiting events and refuses past it with no fairness at all."""
    from s2d2.limits import limits

    monkeypatch.delenv("S2D2_QUEUE_SIZE", raising=False)
    monkeypatch.delenv("S2D2_UNIT_QUEUED", raising=False)
    assert limits().queue_size >= 2 * client_limits.unit_queued_cap() + front_door.RESERVED


def test_joins_admitted_but_not_yet_in_gradios_queue_count_against_their_unit(monkeypatch):
    """A burst of joins all pass the door before Gradio puts the first in its queue: the door counts them meanwhile
    (front_door.JOINING), so a burst cannot overshoot the caps by its own size."""
    monkeypatch.setenv("S2D2_CLIENT_QUEUED", "6")
    monkeypatch.setattr(front_door, "ROSTER", Roster())
    monkeypatch.setattr(front_door, "JOINING", Counter({(STRANGER, REST): 40}))
    queue = SimpleNamespace(event_queue_per_concurrency_id={}, active_jobs=[None], pending_event_ids_session={})
    with pytest.raises(front_door.Refusal):
        front_door.check_room(queue, (STRANGER, REST), "burst-41")
    front_door.check_room(queue, (CLASS, REST), "student")  # another unit is not held back by them


def test_parts_of_a_half_full_queue_add_up_to_the_line_not_past_the_queue(monkeypatch):
    """Eight flooding addresses of eight pages each take all the places they are let: together they stay under the
    line, so Gradio's own max size (which refuses with no fairness) is never what an honest visitor meets."""
    line, held = 120, Counter()
    for _ in range(10):
        for unit in range(8):
            for page in range(8):
                if may_queue(held, (f"ip:10.66.1.{unit}", f"p{page}"), line):
                    held[(f"ip:10.66.1.{unit}", f"p{page}")] += 1
    assert sum(held.values()) <= line
    assert may_queue(held, ("ip:10.1.0.1", "honest"), line)


def test_units_that_filled_the_first_half_cannot_take_the_queue_past_its_line(monkeypatch):
    """Issue 35 figure (d): two flooding addresses fill the first half of the queue before six more arrive; each
    newcomer is under its part, so the parts alone let the eight past the line, and Gradio's max_size then refused
    an honest visitor's step. The door stops every unit holding events at the line: the last RESERVED places stay
    for a unit with nothing queued."""
    from s2d2.limits import limits

    monkeypatch.setenv("S2D2_CLIENT_QUEUED", "1000")
    monkeypatch.setenv("S2D2_UNIT_QUEUED", "1000")
    monkeypatch.setattr(front_door, "ROSTER", Roster())
    monkeypatch.setattr(front_door, "JOINING", Counter())
    line = limits().queue_size - front_door.RESERVED
    waiting: list = []
    queue = SimpleNamespace(event_queue_per_concurrency_id={"x": SimpleNamespace(queue=waiting)}, active_jobs=[None],
                            pending_event_ids_session={})
    monkeypatch.setenv("S2D2_TRUSTED_PROXY_HOPS", "1")

    def join(ip: str, session: str) -> bool:
        try:
            front_door.check_room(queue, (f"ip:{ip}", REST), session)
        except front_door.Refusal:
            return False
        waiting.append(fake_event(ip, session))
        return True

    for k in range(line):  # two addresses, turn about, while the queue is under half full
        join(f"10.66.1.{k % 2}", f"s{k}")
    for k in range(20 * line):  # then eight, as fast as they are let
        join(f"10.66.1.{k % 8}", f"t{k}")
    # past the line only the six newcomers' first events (each a unit with nothing queued then): never Gradio's max
    assert len(waiting) == line + 6 < limits().queue_size
    assert join("10.1.0.1", "honest")  # a visitor with nothing queued still finds a place
