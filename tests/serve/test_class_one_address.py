"""Issue 35 through the launched app: a class behind one address (twelve pages, one X-Forwarded-For) presses Run
together; every Run waits its turn in the fair queue instead of being refused, and all finish alike."""
from __future__ import annotations

import os
import threading
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
    assert all(s.startswith("✅ Done") for s in statuses), statuses  # none refused, none failed
    texts = {text for _, _, text in results}
    assert len(texts) == 1 and texts != {""}, texts  # the same seed and prompt: the same answer for everyone
