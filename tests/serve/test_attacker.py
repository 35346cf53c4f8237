"""Issue 19 against the launched app on loopback, raw HTTP as an attacker would send it: each finding row refused or
bounded. Visitors are told apart by X-Forwarded-For (S2D2_TRUSTED_PROXY_HOPS=1, as behind the Spaces proxy)."""
from __future__ import annotations

import importlib
import json
import math
import re
import os
import socket
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent.parent

from fixtures import trace_factory as tf

from tests.support.attack_server import (ENV, FORWARDS, SLOW, decoding, httpx, join, knobs, outcome, run_data,
                                         server, wait)

pytestmark = pytest.mark.slow  # launches the app and decodes through it


def test_row2_and_16_nothing_skips_the_queue_and_private_events_are_not_callable_by_name(server):
    _, url, fns = server
    for name in ("compare", "run", "step"):  # queued events: the REST route refuses them
        r = httpx.post(url + "/gradio_api/run/predict", json={"data": [], "fn_index": fns[name], "session_hash": "x"})
        assert r.status_code == 404, (name, r.status_code, r.text[:200])
    for name in ("stop", "on_unload", "apply_preset", "server_step", "show_state", "select_position"):
        r = httpx.post(url + f"/gradio_api/call/{name}", json={"data": []})
        assert r.status_code == 404 and "/work" not in r.text and "/tmp" not in r.text, (name, r.status_code)
    from components.files.examples import first_example

    r = httpx.post(url + "/gradio_api/call/open_example", json={"data": [first_example()[0]]})
    assert r.status_code == 200 and "event_id" in r.json()  # the public API still answers by name
    answer = httpx.get(url + f"/gradio_api/call/open_example/{r.json()['event_id']}", timeout=30).text
    assert "event: complete" in answer and "Loaded example" in answer, answer[:300]


def watchdog_stops(app, monkeypatch) -> list[str]:
    """The job ids the decode watchdog (guard.Jobs.cancelled) has reported stopped so far."""
    stopped, cancelled = [], app.gpu_slot.JOBS.cancelled

    def recorded(job_id):
        out = cancelled(job_id)
        if out and job_id not in stopped:
            stopped.append(job_id)
        return out

    monkeypatch.setattr(app.gpu_slot.JOBS, "cancelled", recorded)
    return stopped


def test_row3_fresh_session_hashes_do_not_mint_decodes(server, monkeypatch):
    """Eight session hashes from one address that opened no page: they are one member of one unit, so together
    they get the pending events of one visitor (S2D2_CLIENT_QUEUED), the rest refused; another address is not
    affected (its Run is admitted and finishes beside them)."""
    app, url, fns = server
    # the decodes have no open stream until after the joins: on a loaded machine the joins may take longer
    # than the module's 2 s listen grace, and the watchdog would end them (row 5 tests the grace)
    monkeypatch.setenv("S2D2_LISTEN_GRACE_S", "3600")
    monkeypatch.setenv("S2D2_CLIENT_QUEUED", "6")
    sessions = [f"mint-{i}" for i in range(8)]
    answers = [join(url, fns["run"], run_data(), s, ip="10.9.3.1") for s in sessions]
    assert [a.status_code for a in answers] == [200] * 6 + [429] * 2, [a.text[:120] for a in answers]
    assert "several requests waiting" in answers[6].text
    other = join(url, fns["run"], run_data(gen=8), "mint-other", ip="10.9.3.2")
    assert other.status_code == 200
    assert outcome(url, "mint-other", "10.9.3.2")[1] is True
    for s in sessions[:6]:
        app.gpu_slot.JOBS.stop_session(s)
        threading.Thread(target=outcome, args=(url, s, "10.9.3.1"), daemon=True).start()
    assert wait(lambda: not decoding(), 60) and wait(lambda: app.gpu_slot.JOBS.active() == 0, 60)


def test_row4_one_client_cannot_fill_the_queue_and_stop_never_waits(server):
    app, url, fns = server
    holder = join(url, fns["run"], run_data(), "fill-run", ip="10.9.4.1")
    assert holder.status_code == 200
    ended = []
    listener = threading.Thread(target=lambda: ended.append(outcome(url, "fill-run", "10.9.4.1")), daemon=True)
    listener.start()
    assert wait(decoding)
    with ThreadPoolExecutor(16) as pool:  # fire-and-forget joins, all at once
        codes = list(pool.map(lambda i: join(url, fns["step"], [None, 1, "auto", "state", None], f"fill-{i}",
                                             ip="10.9.4.1").status_code, range(80)))
    assert codes.count(429) >= 40, codes  # the client's rate and queue caps (the exact cap: test_hardening_fairness)
    # Stop is outside the queue: answered while the decode still runs (a queued Stop would wait for the GPU slot,
    # that is for the 480-token decode to finish on its own), so the decode ends stopped, not done
    stop = httpx.post(url + "/gradio_api/run/predict", timeout=60, headers={"x-forwarded-for": "10.9.4.1"},
                      json={"data": [], "fn_index": fns["stop"], "session_hash": "fill-run"})
    assert stop.status_code == 200
    assert wait(lambda: not decoding(), 60)
    listener.join(60)
    assert ended and ended[0][0] == "done" and "Stopped" in json.dumps(ended[0][2], ensure_ascii=False), ended
    honest = join(url, fns["step"], [None, 1, "auto", "state", None], "fill-honest", ip="10.9.4.2")
    assert honest.status_code == 200 and outcome(url, "fill-honest", "10.9.4.2")[1] is True
    assert wait(lambda: app.gpu_slot.JOBS.active() == 0, 60)


def test_row5_a_decode_nobody_listens_to_ends_within_seconds(server, monkeypatch):
    """The watchdog (no open stream for the grace, 2 s here), not the 480-token decode's own end, stops a decode
    nobody listens to."""
    app, url, fns = server
    stopped = watchdog_stops(app, monkeypatch)
    assert join(url, fns["run"], run_data(), "deaf-1", ip="10.9.5.1").status_code == 200  # never opens its stream
    assert wait(decoding, 60)
    assert wait(lambda: not decoding(), 120) and len(stopped) == 1, stopped
    r = httpx.post(url + "/gradio_api/call/run", json={"data": run_data()}, headers={"x-forwarded-for": "10.9.5.2"})
    assert r.status_code == 200  # the public API, no session hash, no GET of the result
    assert wait(decoding, 60)
    assert wait(lambda: not decoding(), 120) and len(stopped) == 2, stopped
    assert wait(lambda: app.gpu_slot.JOBS.active() == 0, 60)


def test_row6_a_replay_flood_is_capped_per_client_and_an_honest_step_completes(server):
    _, url, fns = server
    refused = []

    def flood(i):
        for k in range(25):
            r = join(url, fns["step"], [None, k % 30, "auto", "p", None], f"flood-{i}-{k}", ip="10.9.6.1")
            refused.append(r.status_code == 429)

    threads = [threading.Thread(target=flood, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    honest = join(url, fns["step"], [None, 1, "auto", "state", None], "flood-honest", ip="10.9.6.2")
    for t in threads:
        t.join()
    assert honest.status_code == 200 and outcome(url, "flood-honest", "10.9.6.2")[1] is True
    assert sum(refused) > 100, sum(refused)


def test_row7_a_flood_of_sessions_does_not_evict_a_visitor(server, tmp_path):
    """A victim uploads; one address then opens far more sessions than the app keeps: it only ever evicts its own
    (S2D2_CLIENT_SESSIONS), and a full app lets a newcomer in by an idle session, never the victim's open one."""
    from gradio_client import Client, handle_file

    app, url, fns = server
    holder = app.demo.state_holder
    forget = lambda: (holder.session_data.clear(), holder.time_last_used.clear())  # noqa: E731
    forget()  # the sessions of the tests before: this one counts the app's 40 from zero
    path = tmp_path / "victim.json"
    path.write_text(tf.hostile().to_json())
    victim = Client(url, verbose=False, headers={"X-Forwarded-For": "10.9.7.1"})
    try:
        assert victim.predict(handle_file(str(path)), api_name="/upload_trace")[0] == "Loaded the uploaded trace."
        def visit(session, ip):  # one event in a fresh session, its result read (a polite flood)
            code = join(url, fns["server_step"], [None, 0, "auto", "state", None], session, ip=ip).status_code
            if code == 200:
                outcome(url, session, ip)
            return code

        for i in range(40):  # more than S2D2_CLIENT_SESSIONS (16): it evicts its own
            assert visit(f"crowd-a-{i}", "10.9.7.66") == 200
            time.sleep(0.25)  # under S2D2_CLIENT_RATE (5 a second) however fast a visit is: this row is about sessions
        assert len(holder.session_data) <= 17
        for ip in ("10.9.7.67", "10.9.7.68", "10.9.7.69"):  # three more addresses fill the app's 40 sessions
            codes = [visit(f"crowd-{ip}-{i}", ip) for i in range(14)]
        # a newcomer always gets in (issue 29): the crowd's idle sessions give way, never the victim's open tab
        assert 503 not in codes and len(holder.session_data) <= 40
        view = victim.predict(1, "auto", "state", api_name="/step")
        from components.views.canvas import render_canvas

        assert view[0] == render_canvas(tf.hostile(), 1)  # still the victim's own trace
    finally:
        victim.close()
        forget()


def test_row9_uploads_are_bounded_per_client_and_in_total(server):
    app, url, _ = server
    from components.serve.disk_budget import DISK

    blob = b" " * (5 * 1024 * 1024 - 100)
    codes = []
    for i in range(12):  # 60 MB from one address: the hourly allowance is 30 MB
        r = httpx.post(url + "/gradio_api/upload", files={"files": (f"u{i}.json", blob, "application/json")},
                       headers={"x-forwarded-for": "10.9.9.1"}, timeout=60)
        codes.append(r.status_code)
    assert codes[:5] == [200] * 5 and set(codes[6:]) == {429}, codes
    total = []
    for i in range(20):  # many addresses: the total stays within S2D2_DISK_MB (64)
        r = httpx.post(url + "/gradio_api/upload", files={"files": (f"v{i}.json", blob, "application/json")},
                       headers={"x-forwarded-for": f"10.9.9.{10 + i}"}, timeout=60)
        total.append(r.status_code)
    assert 507 in total and DISK.usage(fresh=True) <= 64 * 2**20, (total, DISK.usage(fresh=True))
    r = httpx.post(url + "/gradio_api/upload", files={"files": ("", b"{}", "application/json")},
                   headers={"x-forwarded-for": "10.9.9.99"})
    assert r.status_code == 400 and r.json()["detail"].startswith("The upload could not be read")


def test_row14_the_published_config_holds_no_server_path(server):
    _, url, _ = server
    config = httpx.get(url + "/config").text
    assert os.environ["GRADIO_TEMP_DIR"] not in config and "s2d2-exports" not in config


def test_rows11_to_14_bad_values_keep_the_stream_alive(server):
    _, url, fns = server
    ip = "10.9.11.1"
    cases = [
        ("apply_preset", '["sdar-config-a", 100000000000000000000]', None),  # a 21-digit seed, then a preset
        ("step", '[null, 1e400, "auto", "state", null]', None),
        ("select_position", '[null, 1, "auto"]', '{"position": 1e400}'),
        ("server_step", '[null, 1e400, "auto", "state", null]', None),
        ("model_changed", '["\\ud800x", "block", 0]', None),  # a lone surrogate in a dropdown value
    ]
    for name, data, event in cases:
        session = uuid.uuid4().hex[:12]
        raw = ('{"data": %s, "fn_index": %d, "session_hash": "%s", "event_data": %s, "trigger_id": null}'
               % (data, fns[name], session, event or "null"))
        assert join(url, None, None, raw=raw, ip=ip).status_code == 200, name
        result = outcome(url, session, ip)
        assert result[0] == "done" and result[1] is True, (name, result)
    big = json.dumps({"data": ["x" * 30_000_000], "fn_index": fns["open_example"], "session_hash": "big"})
    r = join(url, None, None, raw=big, ip=ip)
    assert r.status_code == 413 and len(r.text) < 300
    r = join(url, None, None, raw=json.dumps({"data": ["x" * 100_000], "fn_index": fns["apply_preset"],
                                               "session_hash": "long"}), ip=ip)
    assert r.status_code == 413 and len(r.text) < 300
    r = join(url, None, None, raw='{"data": ' + "[" * 5000 + "]" * 5000 + ', "fn_index": 1}', ip=ip)
    assert r.status_code == 400 and "nested too deeply" in r.text
    for path in ("/gradio_api/file=/etc/passwd", "/gradio_api/file=" + os.environ["GRADIO_TEMP_DIR"] + "/no.json"):
        r = httpx.get(url + path)
        assert r.status_code >= 400 and r.json()["detail"] == "File not found." and "/etc" not in r.text


def test_stop_acts_only_for_the_client_that_started_the_run(server):
    """Stop binds a job to the client that started it: a stranger with the session hash cannot stop it."""
    app, url, fns = server
    assert join(url, fns["run"], run_data(), "owned", ip="10.9.12.1").status_code == 200
    threading.Thread(target=outcome, args=(url, "owned", "10.9.12.1", 60), daemon=True).start()
    assert wait(decoding)
    httpx.post(url + "/gradio_api/run/predict", headers={"x-forwarded-for": "10.9.12.2"},
               json={"data": [], "fn_index": fns["stop"], "session_hash": "owned"})
    # Stop acts before it answers: had it raised the flag, the decode would end at its next forward; it goes on
    after = FORWARDS[0]
    assert wait(lambda: FORWARDS[0] >= after + 3 or not decoding(), 60) and decoding()  # the stranger's did nothing
    httpx.post(url + "/gradio_api/run/predict", headers={"x-forwarded-for": "10.9.12.1"},
               json={"data": [], "fn_index": fns["stop"], "session_hash": "owned"})
    assert wait(lambda: not decoding(), 60) and wait(lambda: app.gpu_slot.JOBS.active() == 0, 60)


def test_a_visitor_past_its_cpu_share_is_refused_only_while_another_visitor_waits(server, monkeypatch):
    """The replay flood's remedy (components/serve/cpu_share.py), through the launched app: a visitor whose share of
    handler time is spent gets its step, alone; while another visitor's decode runs, the same step is refused
    with one line before any work; the decoding visitor is never slowed."""
    from components.serve import event_guard
    from components.serve.cpu_share import OVER_SHARE, CpuShare

    app, url, fns = server
    share = CpuShare(lambda: 0.02, lambda: 10.0, clock=lambda: 0.0)  # the clock stands still: nothing decays
    monkeypatch.setattr(event_guard, "CPU_SHARE", share)
    # beside one other unit its part is 0.01 s a second, 0.1 s over the window: it used just under e times that
    share.charge(("ip:10.9.20.1", "~rest"), 0.1 * math.e * 0.999)
    step = [None, 1, "auto", "state", None]
    assert join(url, fns["step"], step, "spent-1", ip="10.9.20.1").status_code == 200
    assert outcome(url, "spent-1", "10.9.20.1")[1] is True  # alone on the server: let through
    assert join(url, fns["run"], run_data(), "busy-run", ip="10.9.20.2").status_code == 200
    ended = []
    listener = threading.Thread(target=lambda: ended.append(outcome(url, "busy-run", "10.9.20.2")), daemon=True)
    listener.start()
    assert wait(decoding)
    assert join(url, fns["step"], step, "spent-2", ip="10.9.20.1").status_code == 200
    refused = outcome(url, "spent-2", "10.9.20.1")
    wait_s = re.fullmatch(re.escape(OVER_SHARE).replace(r"\{seconds\}", r"(\d+)"), refused[2]["error"])
    assert refused[1] is False and wait_s and int(wait_s.group(1)) >= 10, refused  # and its step's own CPU more
    assert decoding()  # refused while the other visitor's decode was still running
    httpx.post(url + "/gradio_api/run/predict", timeout=60, headers={"x-forwarded-for": "10.9.20.2"},
               json={"data": [], "fn_index": fns["stop"], "session_hash": "busy-run"})
    listener.join(60)
    assert ended and ended[0][0] == "done" and ended[0][1] is True, ended
    assert wait(lambda: app.gpu_slot.JOBS.active() == 0, 60)
