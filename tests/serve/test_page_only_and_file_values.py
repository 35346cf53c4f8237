"""Issue 35 item 6, against the launched app on loopback: an event the page runs only in JavaScript, joined by its
fn_index, and a value that is not an uploaded file sent to an upload (the Sweep tab's, the Replay tab's) each get
one readable line from the front door, and nothing reaches Gradio (no IndexError, no pydantic traceback in the log)."""
from __future__ import annotations

import logging
import uuid

import pytest

httpx = pytest.importorskip("httpx")

from components.serve.door_checks import NOT_A_FILE  # noqa: E402
from components.serve.door_checks import PAGE_ONLY  # noqa: E402
from tests.support.app_server import served  # noqa: E402,F401  (the fixture)

NOT_FILES = ["a text", 5, [1, 2], {"foo": 1}, {"path": "/etc/passwd"},
             {"path": "/etc/passwd", "meta": {"_type": "gradio.FileData"}},  # well formed, but never uploaded
             {"path": "https://example.com/x.json", "meta": {"_type": "gradio.FileData"}}]


def dependencies(url: str) -> list[dict]:
    return httpx.get(url + "config", headers={"x-forwarded-for": "10.35.0.1"}, timeout=60).json()["dependencies"]


def join(url: str, fn_index: int, data: list, ip: str) -> httpx.Response:
    body = {"data": data, "fn_index": fn_index, "session_hash": uuid.uuid4().hex[:12], "event_data": None,
            "trigger_id": None}
    return httpx.post(url + "gradio_api/queue/join", json=body, headers={"x-forwarded-for": ip}, timeout=60)


def one_line(response: httpx.Response, message: str) -> bool:
    return response.status_code == 400 and response.json()["error"] == message and "\n" not in message


def test_a_page_only_event_joined_by_index_is_refused_in_one_line(served, caplog):
    _, url = served
    deps = dependencies(url)
    page_only = [d for d in deps if not d.get("backend_fn")]
    assert len(page_only) >= 3  # Prev / Next, the chained scrolls after Run, the copy of a share link
    with caplog.at_level(logging.INFO):
        for i, dep in enumerate(page_only):
            answer = join(url, dep["id"], [None] * len(dep["inputs"]), f"10.35.1.{i + 1}")
            assert one_line(answer, PAGE_ONLY), (dep["id"], answer.status_code, answer.text[:200])
    assert not any("IndexError" in r.getMessage() or r.exc_info for r in caplog.records)


@pytest.mark.parametrize("api_name", ["load_sweep", "upload_trace"])
def test_a_value_that_is_not_an_uploaded_file_is_refused_in_one_line(served, caplog, api_name):
    _, url = served
    dep = next(d for d in dependencies(url) if d.get("api_name") == api_name)
    with caplog.at_level(logging.INFO):
        for i, value in enumerate(NOT_FILES):
            answer = join(url, dep["id"], [value] + [None] * (len(dep["inputs"]) - 1), f"10.35.2.{i + 1}")
            assert one_line(answer, NOT_A_FILE), (value, answer.status_code, answer.text[:200])
    assert not any("ValidationError" in r.getMessage() or r.exc_info for r in caplog.records)
