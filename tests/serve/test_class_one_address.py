"""Issue 35 through the launched app: a class behind one address (twelve pages, one X-Forwarded-For) presses Run
together; every Run waits its turn in the fair queue instead of being refused, and all finish alike."""
from __future__ import annotations

import os
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
gradio_client = pytest.importorskip("gradio_client")
from gradio_client import Client  # noqa: E402

from tests.support.app_server import RANDOM_MODEL, served  # noqa: E402,F401  (the fixture)

pytestmark = pytest.mark.slow  # launches the app and decodes through it
CLASS = "10.0.35.1"
STUDENTS = 12


def knob_values(**changes) -> list:
    from components.run.knobs import KNOB_NAMES, preset_values

    values = dict(zip(KNOB_NAMES, preset_values("sdar-config-b")))
    values.update(changes)
    return list(values.values())


def test_twelve_pages_behind_one_address_press_run_together_and_all_finish_alike(served):
    _, url = served
    with ThreadPoolExecutor(STUDENTS) as pool:  # twelve pages, each with its own session and heartbeat
        clients = list(pool.map(lambda _: Client(url, verbose=False, headers={"X-Forwarded-For": CLASS}),
                                range(STUDENTS)))
    together = threading.Barrier(STUDENTS)

    def press(client: Client) -> tuple:
        together.wait()
        return tuple(client.predict("2+3=", RANDOM_MODEL, *knob_values(gen_length=16, block_length=4, seed=7),
                                    api_name="/run"))

    try:
        with ThreadPoolExecutor(STUDENTS) as pool:
            results = list(pool.map(press, clients))
    finally:
        for client in clients:
            client.close()
    statuses = [status for status, _, _ in results]
    assert all(s.startswith("✓ Done") for s in statuses), statuses  # none refused, none failed
    texts = {text for _, _, text in results}
    assert len(texts) == 1 and texts != {""}, texts  # the same seed and prompt: the same answer for everyone


def test_forty_pages_behind_one_address_load_in_one_burst(served):
    """What a page load sends (found with Chromium: the page, its heartbeat, the load event and its result stream),
    forty times at once from one address: every page gets in, none refused."""
    import httpx

    app, url = served
    load = next(i for i, fn in app.demo.fns.items() if fn.name == "page_load")
    headers = {"x-forwarded-for": "10.0.35.2"}
    hearts_open, closing = threading.Semaphore(0), threading.Event()

    def heartbeat(session: str) -> int:
        with httpx.stream("GET", f"{url}gradio_api/heartbeat/{session}", headers=headers, timeout=120) as beat:
            hearts_open.release()
            if beat.status_code == 200:
                closing.wait(120)  # held open, as a page's is, until every page has loaded
            return beat.status_code

    def page(n: int) -> list:
        session = f"class-page-{n}"
        codes = [httpx.get(url, headers=headers, timeout=120).status_code]
        join = httpx.post(f"{url}gradio_api/queue/join", headers=headers, timeout=120,
                          json={"data": [None], "fn_index": load, "session_hash": session, "event_data": None,
                                "trigger_id": None})
        codes.append(join.status_code)
        try:
            with httpx.stream("GET", f"{url}gradio_api/queue/data?session_hash={session}", headers=headers,
                              timeout=120) as stream:
                codes.append(stream.status_code)
                done = stream.status_code == 200 and any(
                    '"process_completed"' in line and '"success": true' in line.replace('":true', '": true')
                    for line in stream.iter_lines() if line.startswith("data:"))
        except httpx.HTTPError as exc:  # the stream was cut (e.g. its session evicted to make room)
            codes.append(type(exc).__name__)
            done = False
        return codes + [done]

    with ThreadPoolExecutor(80) as pool:
        beats = [pool.submit(heartbeat, f"class-page-{n}") for n in range(40)]
        for _ in range(40):
            hearts_open.acquire()
        pages = list(pool.map(page, range(40)))
        kept = [f"class-page-{n}" in app.demo.state_holder.session_data for n in range(40)]
        closing.set()
        beat_codes = [b.result() for b in beats]
    assert beat_codes == [200] * 40, beat_codes
    assert all(p == [200, 200, 200, True] for p in pages), [p for p in pages if p != [200, 200, 200, True]]
    assert all(kept), kept.count(False)  # no student's page cleared to make room for a classmate's


def test_a_chained_view_joins_by_index_only_once_after_its_own_run(served):
    """Issue 35 item 6: `opened_run` (the `.then` after Run that opens Replay) joined directly by its fn index is
    refused; after the session's own Run it joins once, as the page does, and draws; a second direct join is
    refused again."""
    import json

    import httpx

    app, url = served
    fns = app.demo.fns
    run = next(i for i, fn in fns.items() if fn.name == "run_choice")  # the page's Record (server or page decode)
    show = next(i for i, fn in fns.items() if fn.name == "opened_run" and fn.trigger_after == run)
    headers = {"x-forwarded-for": "10.0.35.3"}

    def join(index: int, data: list, session: str) -> httpx.Response:
        return httpx.post(f"{url}gradio_api/queue/join", headers=headers, timeout=120,
                          json={"data": data, "fn_index": index, "session_hash": session, "event_data": None,
                                "trigger_id": None})

    def finished(session: str) -> bool:
        with httpx.stream("GET", f"{url}gradio_api/queue/data?session_hash={session}", headers=headers,
                          timeout=120) as stream:
            for line in stream.iter_lines():
                if line.startswith("data:") and json.loads(line[5:]).get("msg") == "process_completed":
                    return json.loads(line[5:]).get("success") is True
        return False

    refused = join(show, [None, False, None], "chain-page")
    assert refused.status_code == 409 and "runs only right after" in refused.text, refused.text[:200]
    assert join(run, ["2+3=", RANDOM_MODEL, False, None, *knob_values(gen_length=8, block_length=4)],
                "chain-page").status_code \
        == 200 and finished("chain-page")
    assert join(show, [None, True, None], "chain-page").status_code == 200 and finished("chain-page")
    assert join(show, [None, True, None], "chain-page").status_code == 409  # once per finished Run


def counted(page: Client) -> None:
    """Wait (bounded) until the page's heartbeat is open: the front door counts it as one of its unit's pages."""
    from components.serve.front_door import LISTENERS

    until = time.monotonic() + 60
    while not LISTENERS.beating(page.session_hash):
        assert time.monotonic() < until, "the page's heartbeat never opened"
        threading.Event().wait(0.02)


def test_a_flooder_behind_the_class_address_leaves_every_student_the_page_and_their_steps(served, monkeypatch):
    """Figure (c) of issue 35 through the launched app: a flooder's page behind the class's own address hammers
    events; six students behind the same address then open the page (config, API description, heartbeat), open the
    first example and step through it. Every student gets in and every step is served: the flooder spends its own
    part of the address's request rate, not the class's (components/serve/fair_rate.py), and the page routes have a
    bucket of their own. (With one bucket per address every student was refused with the flooder.)"""
    import httpx

    from benchmarks.class_steps import first_example_steps

    monkeypatch.setenv("S2D2_CLIENT_RATE", "5")  # a small allowance, so any flooder outruns it whatever the machine
    _, url = served
    address = "10.0.35.4"
    flooder = Client(url, verbose=False, headers={"X-Forwarded-For": address})  # a real page: its heartbeat is open
    counted(flooder)
    step = next(d["id"] for d in httpx.get(url + "config", timeout=60).json()["dependencies"]
                if d.get("api_name") == "step")
    codes: Counter = Counter()
    refused_once, stop = threading.Event(), threading.Event()

    def hammer() -> None:
        with httpx.Client(headers={"x-forwarded-for": address}, timeout=60) as http:
            while not stop.is_set():
                answer = http.post(f"{url}gradio_api/queue/join", json={
                    "data": [None, 1, "auto", "p", None], "fn_index": step, "session_hash": flooder.session_hash,
                    "event_data": None, "trigger_id": None})
                codes[answer.status_code] += 1
                if answer.status_code == 429:
                    refused_once.set()  # the flooder is past its allowance: the students come now

    label, steps = first_example_steps()

    def student(n: int) -> list:
        page = Client(url, verbose=False, headers={"X-Forwarded-For": address})
        try:
            counted(page)  # a browser's page opens its heartbeat before its first event; so does this one
            done = [page.predict(label, api_name="/open_example") is not None]
            for k in range(3):
                done.append(page.predict((n + k) % steps + 1, "auto", "state", api_name="/step") is not None)
            return done
        finally:
            page.close()

    hammers = [threading.Thread(target=hammer, daemon=True) for _ in range(3)]
    for t in hammers:
        t.start()
    try:
        assert refused_once.wait(120), codes
        with ThreadPoolExecutor(6) as pool:
            results = list(pool.map(student, range(6)))
    finally:
        stop.set()
        for t in hammers:
            t.join(timeout=60)
        flooder.close()
    assert results == [[True] * 4] * 6, results  # every student opened the page and every step was served
    from components.serve.cpu_share import handler_slots

    assert served[0].demo._queue.default_concurrency_limit == handler_slots()  # the app reads the setting
    assert codes[429] > 0, codes  # the flooder was held to its part the whole time
