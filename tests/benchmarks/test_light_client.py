"""benchmarks/light_client.py: a student's light page joins events as gradio_client does and gets the same data for the
same step from the launched app; a step counts as served only when its completed message carries its outputs, and a
refused join (429) is counted as refused, never served; the page counts in its unit only while it is open."""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
gradio_client = pytest.importorskip("gradio_client")

from benchmarks.class_steps import first_example_steps, student_record, student_tick  # noqa: E402
from benchmarks.light_client import (Endpoint, LightPage, StepFailed, completed_data, endpoints,  # noqa: E402
                                     light_page, sse_messages)
from tests.support.app_server import served  # noqa: E402,F401  (the fixture)

CONFIG = {"components": [{"id": 1, "type": "state"}, {"id": 2, "type": "number"}, {"id": 3, "type": "plot"},
                         {"id": 4, "type": "textbox", "skip_api": True}],
          "dependencies": [{"id": 7, "api_name": "step", "inputs": [1, 2, 1], "outputs": [3, 1, 4]},
                           {"id": 8, "api_name": "secret", "api_visibility": "private", "inputs": [], "outputs": []},
                           {"id": 9, "api_name": False, "inputs": [], "outputs": []}]}


def test_events_are_found_by_api_name_with_state_sent_as_none_and_skipped_outputs_left_out():
    found = endpoints(CONFIG)
    assert set(found) == {"/step"}  # private and unnamed events are not the API's
    step = found["/step"]
    assert step.fn_index == 7 and step.values((5,)) == [None, 5, None]
    assert step.answer(["fig", None, "hidden"]) == "fig"  # one output left: unwrapped, as gradio_client does
    assert Endpoint(0, [], [False, False]).answer([1, 2]) == (1, 2)


def stream(*messages: str) -> list[str]:
    return [line for m in messages for line in (f"data: {m}", "")]


def test_a_step_is_served_only_when_its_completed_message_carries_its_outputs():
    ok = stream('{"msg": "estimation", "event_id": "e"}', '{"msg": "heartbeat"}',
                '{"msg": "process_completed", "event_id": "e", "success": true, "output": {"data": [1, 2]}}',
                '{"msg": "close_stream"}')
    assert completed_data(sse_messages(ok), "e", 2) == [1, 2]
    failed = stream('{"msg": "process_completed", "event_id": "e", "success": false, '
                    '"output": {"error": "Too busy: try again"}}')
    with pytest.raises(StepFailed, match="Too busy"):
        completed_data(sse_messages(failed), "e", 2)
    for bad in ('{"msg": "process_completed", "event_id": "e", "success": true, "output": {"data": [1]}}',
                '{"msg": "process_completed", "event_id": "e", "success": true, "output": {}}',
                '{"msg": "process_completed", "event_id": "other", "success": true, "output": {"data": [1, 2]}}',
                '{"msg": "process_starts", "event_id": "e"}'):
        with pytest.raises(StepFailed):
            completed_data(sse_messages(stream(bad)), "e", 2)
    with pytest.raises(StepFailed, match="unexpected line"):
        list(sse_messages(["event: nonsense"]))


def same_outputs(light: tuple, gradio: tuple) -> None:
    """Equal value for value; a file the server offers (which gradio_client downloads and a page only links) is
    equal when its bytes at the offered URL are the downloaded file's."""
    import httpx

    assert len(light) == len(gradio)
    for mine, theirs in zip(light, gradio):
        if isinstance(mine, dict) and mine.get("meta") == {"_type": "gradio.FileData"}:
            assert httpx.get(mine["url"], timeout=60).content == Path(theirs).read_bytes()
        else:
            assert mine == theirs


@pytest.mark.slow
def test_the_light_page_gets_what_gradio_client_gets_for_the_same_example_and_step(served):
    _, url = served
    label, steps = first_example_steps()
    light = light_page(url, "10.0.35.21")
    heavy = gradio_client.Client(url, verbose=False, headers={"X-Forwarded-For": "10.0.35.22"})
    try:
        same_outputs(light.predict(label, api_name="/open_example"), heavy.predict(label, api_name="/open_example"))
        for k in (1, min(3, steps), steps):
            mine = light.predict(k, "auto", "state", api_name="/step")
            assert mine == heavy.predict(k, "auto", "state", api_name="/step") and any(v is not None for v in mine)
    finally:
        light.close()
        heavy.close()


def wait_until(condition, seconds: float = 30.0) -> bool:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.02)
    return condition()


@pytest.mark.slow
def test_the_page_counts_in_its_unit_while_its_heartbeat_is_open_and_leaves_when_closed(served):
    from components.serve.roster import ROSTER

    _, url = served
    address, unit = "10.0.35.23", "ip:10.0.35.23"  # the unit: components/serve/identity.py's key for it
    page = LightPage(url, headers={"X-Forwarded-For": address})
    try:
        assert wait_until(lambda: ROSTER.member(unit, page.session_hash) == page.session_hash)
    finally:
        page.close()
    assert wait_until(lambda: ROSTER.count(unit) == 0)


@pytest.mark.slow
def test_a_refused_step_is_counted_as_refused_never_served(served, monkeypatch):
    from components.serve.door_replies import TOO_FAST

    monkeypatch.setenv("S2D2_CLIENT_RATE", "1")  # bursts of three events: stepping at once soon outruns it
    _, url = served
    label, steps = first_example_steps()
    out, ticks = student_record(), 0
    try:
        while not out["refused"] and ticks < 60:
            student_tick(out, lambda: light_page(url, "10.0.35.24"), label, steps)
            ticks += 1
    finally:
        if out["page"] is not None:
            out["page"].close()
    assert out["opened"], out["refused"]
    (why, refused), = out["refused"].items()
    assert why.startswith("step: ") and TOO_FAST[:40] in why and "queue/join" in why
    assert len(out["step"]) + refused + 1 == ticks  # every other tick opened the example or served a step
