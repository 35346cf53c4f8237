"""The launched app that the attacker tests send raw HTTP to: a slow scripted model (20 ms a forward) beside the
bundled one, visitors told apart by X-Forwarded-For (S2D2_TRUSTED_PROXY_HOPS=1, as behind the Spaces proxy), and
the requests an attacker sends (join, listen, wait on the decode's progress)."""
from __future__ import annotations

import importlib
import json
import os
import socket
import threading
import time
import uuid

import pytest

httpx = pytest.importorskip("httpx")
SLOW = "test-attacker-slow"  # 20 ms per forward: a decode that lasts
FORWARDS = [0]  # the slow model's forwards so far: tests wait on the decode's progress, never on the wall clock
ENV = {"S2D2_TRUSTED_PROXY_HOPS": "1", "S2D2_TRUSTED_PROXIES": "127.0.0.1", "S2D2_LISTEN_GRACE_S": "2",
       "S2D2_MAX_SESSIONS": "40",
       "S2D2_CLIENT_SESSIONS": "16", "S2D2_CLIENT_UPLOAD_MB": "30", "S2D2_DISK_MB": "64",
       "S2D2_CLIENT_RATE": "5", "S2D2_MODELS": f"tiny,{SLOW}", "GRADIO_HEARTBEAT_INTERVAL": "0.25"}

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    saved = {k: os.environ.get(k) for k in [*ENV, "GRADIO_TEMP_DIR", "S2D2_EXPORT_DIR"]}
    os.environ.update(ENV)
    os.environ["GRADIO_TEMP_DIR"] = str(tmp_path_factory.mktemp("gradio"))
    os.environ.pop("S2D2_EXPORT_DIR", None)  # exports inside Gradio's cache, under the disk budget
    app = importlib.reload(importlib.import_module("app"))
    from tests.support.tiny_models import tiny_qwen3
    from components.serve import model_pool
    from tests.support.app_server import CharTokenizer

    slow = tiny_qwen3(dtype=__import__("torch").float32)
    slow.tokenizer = CharTokenizer()
    fast = slow.forward
    slow.forward = lambda *a, **k: (time.sleep(0.02), FORWARDS.__setitem__(0, FORWARDS[0] + 1), fast(*a, **k))[2]
    model_pool.register_model(SLOW, slow)
    port = free_port()
    app.demo.launch(prevent_thread_lock=True, server_port=port, quiet=True, **app.LAUNCH_KWARGS)
    url = f"http://127.0.0.1:{port}"
    deps = httpx.get(url + "/config").json()["dependencies"]
    yield app, url, {d["api_name"]: d["id"] for d in deps}
    app.demo.close()
    model_pool.forget_model(SLOW)
    for k, v in saved.items():
        os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)


def knobs(**changes):
    from components.run.knobs import KNOB_NAMES, preset_values

    values = dict(zip(KNOB_NAMES, preset_values("dynamic-baseline")))
    values.update(changes)
    return list(values.values())


def join(url, fn, data, session=None, ip="10.9.0.1", event_data=None, raw=None):
    body = raw if raw is not None else json.dumps(
        {"data": data, "fn_index": fn, "session_hash": session or uuid.uuid4().hex[:12], "event_data": event_data,
         "trigger_id": None})
    return httpx.post(url + "/gradio_api/queue/join", content=body, timeout=60,
                      headers={"content-type": "application/json", "x-forwarded-for": ip})


def outcome(url, session, ip="10.9.0.1", timeout=60):
    """('done', success, output) of the session's next completed event, or ('died', error)."""
    try:
        with httpx.stream("GET", url + f"/gradio_api/queue/data?session_hash={session}", timeout=timeout,
                          headers={"x-forwarded-for": ip}) as stream:
            for line in stream.iter_lines():
                if line.startswith("data:"):
                    msg = json.loads(line[5:])
                    if msg.get("msg") == "process_completed":
                        return "done", msg.get("success"), msg.get("output")
    except httpx.HTTPError as exc:
        return "died", type(exc).__name__
    return "closed", None


def decoding() -> bool:
    return any(t.name == "s2d2-record" for t in threading.enumerate())


def wait(condition, seconds=60.0) -> bool:
    """Poll for an event, up to a limit far above its time on a loaded machine (the limit only ends a hang)."""
    deadline = time.time() + seconds
    while time.time() < deadline and not condition():
        time.sleep(0.05)
    return condition()


def run_data(prompt="Once", gen=480):
    return [prompt, SLOW, *knobs(gen_length=gen, block_length=4)]
