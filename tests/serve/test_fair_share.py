"""Issue 35 items 1, 2 and 6 at the policy level, with injected clocks: idle capacity goes to whoever asks; while
others wait it is divided equally between units (an address or an account), then between a unit's counted
sessions; forged hashes are one member; the server's total handler CPU is bounded; chained events join once per
finished parent; a class's page loads get in."""
from __future__ import annotations

import time
from collections import Counter
from types import SimpleNamespace

import pytest

from components.serve import client_limits, fair_queue, front_door
from components.serve.chains import Chains, door_parent
from components.serve.cpu_share import CpuShare
from components.serve.fair_order import fair_order
from components.serve.roster import REST, Roster

CLASS = "ip:10.0.0.1"
STRANGER = "ip:9.9.9.9"


def places(waiting: list, n: int, held: dict | None = None) -> Counter:
    """Who gets the next `n` free places: (unit, member) counts."""
    order = fair_order(waiting, held or {})
    return Counter(waiting[i] for i in order[:n])


# -- decode places (fair_order) -----------------------------------------------------------------------------------

def test_a_class_alone_gets_every_place_in_arrival_order():
    waiting = [(CLASS, f"s{i}") for i in range(30)]
    assert fair_order(waiting, {}) == list(range(30))


def test_a_stranger_beside_a_class_waits_for_one_place_and_the_class_keeps_at_least_half():
    waiting = [(CLASS, f"s{i}") for i in range(30)] + [(STRANGER, "x")]
    held = {(CLASS, f"r{i}"): 1 for i in range(16)}  # the class already fills the batch
    assert fair_order(waiting, held)[0] == 30  # the stranger's Run gets the next free place
    flood = [(CLASS, f"s{i}") for i in range(30)] + [(STRANGER, f"x{i}") for i in range(30)]
    got = places(flood, 16)
    assert sum(n for (unit, _), n in got.items() if unit == CLASS) == 8  # half of the places, split by student
    assert all(n == 1 for n in got.values())


def test_forged_hashes_behind_the_class_address_get_one_students_part():
    students = [(CLASS, f"s{i}") for i in range(6)]
    forged = [(CLASS, REST)] * 40  # 40 hashes that never opened a page: one member
    waiting = forged[:20] + students + forged[20:]  # the flooder asked first, too
    got = places(waiting, 7)  # one Run per student (one per session): each round gives the flooder one place
    assert got[(CLASS, REST)] == 1 and all(got[s] == 1 for s in students)
    held = {(CLASS, REST): 3, (CLASS, "s0"): 1}  # the flooder holds three places already
    assert [waiting[i] for i in fair_order(waiting, held)[:5]] == students[1:]  # students first


# -- who counts as a student (Roster) -----------------------------------------------------------------------------

def test_only_open_pages_count_and_at_most_unit_sessions_of_them(monkeypatch):
    monkeypatch.setenv("S2D2_UNIT_SESSIONS", "48")
    roster = Roster()
    for i in range(40):  # a class of 40 opens its pages
        assert roster.arrive(CLASS, f"s{i}")
    assert roster.count(CLASS) == 40 and roster.member(CLASS, "s7") == "s7"
    assert roster.member(CLASS, "forged") == REST  # never opened a page
    for i in range(40, 100):
        roster.arrive(CLASS, f"s{i}")
    assert roster.count(CLASS) == 48 and roster.member(CLASS, "s99") == REST  # beyond the cap: one member
    assert not roster.arrive(STRANGER, "s3") and roster.member(STRANGER, "s3") == REST  # one unit per session
    roster.arrive(CLASS, "s7")  # a second tab's heartbeat on the same session
    roster.leave(CLASS, "s7")
    assert roster.member(CLASS, "s7") == "s7"
    roster.leave(CLASS, "s7")
    assert roster.member(CLASS, "s7") == REST and roster.count(CLASS) == 47


def test_queue_caps_scale_with_a_units_pages_and_stay_bounded(monkeypatch):
    monkeypatch.setenv("S2D2_CLIENT_QUEUED", "6")
    monkeypatch.setenv("S2D2_UNIT_QUEUED", "48")
    assert client_limits.unit_queued(0) == client_limits.unit_queued(1) == 6  # a lone visitor: as before
    assert client_limits.unit_queued(5) == 30
    assert client_limits.unit_queued(40) == 48  # bounded, however many pages


# -- handler CPU (CpuShare) ---------------------------------------------------------------------------------------

def bound(share: float, members: int, seconds: float = 120.0, cost: float = 0.05, window: float = 10.0) -> float:
    """The most `members` asking all the time can be let spend in `seconds`: each member's use stays under its part
    of the window plus one event (it is let in while under), and what is let in is what decays, so the total is
    at most (share x window + members x cost) x (1 + seconds / window)."""
    return (share * window + members * cost) * (1 + seconds / window)


def flood(asks: list, seconds: float = 120.0, cost: float = 0.05, tick: float = 0.1,
          every: dict | None = None) -> Counter:
    """Every ask sends an event of `cost` CPU seconds every `tick` (or every `every[ask]` seconds) whenever it is
    let in; the CPU seconds each was let spend. Share 0.75 s a second, window 10 s, on an injected clock."""
    clock = [0.0]
    share = CpuShare(lambda: 0.75, lambda: 10.0, lambda: clock[0])
    got: Counter = Counter()
    step = 0
    while clock[0] < seconds:
        for ask in asks:
            period = round((every or {}).get(ask, tick) / tick)
            if step % period == 0 and share.refusal(ask, lambda: asks) is None:
                share.charge(ask, cost)
                got[ask] += cost
        step += 1
        clock[0] = step * tick
    return got


def test_a_visitor_alone_is_never_refused():
    assert flood([(CLASS, "s0")], seconds=60)[(CLASS, "s0")] == pytest.approx(0.05 * 600)


def test_a_class_alone_gets_the_whole_share_split_between_its_students():
    students = [(CLASS, f"s{i}") for i in range(6)]
    got = flood(students)
    total = sum(got.values())
    assert 0.75 * 120 <= total <= bound(0.75, 6)  # everything given out, and no more
    assert max(got.values()) - min(got.values()) <= 0.15 * total / 6  # equal parts


def test_a_class_beside_a_stranger_keeps_at_least_half():
    students = [(CLASS, f"s{i}") for i in range(6)]
    got = flood(students + [(STRANGER, "x")])
    class_total = sum(got[s] for s in students)
    assert class_total >= 0.95 * got[(STRANGER, "x")]  # one half each, up to one event of overshoot a window


def test_a_flooder_behind_a_busy_class_address_gets_one_students_part():
    students = [(CLASS, f"s{i}") for i in range(6)]  # every student asks all the time: the server is busy
    got = flood(students + [(CLASS, REST)])
    assert got[(CLASS, REST)] <= bound(0.75 / 7, 1) < 0.75 * 120 / 4  # one member's part, not the class's share
    assert min(got[s] for s in students) >= 0.9 * got[(CLASS, REST)]  # and each student as much


def test_a_flooder_beside_light_students_takes_only_the_idle_capacity():
    students = [(CLASS, f"s{i}") for i in range(6)]
    every = {s: 2.0 for s in students}  # students step every 2 s (50 ms each: 0.025 s a second)
    got = flood(students + [(CLASS, REST)], cost=0.1, every=every)  # the flooder asks twice the server's bound
    for s in students:
        assert got[s] == pytest.approx(0.1 * 60)  # every step of every student let in
    assert sum(got.values()) <= bound(0.75, 7, cost=0.1)  # the flooder got what they left, and the total is bounded


def test_a_light_student_whose_one_step_was_dear_is_not_refused_while_the_server_is_idle():
    """Figure (b) of issue 35: thirty students step every 2 s at 5 ms a step, far under the server's bound; one
    step cost a cold drawing (0.5 s, twice a thirtieth of the share's window). Nobody is refused: the server had
    idle CPU. (Refused by each one's thirtieth alone, that student lost steps.)"""
    clock = [0.0]
    share = CpuShare(lambda: 0.75, lambda: 10.0, lambda: clock[0])
    students = [(CLASS, f"s{i}") for i in range(30)]
    share.charge(students[0], 0.5)
    refused = 0
    for tick in range(600):  # 60 s in 0.1 s ticks; each student steps every 2 s, all asking at once
        clock[0] = tick * 0.1
        for k, s in enumerate(students):
            if (tick + k) % 20 == 0:
                if share.refusal(s, lambda: students) is None:
                    share.charge(s, 0.005)
                else:
                    refused += 1
    assert refused == 0
    share.charge(students[1], 8.0)  # the server's total is now past its bound (7.5 s in the window)
    assert share.busy() and share.refusal(students[1], lambda: students) is not None  # over its part: refused
    assert share.refusal(students[2], lambda: students) is None  # under its part: never refused


def test_the_total_is_bounded_whatever_the_number_of_addresses():
    honest = (STRANGER, "h")
    flooders = [(f"ip:6.6.6.{i}", "x") for i in range(8)]
    got = flood(flooders + [honest], every={honest: 2.0})
    assert sum(got.values()) <= bound(0.75, 9)  # eight addresses: the share, not 8 bursts
    assert sum(got[f] for f in flooders) >= 0.75 * 120 - got[honest]  # what the honest visitor left, given out
    assert got[honest] == pytest.approx(0.05 * 60)  # every honest step let in


def test_a_refusal_says_when_to_try_again():
    clock = [0.0]
    share = CpuShare(lambda: 1.0, lambda: 10.0, lambda: clock[0])
    me, other = (CLASS, "s0"), (STRANGER, "x")
    share.charge(me, 10 * 2.718281828 / 2)  # e times its allowance (half of 1 s a second, over 10 s)
    assert share.refusal(me, lambda: [me, other]) == (
        "You have used your share of the server's time for now, and other visitors are waiting: try again in "
        "about 10 s.")
    assert share.refusal(me, lambda: [me]) is None  # nobody else waits: let in
    clock[0] = 10.5
    assert share.refusal(me, lambda: [me, other]) is None  # its use decayed under its part


# -- chained events (Chains) ---------------------------------------------------------------------------------------

def test_a_chained_event_joins_once_per_finished_parent_of_the_same_session():
    clock = [0.0]
    chains = Chains(lambda: clock[0])
    assert not chains.take("s", 61)  # show_state joined directly by fn index: refused
    chains.finished("s", 61)
    assert not chains.take("other", 61)  # another session's Run does not let this one in
    assert chains.take("s", 61) and not chains.take("s", 61)  # once per finished Run
    chains.finished("s", 61)
    clock[0] = 1000.0
    assert not chains.take("s", 61)  # a stale finish does not count


def test_only_events_after_a_python_event_are_door_chained():
    class Fn:
        def __init__(self, fn, after=None):
            self.fn, self.trigger_after = fn, after

    fns = {0: Fn(print), 1: Fn(print, 0), 2: Fn(None), 3: Fn(print, 2)}
    assert [door_parent(fns, fns[i]) for i in range(4)] == [None, 0, None, None]


# -- session creation -------------------------------------------------------------------------------------------

def test_forty_page_loads_in_thirty_seconds_get_in_and_hundreds_a_minute_are_paced(monkeypatch):
    monkeypatch.delenv("S2D2_CLIENT_NEW_SESSIONS", raising=False)
    monkeypatch.delenv("S2D2_CLIENT_NEW_SESSIONS_BURST", raising=False)
    clock = [0.0]
    new = client_limits.Rate(client_limits.new_session_rate, client_limits.new_session_burst, lambda: clock[0])
    allowed = 0
    for i in range(40):  # 40 students, in one burst inside 30 s
        clock[0] = i * 0.1
        allowed += new.allow(CLASS)
    assert allowed == 40
    clock[0], allowed = 100.0, 0
    for i in range(300):  # 300 in one minute from one address, after the bucket filled again
        clock[0] = 100.0 + i * 0.2
        allowed += new.allow(CLASS)
    assert allowed <= 40 + 2 * 60 + 1


# -- the same rules where they are wired (front door, Gradio's queue, identity) ------------------------------------

def fake_event(ip: str, session: str, fn: object = None) -> SimpleNamespace:
    request = SimpleNamespace(headers={"x-forwarded-for": ip}, client=SimpleNamespace(host="127.0.0.1"))
    return SimpleNamespace(request=request, username=None, fn=fn, session_hash=session, concurrency_id="gpu_run")


def test_the_decode_line_in_gradios_queue_gives_a_free_place_to_the_stranger_first(monkeypatch):
    monkeypatch.setenv("S2D2_TRUSTED_PROXY_HOPS", "1")
    fn = SimpleNamespace(concurrency_id="gpu_run")
    line = SimpleNamespace(queue=[])
    queue = SimpleNamespace(event_queue_per_concurrency_id={"gpu_run": line}, active_jobs=[None, None],
                            create_event_queue_for_fn=lambda f: None)
    fair_queue.install(queue, fn, front_door.event_client)
    fair_queue.install(queue, fn, front_door.event_client)  # idempotent
    queue.active_jobs[0] = [fake_event("10.0.0.1", f"r{i}") for i in range(3)]  # the class decodes three
    for i in range(5):
        line.queue.append(fake_event("10.0.0.1", f"s{i}"))
    line.queue.append(fake_event("9.9.9.9", "x"))
    assert line.queue[0].session_hash == "x"  # Gradio starts queue[0] when a place frees: the stranger's Run
    assert [e.session_hash for e in line.queue] == ["x", "s0", "s1", "s2", "s3", "s4"]  # its rank, as shown
    line.queue.remove(line.queue[0])
    assert line.queue[0].session_hash == "s0" and len(line.queue) == 5


def test_the_door_lets_a_chained_event_join_once_per_finished_parent(monkeypatch):
    monkeypatch.setattr(front_door, "CHAINS", Chains())
    fns = {0: SimpleNamespace(api_name="run", api_visibility="public", fn=print, trigger_after=None),
           1: SimpleNamespace(api_name=None, api_visibility="private", fn=print, trigger_after=0)}
    queue = SimpleNamespace(event_queue_per_concurrency_id={}, active_jobs=[None])
    blocks = SimpleNamespace(fns=fns, _queue=queue, state_holder=None)
    join = {"fn_index": 1, "session_hash": "page"}
    with pytest.raises(front_door.Refusal) as info:
        front_door.admit_request("/queue/join", dict(join), "ip:6.6.6.6", blocks)  # show_state, joined directly
    assert info.value.status == 409 and "runs only right after" in info.value.message
    front_door.CHAINS.finished("page", 0)  # the page's Run finished
    front_door.admit_request("/queue/join", dict(join), "ip:6.6.6.6", blocks)  # its view joins
    with pytest.raises(front_door.Refusal):
        front_door.admit_request("/queue/join", dict(join), "ip:6.6.6.6", blocks)  # and only once


def test_stream_and_rate_caps_grow_with_a_units_open_pages(monkeypatch):
    monkeypatch.setenv("S2D2_CLIENT_STREAMS", "64")
    assert client_limits.unit_streams(1) == client_limits.unit_streams(16) == 64  # a lone visitor: as before
    assert client_limits.unit_streams(40) == 64 + 48  # forty pages, a heartbeat and an event stream each
    assert client_limits.unit_rate_scale(1) == 1.0 and client_limits.unit_rate_scale(41) == 11.0
    rate = client_limits.Rate(lambda: 1.0, clock=lambda: 0.0)
    assert sum(rate.allow("a", scale=4.0) for _ in range(20)) == 12  # a burst of 3 x 4


def test_a_signed_in_visitor_is_their_own_unit_wherever_the_request_is_read():
    from components.serve.identity import request_key, scope_key

    profile = {"oauth_info": {"userinfo": {"preferred_username": "ada"}, "expires_at": time.time() + 3600}}
    expired = {"oauth_info": {"userinfo": {"preferred_username": "ada"}, "expires_at": time.time() - 1}}
    headers = [(b"x-forwarded-for", b"10.0.0.1")]
    for session, key in ((profile, "user:ada"), (expired, "ip:127.0.0.1"), ({}, "ip:127.0.0.1")):
        scope = {"type": "http", "headers": headers, "client": ("127.0.0.1", 5), "session": session}
        request = SimpleNamespace(headers={}, client=SimpleNamespace(host="127.0.0.1"), scope=scope)
        event = SimpleNamespace(request=request, session_hash="s")
        assert scope_key(scope) == request_key(SimpleNamespace(request=request)) == front_door.event_client(event) \
            == key


def test_the_sign_in_button_is_offered_only_where_the_space_has_oauth(monkeypatch):
    import gradio.routes

    import app
    from components.serve import identity

    def buttons(demo) -> int:
        return sum(type(b).__name__ == "LoginButton" for b in demo.blocks.values())

    assert not identity.sign_in_offered() and buttons(app.demo) == 0  # a local run: no button
    monkeypatch.setenv("OAUTH_CLIENT_ID", "stand-in")
    monkeypatch.setattr(identity, "installed", lambda name: False)  # gradio[oauth] not installed
    assert buttons(app.build_demo()) == 0  # the app still starts, visitors keyed by address
    monkeypatch.undo()
    monkeypatch.setenv("OAUTH_CLIENT_ID", "stand-in")
    monkeypatch.setattr(identity, "installed", lambda name: True)
    monkeypatch.setattr(gradio.routes, "attach_oauth", lambda app: None)  # its session middleware needs the extra
    demo = app.build_demo()
    assert buttons(demo) == 1 and demo.expects_oauth


def test_a_waiting_run_is_told_its_place_beside_the_run_button():
    """Gradio's place-in-queue and time estimate for a Run goes to the line right under the Run button (never the
    Prompt box, where a refusal used to be drawn)."""
    import app

    config = app.demo.get_config_file()
    ids = {c["props"].get("elem_id"): c["id"] for c in config["components"]}
    run = next(d for d in config["dependencies"] if d["api_name"] == "run_choice")  # the page's Record button
    assert run["show_progress_on"] == [ids["run-wait"]]

    def parent_of(block_id: int, node: dict | None = None) -> int | None:
        for child in (node or config["layout"]).get("children", []):
            if child["id"] == block_id:
                return (node or config["layout"])["id"]
            found = parent_of(block_id, child)
            if found is not None:
                return found
        return None

    assert parent_of(ids["run-wait"]) == parent_of(parent_of(ids["run"]))  # in the column, under Run's row


def test_a_class_of_forty_keeps_every_page_and_forged_ids_still_replace_their_own(monkeypatch):
    import datetime
    import threading
    from collections import OrderedDict

    monkeypatch.setenv("S2D2_CLIENT_SESSIONS", "32")
    sessions, listeners = client_limits.Sessions(), client_limits.Listeners()
    holder = SimpleNamespace(session_data=OrderedDict(), time_last_used={}, lock=threading.Lock())
    roster = Roster()

    def visit(session: str, page: bool) -> None:
        if page:  # an open page: its heartbeat is open and counted
            listeners.open(session, CLASS, heartbeat=True)
            roster.arrive(CLASS, session)
        assert sessions.admit(session, CLASS, holder, 400, listeners, pages=roster.count(CLASS)) is None
        holder.session_data[session] = object()
        holder.time_last_used[session] = datetime.datetime.now()

    for n in range(40):
        visit(f"page-{n}", page=True)
    assert all(f"page-{n}" in holder.session_data for n in range(40))  # the 33rd page cleared nobody's
    for n in range(100):
        visit(f"forged-{n}", page=False)  # ids that open no page only ever replace the client's own idle ones
    assert len(holder.session_data) == 48 and client_limits.client_session_cap(0) == 32
    assert all(f"page-{n}" in holder.session_data for n in range(40))  # the forged ones gave way, not the pages
