"""Issue 29, rows 1, 2, 5, 6 and the server's small rows, at the front door's ASGI level: a request goes through
components/front_door.FrontDoor to a recording stand-in for Gradio, against a stand-in of Gradio's blocks, queue and
state holder. No server, no sleeps: time is an injected clock."""
from __future__ import annotations

import asyncio
import datetime
import json
import logging
import threading
from collections import OrderedDict
from types import SimpleNamespace

import pytest

from components.serve import identity as client_id
from components.serve import client_limits
from components.serve import front_door
from components.serve import gpu_slot
from components.serve.fair_rate import FairRate
from components.serve.front_door import FrontDoor

# Every spelling of the header a client can send; the door must decide the same way for each.
SPELLINGS = ["application/json", "Application/JSON", "APPLICATION/JSON; charset=UTF-8", "  application/json  ",
             "application/json;charset=utf-8", "application/vnd.api+json", "text/plain", "text/html",
             "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "", None]
PRIVATE, PUBLIC, RUN = 1, 0, 2


def fn(name, visibility, inputs=1, gpu=False):
    return SimpleNamespace(api_name=name, api_visibility=visibility, fn=print, inputs=[object()] * inputs,
                           concurrency_id=gpu_slot.GPU if gpu else "default")


def blocks(waiting=(), capacity_sessions=()):
    fns = {PUBLIC: fn("step", "public", 2), PRIVATE: fn("html_replay", "private", 2),
           RUN: fn("run", "public", 3, gpu=True)}
    queue = SimpleNamespace(event_queue_per_concurrency_id={"x": SimpleNamespace(queue=list(waiting))},
                            active_jobs=[None], pending_event_ids_session={})
    holder = SimpleNamespace(session_data=OrderedDict((s, object()) for s in capacity_sessions),
                             time_last_used={s: datetime.datetime.now() for s in capacity_sessions},
                             lock=threading.Lock())
    return SimpleNamespace(fns=fns, _queue=queue, state_holder=holder)


class Gradio:
    """Stand-in for the app behind the door: records what reached it, answers 200."""

    def __init__(self, on_call=None):
        self.calls, self.on_call = [], on_call

    async def __call__(self, scope, receive, send):
        body = b""
        if scope.get("method") == "POST":
            body = (await receive()).get("body", b"")
        self.calls.append((scope["path"], body))
        if self.on_call:
            self.on_call(scope)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})


def request(door, path, body=None, ctype="application/json", ip="10.1.0.1", blocks_=None, method=None, query=b""):
    """(status, reply body) of one request through `door`."""
    headers = [(b"x-forwarded-for", ip.encode())]
    if ctype is not None:
        headers.append((b"content-type", ctype.encode()))
    raw = body if isinstance(body, bytes) else (json.dumps(body).encode() if body is not None else b"")
    scope = {"type": "http", "path": path, "method": method or ("POST" if body is not None else "GET"),
             "headers": headers, "client": ("127.0.0.1", 5000), "query_string": query,
             "app": SimpleNamespace(get_blocks=lambda: blocks_)}
    sent, out = [], []

    async def receive():
        if not sent:
            sent.append(1)
            return {"type": "http.request", "body": raw, "more_body": False}
        return {"type": "http.disconnect"}

    async def send(message):
        out.append(message)

    asyncio.run(door(scope, receive, send))
    status = next(m["status"] for m in out if m["type"] == "http.response.start")
    return status, b"".join(m.get("body", b"") for m in out if m["type"] == "http.response.body")


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    monkeypatch.setenv("S2D2_TRUSTED_PROXY_HOPS", "1")
    monkeypatch.setenv("S2D2_CLIENT_RATE", "10000")
    monkeypatch.delenv("S2D2_TRUSTED_PROXIES", raising=False)
    for name, value in (("RATE", FairRate(client_limits.client_rate)), ("STOP_RATE", FairRate(client_limits.client_rate)),
                        ("PAGE_RATE", client_limits.Rate(client_limits.client_rate, client_limits.page_burst)),
                        ("SESSIONS", client_limits.Sessions()),
                        ("LISTENERS", client_limits.Listeners()), ("NEW_SESSIONS", client_limits.Rate(lambda: 10_000.0))):
        monkeypatch.setattr(front_door, name, value)
    monkeypatch.setattr(gpu_slot, "JOBS", gpu_slot.Jobs())
    from components.serve import event_guard

    monkeypatch.setattr(event_guard, "SESSIONS", front_door.SESSIONS)


def queued(ip, session="q"):
    request_ = SimpleNamespace(headers={"x-forwarded-for": ip}, client=SimpleNamespace(host="127.0.0.1"))
    return SimpleNamespace(request=request_, username=None, session_hash=session, fn=fn("step", "public"))


# -- row 1: every rule under every spelling of Content-Type ----------------------------------------------------

RULES = [  # (path, body, blocks, expected status): each rule of the front door, with the canonical header
    ("/gradio_api/call/html_replay", {"data": [None, 0]}, blocks, 404),  # a private event by name
    ("/gradio_api/queue/join", {"data": ["x" * 9000, 0], "fn_index": PUBLIC, "session_hash": "long"}, blocks, 413),
    ("/gradio_api/queue/join", {"data": [None, 0], "fn_index": PUBLIC, "session_hash": "deep",
                                "x": json.loads("[" * 40 + "]" * 40)}, blocks, 400),  # nested too deeply
    ("/gradio_api/queue/join", {"data": [None, 0], "fn_index": PUBLIC, "session_hash": "capped"},
     lambda: blocks(waiting=[queued("10.1.0.1")] * 6), 429),  # the client's queue cap
    ("/gradio_api/queue/join", {"data": [None, 0], "fn_index": PUBLIC, "session_hash": "nearly"},
     lambda: blocks(waiting=[queued("10.1.0.1", f"q{i}") for i in range(3)]  # nearly full, and the client holds
                    + [queued(f"10.7.7.{k}") for k in range(1, 41) for _ in range(3)]), 429),  # over its part of it
    ("/gradio_api/queue/join", {"data": [None], "fn_index": PUBLIC, "session_hash": "few"}, blocks, 400),
    ("/gradio_api/queue/join", {"data": [None, 0], "fn_index": 99, "session_hash": "unknown"}, blocks, 400),
    ("/gradio_api/queue/join", {"data": [None, 0], "fn_index": PUBLIC, "session_hash": "s" * 200}, blocks, 400),
    ("/gradio_api/queue/join", b"{not json", blocks, 400),
    ("/gradio_api/queue/join", {"data": [None, 0], "fn_index": PUBLIC, "session_hash": "ok"}, blocks, 200),
]


@pytest.mark.parametrize("ctype", SPELLINGS)
@pytest.mark.parametrize("rule", range(len(RULES)), ids=lambda i: f"rule{i}")
def test_every_rule_holds_under_every_spelling_of_the_content_type(rule, ctype):
    path, body, make, status = RULES[rule]
    gradio = Gradio()
    got, reply = request(FrontDoor(gradio), path, body, ctype=ctype, blocks_=make())
    assert got == status, reply
    assert bool(gradio.calls) == (status == 200)  # a refused body never reaches Gradio
    if status != 200:
        assert "Traceback" not in reply.decode() and len(json.loads(reply)["detail"]) < 200
    else:  # joined over HTTP: the watchdog stops it if nobody listens (gpu_slot.Jobs.cancelled)
        assert front_door.LISTENERS.silence(body["session_hash"], 0.0) == float("inf")


@pytest.mark.parametrize("ctype", SPELLINGS)
def test_lone_surrogates_are_replaced_and_a_fresh_session_is_admitted_whatever_the_header(ctype):
    gradio, b = Gradio(), blocks(capacity_sessions=[f"busy{i}" for i in range(400)])
    for i in range(400):
        gpu_slot.JOBS.admit(f"busy{i}", f"ip:10.3.{i // 200}.{i % 200}")  # every session has a decode: none gives way
    body = b'{"data": ["\\ud800", 0], "fn_index": 0, "session_hash": "fresh"}'
    assert request(FrontDoor(gradio), "/gradio_api/queue/join", body, ctype=ctype, blocks_=b)[0] == 503
    b.state_holder.session_data.popitem(last=False)  # one place free
    assert request(FrontDoor(gradio), "/gradio_api/queue/join", body, ctype=ctype, blocks_=b)[0] == 200
    assert json.loads(gradio.calls[-1][1])["data"][0] == "\ufffd"
    assert front_door.SESSIONS.owner("fresh") == "ip:10.1.0.1"


def test_the_stream_read_is_the_stream_counted():
    """`?session_hash=a&session_hash=b`: Starlette serves b, so b is the session whose stream is open."""
    seen = []
    gradio = Gradio(on_call=lambda scope: seen.append(front_door.LISTENERS.streaming("b")))
    request(FrontDoor(gradio), "/gradio_api/queue/data", query=b"session_hash=a&session_hash=b", blocks_=blocks())
    assert seen == [True]


# -- row 2: every way a session comes to exist is admitted; a newcomer gets in; penalties decay -----------------

def heartbeat_creates_state(b):
    """Gradio's heartbeat route: its close runs the unload event, which creates the session's state."""
    def created(scope):
        b.state_holder.session_data[scope["path"].rsplit("/", 1)[1]] = object()
        b.state_holder.time_last_used[scope["path"].rsplit("/", 1)[1]] = datetime.datetime.now()
    return created


def test_heartbeats_of_fresh_ids_pass_admission_and_a_newcomer_still_gets_in(monkeypatch):
    monkeypatch.setenv("S2D2_CLIENT_SESSIONS", "32")
    b = blocks()
    door = FrontDoor(Gradio(on_call=heartbeat_creates_state(b)))
    for i in range(480):  # one address opening and closing heartbeat streams of fresh ids
        assert request(door, f"/gradio_api/heartbeat/mint{i}", ip="10.6.6.6", blocks_=b)[0] == 200
    assert len(b.state_holder.session_data) <= 33  # its own sessions gave way to its own new ones
    status, _ = request(door, "/gradio_api/queue/join", {"data": [None, 0], "fn_index": 0, "session_hash": "new"},
                        ip="10.1.2.3", blocks_=b)
    assert status == 200 and "new" in b.state_holder.session_data or front_door.SESSIONS.owner("new")


def test_a_full_app_lets_a_newcomer_in_by_the_least_recently_used_idle_session(monkeypatch):
    """400 visitors in ten minutes (all 'recently used'): the 401st gets in; the one that gives way is the least
    recently used without a decode or an event in flight, a session with its tab open only after every one
    without; a visitor whose open tab was cleared is told once."""
    monkeypatch.setenv("S2D2_MAX_SESSIONS", "400")
    names = [f"v{i}" for i in range(400)]
    b = blocks(capacity_sessions=names)
    gpu_slot.JOBS.admit("v0", "ip:10.2.0.0")  # v0's decode is queued: never evicted
    front_door.LISTENERS.open("v1", "ip:10.2.0.1")  # v1 has an event in flight: never evicted
    front_door.LISTENERS.open("v2", "ip:10.2.0.2", heartbeat=True)  # v2's tab is open (idle)
    door = FrontDoor(Gradio())
    join = lambda s, ip: request(door, "/gradio_api/queue/join",  # noqa: E731
                                 {"data": [None, 0], "fn_index": 0, "session_hash": s}, ip=ip, blocks_=b)[0]
    assert join("newcomer", "10.9.9.9") == 200
    data = b.state_holder.session_data
    assert "v3" not in data and {"v0", "v1", "v2"} <= set(data)  # v3: the least recently used idle one
    for i in range(4, 400):  # every other session gives way before v2, whose tab is open
        data.pop(f"v{i}")
        data[f"w{i}"] = object()
        front_door.LISTENERS.open(f"w{i}", f"ip:10.4.{i // 200}.{i % 200}")  # (streams are capped per client)
    data["newcomer"] = object()
    front_door.LISTENERS.open("newcomer", "ip:10.9.9.9")
    assert join("late", "10.9.9.8") == 200 and "v2" not in data and {"v0", "v1"} <= set(data)
    assert front_door.SESSIONS.evicted_note("v2") == client_limits.EVICTED  # told once, with their next event
    assert front_door.SESSIONS.evicted_note("v2") is None
    data["late"] = object()
    front_door.LISTENERS.open("late", "ip:10.9.9.8")
    assert join("refused", "10.9.9.7") == 503  # every session has a decode or an event in flight


def test_the_unread_results_penalty_decays_on_a_stated_clock(monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr(front_door.LISTENERS, "clock", lambda: clock[0])
    b = blocks()
    door = FrontDoor(Gradio())
    for i in range(6):  # six events joined and never read
        assert request(door, "/gradio_api/queue/join", {"data": [None, 0], "fn_index": 0, "session_hash": f"u{i}"},
                       ip="10.5.5.5", blocks_=b)[0] == 200
        b._queue.pending_event_ids_session[f"u{i}"] = {f"event{i}"}
    fresh_join = {"data": [None, 0], "fn_index": 0, "session_hash": "fresh-id"}
    assert request(door, "/gradio_api/queue/join", fresh_join, ip="10.5.5.5", blocks_=b)[0] == 429
    clock[0] += client_limits.unread_decay_s() - 1
    assert request(door, "/gradio_api/queue/join", fresh_join, ip="10.5.5.5", blocks_=b)[0] == 429
    clock[0] += 1
    assert request(door, "/gradio_api/queue/join", fresh_join, ip="10.5.5.5", blocks_=b)[0] == 200


# -- row 5: Gradio's cancel frees the decode; row 7: a stranger's unload or heartbeat does nothing ---------------

def test_cancel_of_a_queued_run_frees_the_visitors_decode():
    b = blocks()
    door = FrontDoor(Gradio())
    assert gpu_slot.JOBS.admit("runner", "ip:10.8.0.1") is None
    front_door.SESSIONS.admit("runner", "ip:10.8.0.1", b.state_holder, 400, front_door.LISTENERS)
    cancel = {"session_hash": "runner", "fn_index": RUN, "event_id": "e1"}
    assert request(door, "/gradio_api/cancel", cancel, ip="10.8.0.2", blocks_=b)[0] == 403  # a stranger
    assert gpu_slot.JOBS.holds("runner")
    still = SimpleNamespace(session_hash="runner", fn=b.fns[RUN], request=None, username=None)
    b._queue.event_queue_per_concurrency_id["gpu"] = SimpleNamespace(queue=[still])
    assert request(door, "/gradio_api/cancel", {**cancel, "event_id": "bogus"}, ip="10.8.0.1", blocks_=b)[0] == 200
    assert gpu_slot.JOBS.holds("runner")  # its event is still waiting: still registered
    b._queue.event_queue_per_concurrency_id["gpu"].queue.clear()  # Gradio removed it
    assert request(door, "/gradio_api/cancel", cancel, ip="10.8.0.1", blocks_=b)[0] == 200
    assert not gpu_slot.JOBS.holds("runner") and gpu_slot.JOBS.admit("runner", "ip:10.8.0.1") is None  # runs again


def test_a_strangers_unload_or_heartbeat_leaves_a_decode_alone():
    b = blocks()
    assert gpu_slot.JOBS.admit("victim", "ip:10.8.1.1") is None
    front_door.SESSIONS.admit("victim", "ip:10.8.1.1", b.state_holder, 400, front_door.LISTENERS)
    job = gpu_slot.JOBS.claim("victim")
    stranger = SimpleNamespace(session_hash="victim", username=None,
                               headers={"x-forwarded-for": "10.8.1.2"}, client=SimpleNamespace(host="127.0.0.1"))
    gpu_slot.on_unload(stranger)
    assert not job.stop.is_set()
    assert request(FrontDoor(Gradio()), "/gradio_api/heartbeat/victim", ip="10.8.1.2", blocks_=b)[0] == 403
    gpu_slot.on_unload(SimpleNamespace(**{**vars(stranger), "headers": {"x-forwarded-for": "10.8.1.1"}}))
    assert job.stop.is_set()  # the visitor's own unload stops it


# -- row 7: long queries, /config, deep links ------------------------------------------------------------------

def test_a_long_query_is_one_line_and_config_is_rate_limited_and_deep_links_are_refused(monkeypatch):
    gradio = Gradio()
    door = FrontDoor(gradio)
    status, reply = request(door, "/", query=b"x=" + b"a" * 78_000, blocks_=blocks())
    assert status == 414 and not gradio.calls and "Traceback" not in reply.decode()
    assert request(door, "/gradio_api/deep_link", query=b"session_hash=s", blocks_=blocks())[0] == 404
    monkeypatch.setenv("S2D2_CLIENT_RATE", "1")
    monkeypatch.setenv("S2D2_CLIENT_NEW_SESSIONS_BURST", "1")  # the page routes' burst: 3 x 1
    codes = [request(door, "/config", ip="10.4.4.4", blocks_=blocks())[0] for _ in range(10)]
    assert codes[:3] == [200] * 3 and 429 in codes


def test_a_failing_page_route_is_one_line(caplog):
    async def broken(scope, receive, send):
        raise RuntimeError("/secret/path " + "v" * 5000)

    with caplog.at_level(logging.WARNING, "s2d2.app"):
        status, reply = request(FrontDoor(broken), "/", blocks_=blocks())
    assert status == 500 and b"secret" not in reply
    assert all(len(r.getMessage()) < 400 for r in caplog.records)


# -- row 6: settings that make identity forgeable ----------------------------------------------------------------

def test_forgeable_identity_settings_are_refused_or_flagged(monkeypatch, caplog):
    monkeypatch.setenv("FORWARDED_ALLOW_IPS", "*")
    with pytest.raises(ValueError, match="FORWARDED_ALLOW_IPS"):
        client_id.identity_settings()
    monkeypatch.setenv("FORWARDED_ALLOW_IPS", "")
    monkeypatch.delenv("SPACE_ID", raising=False)
    monkeypatch.delenv("S2D2_TRUSTED_PROXIES", raising=False)
    monkeypatch.setenv("S2D2_TRUSTED_PROXY_HOPS", "1")
    with pytest.raises(ValueError, match="S2D2_TRUSTED_PROXIES") as refused:  # issue 35 item 7: refused, not warned
        client_id.identity_settings()
    assert "\n" not in str(refused.value) and len(str(refused.value)) < 400
    monkeypatch.setenv("SPACE_ID", "someone/s2d2")  # on a Space its proxy is the only way in: one hop stays allowed
    assert client_id.identity_settings() == []
    monkeypatch.delenv("S2D2_TRUSTED_PROXY_HOPS")
    assert client_id.trusted_hops() == 1 and client_id.identity_settings() == []
    monkeypatch.delenv("SPACE_ID")
    monkeypatch.setenv("FORWARDED_ALLOW_IPS", "10.0.0.1")
    with caplog.at_level(logging.WARNING, "s2d2.app"):
        warnings = client_id.identity_settings()  # redundant rather than forgeable: a warning
    assert any("FORWARDED_ALLOW_IPS" in w for w in warnings) and caplog.records
    monkeypatch.setenv("FORWARDED_ALLOW_IPS", "")
    monkeypatch.setenv("S2D2_TRUSTED_PROXY_HOPS", "1")
    monkeypatch.setenv("S2D2_TRUSTED_PROXIES", "10.0.0.0/8")
    assert client_id.identity_settings() == []  # the safe setting: hops read only from the proxy's network
    forged = [("x-forwarded-for", "6.6.6.6")]
    assert client_id.client_key(forged, "10.0.0.2") == "ip:6.6.6.6"  # through the proxy: its entry
    assert client_id.client_key(forged, "203.0.113.9") == "ip:203.0.113.9"  # directly: the socket peer
    monkeypatch.setenv("S2D2_TRUSTED_PROXY_HOPS", "0")
    assert client_id.identity_settings() == []
    monkeypatch.setenv("S2D2_TRUSTED_PROXIES", "not-an-ip")
    with pytest.raises(ValueError, match="S2D2_TRUSTED_PROXIES"):
        client_id.identity_settings()


def test_results_left_by_a_closed_page_do_not_count_against_the_next_one():
    """A page closed mid-event leaves results nobody reads (Gradio keeps their ids until delivered): the next page
    from the same address (a reload, a classmate behind the NAT) is not refused for them."""
    b = blocks()
    door = FrontDoor(Gradio())
    for i in range(6):
        assert request(door, "/gradio_api/queue/join", {"data": [None, 0], "fn_index": 0, "session_hash": "page1"},
                       ip="10.5.6.6", blocks_=b)[0] == 200
        b._queue.pending_event_ids_session.setdefault("page1", set()).add(f"event{i}")
    second = {"data": [None, 0], "fn_index": 0, "session_hash": "page2"}
    assert request(door, "/gradio_api/queue/join", second, ip="10.5.6.6", blocks_=b)[0] == 429  # page1 is open
    assert request(door, "/gradio_api/heartbeat/page1", ip="10.5.6.6", blocks_=b)[0] == 200  # ...and now it closed
    assert request(door, "/gradio_api/queue/join", second, ip="10.5.6.6", blocks_=b)[0] == 200


def test_a_visitor_whose_open_tab_was_cleared_is_told_once_with_their_next_event(monkeypatch):
    import gradio as gr
    from gradio.context import LocalContext

    from components.serve import event_guard

    holder = SimpleNamespace(session_data=OrderedDict(cleared=object()), time_last_used={}, lock=threading.Lock())
    front_door.LISTENERS.open("cleared", "ip:10.6.1.1", heartbeat=True)  # its tab is open, idle
    assert front_door.SESSIONS.admit("newcomer", "ip:10.6.1.2", holder, 1, front_door.LISTENERS) is None
    told: list[str] = []
    monkeypatch.setattr(gr, "Warning", lambda message, *a, **k: told.append(message))
    step = event_guard.guarded(lambda: "views", "step")
    token = LocalContext.request.set(SimpleNamespace(session_hash="cleared", username=None, headers={},
                                                     client=SimpleNamespace(host="10.6.1.1")))
    try:
        assert step() == "views" and step() == "views"
    finally:
        LocalContext.request.reset(token)
    assert told == [client_limits.EVICTED]


def test_new_sessions_from_one_address_are_paced_on_a_stated_clock(monkeypatch):
    """Each new session costs Gradio a copy of the page's config: one address opens S2D2_CLIENT_NEW_SESSIONS_BURST
    at once (a class loading the page), then S2D2_CLIENT_NEW_SESSIONS a second; known sessions are never charged."""
    clock = [0.0]
    monkeypatch.setattr(front_door, "NEW_SESSIONS", client_limits.Rate(client_limits.new_session_rate,
                                                                  client_limits.new_session_burst, lambda: clock[0]))
    b = blocks()
    door = FrontDoor(Gradio(on_call=heartbeat_creates_state(b)))
    beat = lambda name: request(door, f"/gradio_api/heartbeat/{name}", ip="10.6.7.7", blocks_=b)[0]  # noqa: E731
    assert [beat(f"tab{i}") for i in range(40)] == [200] * 40
    assert beat("tab40") == 429 and beat("tab39") == 200  # a known session is not new
    clock[0] += 1 / client_limits.new_session_rate()
    assert beat("tab40") == 200 and beat("tab41") == 429
    assert request(door, "/gradio_api/heartbeat/elsewhere", ip="10.6.7.8", blocks_=b)[0] == 200  # per address
