"""Issue 29 against the launched app on loopback (the server of tests/serve/test_attacker.py, started for this module):
the framework's own parsing of Content-Type, heartbeat-minted sessions and Gradio's cancel, end to end."""
from __future__ import annotations

import json
import threading
import uuid
from pathlib import Path

import pytest


from tests.support.attack_server import decoding, join, outcome, run_data, server, wait

httpx = pytest.importorskip("httpx")


SPELLINGS = ["Application/JSON", "APPLICATION/JSON; charset=utf-8", "text/plain", None]


@pytest.mark.parametrize("ctype", SPELLINGS)
def test_row1_the_front_door_holds_whatever_the_content_type_says(server, ctype):  # noqa: F811
    _, url, fns = server
    ip = f"10.29.1.{SPELLINGS.index(ctype)}"
    headers = {"x-forwarded-for": ip, **({"content-type": ctype} if ctype else {})}
    post = lambda path, body: httpx.post(url + path, content=json.dumps(body), headers=headers,  # noqa: E731
                                         timeout=30)
    assert post("/gradio_api/call/html_replay", {"data": [None, 0]}).status_code == 404  # private by name
    long = {"data": ["x" * 9000, 1, "auto", "state", None], "fn_index": fns["step"], "session_hash": "long-1"}
    assert post("/gradio_api/queue/join", long).status_code == 413
    codes = [post("/gradio_api/queue/join", {"data": [None, 1, "auto", "state", None], "fn_index": fns["step"],
                                            "session_hash": f"pile-{uuid.uuid4().hex[:8]}"}).status_code
             for _ in range(12)]
    assert codes.count(200) <= 6 and set(codes) <= {200, 422, 429}, codes  # the cap holds (422: FastAPI refuses)


@pytest.mark.slow  # seconds: a subprocess or a whole CLI run (left out of the quick subset)
def test_row2_heartbeats_of_fresh_ids_mint_no_more_than_the_clients_own_sessions(server):  # noqa: F811
    app, url, fns = server
    data = app.demo.state_holder.session_data
    for i in range(40):  # open and close a heartbeat of a fresh id: its close runs unload, which creates state
        with httpx.stream("GET", url + f"/gradio_api/heartbeat/hb-{i}", timeout=30,
                          headers={"x-forwarded-for": "10.29.2.1"}) as beat:
            next(beat.iter_lines())
        assert wait(lambda: f"hb-{i}" in data, 30)  # its unload ran
    assert sum(s.startswith("hb-") for s in list(data)) <= 17  # S2D2_CLIENT_SESSIONS (16) and the newest
    newcomer = join(url, fns["server_step"], [None, 0, "auto", "state", None], "hb-newcomer", ip="10.29.2.2")
    assert newcomer.status_code == 200 and outcome(url, "hb-newcomer", "10.29.2.2")[1] is True


def test_row5_a_cancelled_queued_run_frees_the_visitors_decode(server):  # noqa: F811
    app, url, fns = server
    blocker = join(url, fns["run"], run_data(), "cancel-blocker", ip="10.29.5.1")
    assert blocker.status_code == 200
    threading.Thread(target=outcome, args=(url, "cancel-blocker", "10.29.5.1"), daemon=True).start()
    assert wait(decoding, 30)  # the one GPU slot is busy: the next Run waits in the queue
    queued = join(url, fns["run"], run_data(gen=8), "cancel-me", ip="10.29.5.2")
    assert queued.status_code == 200
    cancel = httpx.post(url + "/gradio_api/cancel", headers={"x-forwarded-for": "10.29.5.2"}, timeout=30,
                        json={"session_hash": "cancel-me", "fn_index": fns["run"],
                              "event_id": queued.json()["event_id"]})
    assert cancel.status_code == 200
    again = join(url, fns["run"], run_data(gen=8), "cancel-me", ip="10.29.5.2")
    assert again.status_code == 200, again.text[:200]  # not "you already have a run"
    app.gpu_slot.JOBS.stop_session("cancel-blocker")
    assert outcome(url, "cancel-me", "10.29.5.2")[1] is True
    assert wait(lambda: not decoding(), 30) and wait(lambda: app.gpu_slot.JOBS.active() == 0, 10)


def test_row7_an_event_sent_too_few_values_is_one_line_before_gradio_fails_on_it(server):  # noqa: F811
    _, url, fns = server
    for path, body in (("/gradio_api/call/step", {"data": []}), ("/gradio_api/call/open_example", {"data": []}),
                       ("/gradio_api/queue/join", {"data": [], "fn_index": fns["step"], "session_hash": "few"})):
        answer = httpx.post(url + path, json=body, headers={"x-forwarded-for": "10.29.7.1"}, timeout=30)
        assert answer.status_code == 400 and "This event takes" in answer.json()["detail"], (path, answer.text[:200])
    shown = httpx.post(url + "/gradio_api/call/step", json={"data": [1, "auto", "state"]}, timeout=30,
                       headers={"x-forwarded-for": "10.29.7.1"})  # the API's own values: Gradio adds the states
    assert shown.status_code == 200
