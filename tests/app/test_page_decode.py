"""The server's side of "Decode in my browser" (components/run/page_decode.py): the trace a page hands back is read
as an upload is and a forged or malformed one gets one line and nothing else; a Run the page cannot decode goes to
the server with one line saying why; the page's own refusal (s2d2_web/decoding/api.js `unsupported`) and the
server's (`page_problem`) agree on every preset, so the server never plans a Run the page then refuses."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from components.run import page_decode
from components.run.random_stream import app_config
from s2d2.config import DecodeConfig, preset, presets
from tests.support.node_runner import run_module

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "assets" / "traces" / "01-verifier-catches-a-wrong-digit.json"
BROWSER = {"where": "browser", "runtime": "onnxruntime-web", "runtime_version": "1.30.0", "backend": "wasm",
           "dtype": "float32"}
REFUSED_KEYS = {"run_status", "live", "output", "run_ok", "run_final"}  # no "state": the session's trace stays


def page_trace(tmp_path: Path, edit=None, name: str = "page-trace.json") -> str:
    """A shipped example's trace as a page would send it (decoded_in: browser), edited by `edit`."""
    data = json.loads(EXAMPLE.read_text(encoding="utf-8"))
    data["header"]["decoded_in"] = dict(BROWSER)
    if edit is not None:
        edit(data)
    path = tmp_path / name
    path.write_text(json.dumps(data) if not isinstance(data, str) else data, encoding="utf-8")
    return str(path)


def one_line_refusal(out: dict, starts: str) -> None:
    assert set(out) == REFUSED_KEYS and out["run_ok"] is False and out["output"] == ""
    status = out["run_status"]
    assert status.startswith("⚠ " + starts) and "\n" not in status and "Traceback" not in status, status


@pytest.mark.skipif(not EXAMPLE.exists(), reason="the shipped example traces are missing")
def test_a_page_trace_becomes_the_sessions_trace(tmp_path):
    out = page_decode.receive("", page_trace(tmp_path))
    assert out["run_ok"] is True and out["state"]["name"] == "run"
    assert out["run_status"].startswith("✓ Done in your browser: decoding took ")
    assert "loading the model is not counted" in out["run_status"]


@pytest.mark.skipif(not EXAMPLE.exists(), reason="the shipped example traces are missing")
@pytest.mark.parametrize("forge, words", [
    (lambda d: d["header"].pop("decoded_in"), "it does not say it was decoded in the browser"),
    (lambda d: d["header"]["decoded_in"].update(where="server"), "it does not say it was decoded in the browser"),
    (lambda d: d["header"]["decoded_in"].update(where="moon"), "Invalid trace file"),
    (lambda d: d["header"]["decoded_in"].update(extra=1), "Invalid trace file"),
    (lambda d: d["steps"][1]["verification"]["positions"][0].update(q=5.0), "Invalid trace file"),
    (lambda d: d["header"].update(seed=-1), "Invalid trace file"),
    (lambda d: d["steps"][0].update(forwards=[999]), "Invalid trace file"),
])
def test_a_forged_page_trace_gets_one_line_and_nothing_else(tmp_path, forge, words):
    out = page_decode.receive("", page_trace(tmp_path, forge))
    one_line_refusal(out, "The trace your page sent was refused: ")
    assert words in out["run_status"]


def test_a_malformed_or_oversized_page_file_gets_one_line(tmp_path):
    bad = tmp_path / "page-trace.json"
    bad.write_text('{"header": [', encoding="utf-8")
    one_line_refusal(page_decode.receive("", str(bad)), "The trace your page sent was refused: Invalid trace file")
    big = tmp_path / "big.json"
    big.write_bytes(b" " * (page_decode.limits().max_upload_bytes + 1))
    one_line_refusal(page_decode.receive("", str(big)), "The trace your page sent was refused: File too large")


def test_the_pages_own_words_without_a_trace():
    one_line_refusal(page_decode.receive('{"page_error": "no <b>WebGL</b>"}', None),
                     "Your browser could not decode this run (no &lt;b&gt;WebGL&lt;/b&gt;)")
    one_line_refusal(page_decode.receive('{"page_error": 7}', None), "Your browser could not decode this run")
    stopped = page_decode.receive('{"page_stopped": true}', None)
    assert stopped["run_status"].startswith("■ Stopped before the model was loaded") and "state" not in stopped
    assert page_decode.receive("", None) == {} and page_decode.receive(None, None) == {}  # a server Run


def test_what_the_page_cannot_decode_goes_to_the_server_with_its_reason():
    aligned = "aligned"
    assert page_decode.page_problem(preset("sdar-config-a"), aligned) is None
    assert page_decode.page_problem(preset("llada2-dynamic-edit"), aligned) is None
    assert page_decode.page_problem(preset("d2f-s2d2"), aligned) is None  # the D2F pipeline runs in the page too
    assert page_decode.page_problem(DecodeConfig.from_dict({**preset("sdar-config-a").to_dict(),
                                                            "policy": "contextual_bandit_ucb"}), aligned) is None
    assert "cost_aware" in page_decode.page_problem(preset("sdar-config-b+cost-aware"), aligned)
    assert "position-aligned" in page_decode.page_problem(preset("fastdllm-config-a"), "shifted")


@pytest.mark.slow  # a Node process
def test_the_server_plans_exactly_what_the_page_decodes():
    configs = {name: app_config(preset(name), "tiny") for name in presets()}
    payload = [{"name": n, "cfg": c.to_dict()} for n, c in configs.items()]
    body = "output = input.map((c) => m.unsupported(c.cfg, {spec: {alignment: 'aligned'}}));"
    page = run_module("decoding/api.js", body, payload)
    for (name, cfg), said in zip(configs.items(), page):
        assert (page_decode.page_problem(cfg, "aligned") is None) == (said is None), (name, said)


def test_a_page_that_cannot_falls_back_in_one_line(monkeypatch):
    from components.run.knobs import EXAMPLE_PROMPTS, preset_values

    knobs = preset_values("sdar-config-a")
    prompt = EXAMPLE_PROMPTS[0]
    assert page_decode.plan(prompt, "tiny", "this browser has no WebAssembly", *knobs) == (
        None, "Decoded on the server: this browser has no WebAssembly.")
    monkeypatch.setenv("S2D2_MODELS", "tiny,JetLM/SDAR-1.7B-Chat")  # a real checkpoint, allowed (never loaded here)
    found = page_decode.offered()
    if found.runtime is not None:
        assert page_decode.plan(prompt, "JetLM/SDAR-1.7B-Chat", "", *knobs) == (
            None, f"Decoded on the server: JetLM/SDAR\\-1.7B\\-Chat has no in-browser export (only "
                  f"{', '.join(found.models)} do).")
    monkeypatch.setattr(page_decode, "offered", lambda: found.__class__({}, None, "off"))
    assert page_decode.plan(prompt, "tiny", "", *knobs) == (
        None, "Decoded on the server: this server does not offer the browser runtime.")


@pytest.mark.skipif(not EXAMPLE.exists(), reason="the shipped example traces are missing")
def test_the_header_says_where_a_trace_was_decoded_in_replay_and_the_html_replay(tmp_path):
    from components.files.html_replay import replay_html
    from components.views.step_views import trace_title
    from s2d2.trace import Trace

    old = Trace.from_json(EXAMPLE.read_text(encoding="utf-8"))  # written before the field existed: still loads
    assert old.header.decoded_in is None and "decoded_in" not in old.to_dict()["header"]
    page = Trace.from_json(Path(page_trace(tmp_path)).read_text(encoding="utf-8"))
    said = "decoded in the browser (onnxruntime-web 1.30.0, wasm, float32)"
    from components.escape import md_text

    assert md_text(said) in trace_title(page) and "decoded on the server" in trace_title(old)  # Markdown-escaped
    assert said in replay_html(page).html and "decoded on the server" in replay_html(old).html
