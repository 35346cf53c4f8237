"""Issue 19, rows 3-9 at the unit level: the client key, per-client queue cap and rate, session admission, the
decode watchdog, per-client decode cap, Stop binding, and the disk budget."""
from __future__ import annotations

import datetime
import os
import threading
import time
from collections import OrderedDict
from pathlib import Path
from types import SimpleNamespace

import pytest

from components.serve import disk_budget
from components.serve import client_limits
from components.serve import front_door
from components.serve import gpu_slot
from components.serve.identity import address_key, client_key, forwarded_client


# -- identity ------------------------------------------------------------------------------------------------------

def test_the_client_is_the_trusted_hop_of_x_forwarded_for():
    headers = [("x-forwarded-for", "6.6.6.6, 1.2.3.4"), ("x-forwarded-for", "10.0.0.2")]
    assert client_key(headers, "10.0.0.9", hops=0) == "ip:10.0.0.9"  # default off a Space: the socket peer
    assert client_key(headers, "10.0.0.9", hops=1) == "ip:10.0.0.2"  # the entry the one proxy appended
    assert client_key(headers, "10.0.0.9", hops=2) == "ip:1.2.3.4"
    assert client_key([], "10.0.0.9", hops=1) == "ip:10.0.0.9"  # no header: the peer
    assert forwarded_client(["1.1.1.1"], "p", hops=3) == "1.1.1.1"  # fewer hops than configured: the leftmost
    assert client_key(headers, "10.0.0.9", username="ada", hops=1) == "user:ada"  # a signed-in user by name
    assert address_key("2001:db8:1:2:aaaa::1") == address_key("2001:db8:1:2:ffff::9") == "ip:2001:db8:1:2::/64"
    assert address_key("::ffff:1.2.3.4") == "ip:1.2.3.4" and address_key("1.2.3.4:5678") == "ip:1.2.3.4"
    assert address_key("not an ip") == "addr:not an ip"


def test_trusted_hops_default_is_safe(monkeypatch):
    from components.serve.identity import trusted_hops

    monkeypatch.delenv("S2D2_TRUSTED_PROXY_HOPS", raising=False)
    monkeypatch.delenv("SPACE_ID", raising=False)
    assert trusted_hops() == 0
    monkeypatch.setenv("SPACE_ID", "user/space")
    assert trusted_hops() == 1
    monkeypatch.setenv("S2D2_TRUSTED_PROXY_HOPS", "9")
    with pytest.raises(ValueError, match="S2D2_TRUSTED_PROXY_HOPS"):
        trusted_hops()


# -- the front door's per-client rules -------------------------------------------------------------------------

def fake_event(ip: str, fn: object = None) -> SimpleNamespace:
    request = SimpleNamespace(headers={"x-forwarded-for": ip}, client=SimpleNamespace(host="127.0.0.1"))
    return SimpleNamespace(request=request, username=None, fn=fn, session_hash="s")


def fake_blocks(waiting: list, running: list) -> SimpleNamespace:
    fns = {0: SimpleNamespace(api_name="step", api_visibility="public", fn=print),
           1: SimpleNamespace(api_name="stop", api_visibility="private", fn=print)}
    queue = SimpleNamespace(event_queue_per_concurrency_id={"x": SimpleNamespace(queue=waiting)},
                            active_jobs=[running, None])
    holder = SimpleNamespace(session_data=OrderedDict(), time_last_used={}, lock=threading.Lock())
    return SimpleNamespace(fns=fns, _queue=queue, state_holder=holder)


def test_a_client_may_have_a_few_events_in_the_queue(monkeypatch):
    monkeypatch.setenv("S2D2_TRUSTED_PROXY_HOPS", "1")
    monkeypatch.setenv("S2D2_CLIENT_QUEUED", "6")
    mine = [fake_event("6.6.6.6") for _ in range(4)]
    blocks = fake_blocks(mine + [fake_event("1.1.1.1")], [fake_event("6.6.6.6")])
    front_door.admit_request("/queue/join", {"fn_index": 0, "session_hash": "a"}, "ip:6.6.6.6", blocks)  # 5 in: ok
    blocks._queue.event_queue_per_concurrency_id["x"].queue.append(fake_event("6.6.6.6"))
    with pytest.raises(front_door.Refusal) as info:
        front_door.admit_request("/queue/join", {"fn_index": 0, "session_hash": "a"}, "ip:6.6.6.6", blocks)
    assert info.value.status == 429 and info.value.message == front_door.TOO_MANY_QUEUED
    front_door.admit_request("/queue/join", {"fn_index": 0, "session_hash": "b"}, "ip:1.1.1.1", blocks)  # others: fine


def test_results_nobody_reads_count_against_the_client(monkeypatch):
    """Fire-and-forget joins: Gradio keeps each finished result until its session reads it; a client with
    S2D2_CLIENT_QUEUED unread results is refused, so it cannot pile them up in memory."""
    monkeypatch.setenv("S2D2_CLIENT_QUEUED", "6")
    monkeypatch.setattr(front_door, "SESSIONS", client_limits.Sessions())
    blocks = fake_blocks([], [])
    blocks._queue.pending_event_ids_session = {}
    for i in range(3):
        front_door.admit_request("/queue/join", {"fn_index": 0, "session_hash": f"u{i}"}, "ip:6.6.6.6", blocks)
        blocks.state_holder.session_data[f"u{i}"] = object()
        blocks._queue.pending_event_ids_session[f"u{i}"] = {f"e{i}a", f"e{i}b"}  # finished, never read
    with pytest.raises(front_door.Refusal, match="several requests waiting"):
        front_door.admit_request("/queue/join", {"fn_index": 0, "session_hash": "u9"}, "ip:6.6.6.6", blocks)
    blocks._queue.pending_event_ids_session["u0"] = set()  # one session read its results
    front_door.admit_request("/queue/join", {"fn_index": 0, "session_hash": "u9"}, "ip:6.6.6.6", blocks)


def test_the_last_places_of_the_queue_go_to_clients_with_nothing_queued(monkeypatch):
    monkeypatch.setenv("S2D2_TRUSTED_PROXY_HOPS", "1")
    monkeypatch.setenv("S2D2_QUEUE_SIZE", "20")
    crowd = [fake_event(f"9.9.9.{i}") for i in range(12)] + [fake_event("6.6.6.6")]
    blocks = fake_blocks(crowd, [])
    with pytest.raises(front_door.Refusal, match="nearly full"):
        front_door.admit_request("/queue/join", {"fn_index": 0, "session_hash": "a"}, "ip:6.6.6.6", blocks)
    front_door.admit_request("/queue/join", {"fn_index": 0, "session_hash": "n"}, "ip:5.5.5.5", blocks)


def test_private_events_are_not_callable_by_name():
    blocks = fake_blocks([], [])
    for sub in ("/call/stop", "/call/v2/stop", "/run/stop", "/call/nothing"):
        with pytest.raises(front_door.Refusal) as info:
            front_door.admit_request(sub, {"data": []}, "ip:1.1.1.1", blocks)
        assert info.value.status == 404
    front_door.admit_request("/run/stop", {"data": [], "fn_index": 1}, "ip:1.1.1.1", blocks)  # the page: by index
    front_door.admit_request("/call/step", {"data": []}, "ip:1.1.1.1", blocks)


def test_request_values_are_bounded_and_made_encodable():
    assert front_door.checked({"data": ["a\ud800b", {"k\udfff": 1}]}) == ({"data": ["a\ufffdb", {"k\ufffd": 1}]},
                                                                           True)
    assert front_door.checked({"data": ["plain", 1.5, None]})[1] is False
    with pytest.raises(front_door.Refusal, match="longer than 8192"):
        front_door.checked({"data": ["x" * 9000]})
    deep: object = 1
    for _ in range(40):
        deep = [deep]
    with pytest.raises(front_door.Refusal, match="nested too deeply"):
        front_door.checked({"data": deep})


def test_the_rate_is_per_client():
    rate = client_limits.Rate(lambda: 2.0)
    assert [rate.allow("a", now=0.0) for _ in range(7)] == [True] * 6 + [False]  # a burst of 3 x rate
    assert rate.allow("b", now=0.0) and rate.allow("a", now=1.0)  # others unaffected; tokens refill


@pytest.mark.parametrize("name,raw,message", [
    ("S2D2_UNIT_SESSIONS", "lots", "S2D2_UNIT_SESSIONS: expected a whole number in [1, 10000], got 'lots'"),
    ("S2D2_UNIT_SESSIONS", "9" * 400,
     "S2D2_UNIT_SESSIONS: expected a whole number in [1, 10000], got a 400-digit number"),
    ("S2D2_CLIENT_RATE", "nan", "S2D2_CLIENT_RATE: expected a number in [0.1, 10000], got nan"),
    ("S2D2_DISK_MB", "0", "S2D2_DISK_MB: expected a whole number of MB, at least 1, got 0"),
])
def test_operator_settings_refuse_bad_values_in_one_line(monkeypatch, name, raw, message):
    monkeypatch.setenv(name, raw)
    from components.serve import roster

    read = {"S2D2_UNIT_SESSIONS": roster.unit_sessions, "S2D2_CLIENT_RATE": client_limits.client_rate,
            "S2D2_DISK_MB": disk_budget.disk_budget_bytes}[name]
    with pytest.raises(ValueError) as info:
        read()
    assert str(info.value) == message


def test_a_client_out_of_allowance_can_still_stop(monkeypatch):
    """Stop (POST /run/predict, the one event outside the queue) has its own bucket: a client that spent its
    allowance on other events is refused those, never its Stop (issue 19 row 4)."""
    import asyncio

    monkeypatch.setenv("S2D2_CLIENT_RATE", "2")
    # the buckets' clock stands still: no token refills while a loaded machine runs the eleven requests
    monkeypatch.setattr(client_limits, "time", SimpleNamespace(monotonic=lambda: 1000.0))
    from components.serve.fair_rate import FairRate

    monkeypatch.setattr(front_door, "RATE", FairRate(client_limits.client_rate, clock=lambda: 1000.0))
    monkeypatch.setattr(front_door, "STOP_RATE", FairRate(client_limits.client_rate, clock=lambda: 1000.0))
    passed: list[str] = []

    async def inner(scope, receive, send):
        passed.append(scope["path"])
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    async def call(path: str) -> int:
        sent: list[dict] = []

        async def receive():
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message):
            sent.append(message)

        scope = {"type": "http", "method": "POST", "path": "/gradio_api" + path, "headers": [],
                 "client": ("10.1.2.3", 1234)}
        await front_door.FrontDoor(inner)(scope, receive, send)
        return next(m["status"] for m in sent if m["type"] == "http.response.start")

    async def scenario() -> tuple[list[int], int, int]:
        joins = [await call("/queue/join") for _ in range(10)]
        return joins, await call("/run/predict"), await call("/queue/join")

    joins, stop, after = asyncio.run(scenario())
    assert joins == [200] * 6 + [429] * 4 and after == 429  # a burst of 3 x rate, then refused
    assert stop == 200 and passed.count("/gradio_api/run/predict") == 1


def test_sessions_evict_their_own_and_never_an_active_visitor(monkeypatch):
    monkeypatch.setenv("S2D2_CLIENT_SESSIONS", "3")
    monkeypatch.setenv("S2D2_SESSION_IDLE_S", "60")
    sessions, listeners = client_limits.Sessions(), client_limits.Listeners()
    holder = SimpleNamespace(session_data=OrderedDict(), time_last_used={}, lock=threading.Lock())
    busy = {"victim"}  # the victim's decode is queued or running

    def visit(session, client):
        problem = sessions.admit(session, client, holder, capacity=6, listeners=listeners, busy=busy.__contains__)
        if problem is None:
            holder.session_data[session] = object()
            holder.time_last_used[session] = datetime.datetime.now()
        return problem

    assert visit("victim", "ip:1.1.1.1") is None
    for i in range(50):  # one client churning fresh session hashes keeps at most 3
        assert visit(f"a{i}", "ip:6.6.6.6") is None
    assert "victim" in holder.session_data and sum(s.startswith("a") for s in holder.session_data) == 3
    for ip in ("7.7.7.7", "8.8.8.8"):
        for i in range(2):
            assert visit(f"{ip}-{i}", f"ip:{ip}") is None  # a newcomer always gets in while one can give way
    assert len(holder.session_data) == 6 and "victim" in holder.session_data  # a decode never gives way
    for s in holder.session_data:
        if s != "victim":
            listeners.open(s, "ip:0.0.0.0")  # every other session has an event in flight
    assert "capacity" in visit("newcomer", "ip:9.9.9.9")  # nothing can give way: refused, nobody evicted
    assert len(holder.session_data) == 6


# -- decodes ---------------------------------------------------------------------------------------------------

def test_one_decode_per_session_and_stop_from_the_same_client_only():
    jobs = gpu_slot.Jobs()
    assert jobs.admit("s1", "ip:6.6.6.6") is None
    assert jobs.admit("s1", "ip:6.6.6.6") == gpu_slot.BUSY  # one decode per session
    assert jobs.admit("s2", "ip:6.6.6.6") is None  # another page of the same address waits its turn, not refused
    assert jobs.admit("s3", "ip:1.1.1.1") is None
    job = jobs.claim("s1")
    assert not jobs.stop_session("s1", "ip:1.1.1.1") and not job.stop.is_set()  # a stranger's Stop
    assert jobs.stop_session("s1", "ip:6.6.6.6") and jobs.cancelled(job.id)


def test_a_decode_nobody_listens_to_is_stopped(monkeypatch):
    monkeypatch.setenv("S2D2_LISTEN_GRACE_S", "3600")  # "within the grace" whatever the machine's load
    listeners = client_limits.Listeners()
    jobs = gpu_slot.Jobs()
    jobs.silence = listeners.silence
    listeners.joined("deaf")
    listeners.joined("heard")
    listeners.open("heard", "ip:1.1.1.1")
    for session in ("deaf", "heard", "direct"):  # "direct": a handler called without HTTP (never joined)
        jobs.admit(session)
    deaf, heard, direct = (jobs.claim(s) for s in ("deaf", "heard", "direct"))
    assert not jobs.cancelled(deaf.id)  # within the grace
    monkeypatch.setenv("S2D2_LISTEN_GRACE_S", "1")  # and past it: started, or their stream closed, 2 s ago
    deaf.started_at = heard.started_at = direct.started_at = time.monotonic() - 2
    assert jobs.cancelled(deaf.id) and not jobs.cancelled(heard.id) and not jobs.cancelled(direct.id)
    listeners.close("heard", "ip:1.1.1.1", now=time.monotonic() - 2)  # its stream closed 2 s ago
    assert jobs.cancelled(heard.id)


# -- disk ----------------------------------------------------------------------------------------------------------

def test_start_wipes_the_folders_of_dead_runs_only(tmp_path, monkeypatch):
    monkeypatch.setenv("S2D2_CACHE_DIR", str(tmp_path))
    dead, alive = tmp_path / "run-999999999", tmp_path / f"run-{os.getppid()}"
    for folder in (dead, alive):
        (folder / "gradio" / "x").mkdir(parents=True)
        (folder / "gradio" / "x" / "upload.json").write_text("{}")
    assert disk_budget.wipe_dead_runs(tmp_path) == 1
    assert not dead.exists() and (alive / "gradio" / "x" / "upload.json").exists()


def test_the_disk_budget_prunes_the_oldest_and_caps_each_client(tmp_path, monkeypatch):
    monkeypatch.setenv("GRADIO_TEMP_DIR", str(tmp_path / "gradio"))
    monkeypatch.delenv("S2D2_EXPORT_DIR", raising=False)
    monkeypatch.setenv("S2D2_DISK_MB", "3")
    monkeypatch.setenv("S2D2_CLIENT_UPLOAD_MB", "2")
    files = tmp_path / "gradio" / "up"
    files.mkdir(parents=True)
    for i in range(4):
        path = files / f"f{i}"
        path.write_bytes(b"x" * 700_000)
        os.utime(path, (time.time() - 3600 + i, time.time() - 3600 + i))  # oldest first
    budget = disk_budget.DiskBudget()
    assert budget.admit_upload("ip:1.1.1.1", 1_500_000) is None  # room made: the two oldest files went
    assert not (files / "f0").exists() and not (files / "f1").exists() and (files / "f3").exists()
    assert "per visitor" in budget.admit_upload("ip:1.1.1.1", 1_000_000)  # 2.5 MB > the client's 2 MB
    young = files / "young"
    young.write_bytes(b"y" * 3_000_000)  # just written: never pruned
    assert "full" in budget.admit_upload("ip:2.2.2.2", 1_000_000)
    assert young.exists() and budget.usage(fresh=True) <= 3 * 2**20 + 1_000_000


def test_exports_are_inside_gradios_cache_and_skipped_when_the_disk_is_full(tmp_path, monkeypatch):
    from fixtures import trace_factory as tf

    from components.files import traces

    monkeypatch.setenv("GRADIO_TEMP_DIR", str(tmp_path / "gradio"))
    monkeypatch.delenv("S2D2_EXPORT_DIR", raising=False)
    path = Path(traces.export_path(tf.mixed()))
    assert (tmp_path / "gradio") in path.parents  # served in place: no second copy
    monkeypatch.setenv("S2D2_DISK_MB", "1")
    (tmp_path / "gradio" / "big").write_bytes(b"z" * 2_000_000)  # young: cannot be pruned
    monkeypatch.setattr(traces.DISK, "_scanned", -1e9)
    assert traces.export_path(tf.large(64, 8)) is None
