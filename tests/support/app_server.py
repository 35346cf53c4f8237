"""A launched app for the tests that drive it over HTTP (gradio_client, Chromium): the `served` fixture, the seeded
random tiny Qwen3 it registers under RANDOM_MODEL / SLOW_MODEL, and the character tokenizer those models use."""
from __future__ import annotations

import importlib
import os
import socket
from pathlib import Path

import pytest

from fixtures import trace_factory as tf

ROOT = Path(__file__).resolve().parents[2]
RANDOM_MODEL = "test-random-qwen3"
SLOW_MODEL = "test-random-qwen3-slow"  # 20 ms per forward: a run long enough to be stopped


class CharTokenizer:
    """Characters <-> ids below the random model's stop ids (297, 298) and mask (299)."""

    chat_template = None

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return [min(ord(c), 296) for c in text]

    def decode(self, ids: list[int], **_: object) -> str:
        return "".join(chr(i) for i in ids if i < 297)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_examples(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for i, name in enumerate(["mixed", "hysteresis_flip", "hostile"]):
        (directory / f"{i:02d}-{name}.json").write_text(tf.SCENARIOS[name]().to_json())
    return directory


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    os.environ["GRADIO_TEMP_DIR"] = str(tmp_path_factory.mktemp("gradio"))
    shipped = ROOT / "assets" / "traces"  # the real examples once precomputed; synthetic ones until then
    examples = shipped if any(shipped.glob("*.json")) else write_examples(tmp_path_factory.mktemp("examples"))
    os.environ["S2D2_EXAMPLE_TRACES"] = str(examples)
    os.environ["S2D2_MODELS"] = "tiny,tiny-llada2,JetLM/SDAR-1.7B-Chat"  # the allow-list, whatever the memory
    os.environ["GRADIO_HEARTBEAT_INTERVAL"] = "0.25"  # a closed client is noticed quickly (unload)
    os.environ["S2D2_TRUSTED_PROXY_HOPS"] = "1"  # as behind the Spaces proxy: X-Forwarded-For names the visitor
    os.environ["S2D2_TRUSTED_PROXIES"] = "127.0.0.1"  # ... written by the proxy: here, every client on loopback
    os.environ["S2D2_EXPORT_DIR"] = str(tmp_path_factory.mktemp("exports"))
    app = importlib.import_module("app")
    app = importlib.reload(app)  # rebuild with this module's example directory
    from tests.support.tiny_models import tiny_qwen3
    from components.serve import model_pool

    model = tiny_qwen3(dtype=__import__("torch").float32)
    model.tokenizer = CharTokenizer()
    model_pool.register_model(RANDOM_MODEL, model)
    slow = tiny_qwen3(dtype=__import__("torch").float32)
    slow.tokenizer = CharTokenizer()
    fast_forward = slow.forward
    slow.forward = lambda *a, **k: (__import__("time").sleep(0.02), fast_forward(*a, **k))[1]
    model_pool.register_model(SLOW_MODEL, slow)
    port = free_port()
    app.demo.launch(prevent_thread_lock=True, server_port=port, quiet=True, **app.LAUNCH_KWARGS)
    yield app, f"http://127.0.0.1:{port}/"
    app.demo.close()
    for key in ("S2D2_MODELS", "GRADIO_HEARTBEAT_INTERVAL", "S2D2_EXPORT_DIR", "S2D2_TRUSTED_PROXY_HOPS",
                "S2D2_TRUSTED_PROXIES"):
        os.environ.pop(key, None)
