"""Where a Run decodes never changes its answer (components/run/random_stream.py): the app decodes the models the page
can decode with the counter stream wherever it runs, so for the same settings and seed the server's Run and the
page's decode (s2d2_web under Node, with onnxruntime-node on the shipped export) make the same draws, the same
decisions and the same tokens. The library's own default stays torch's generator.
"""
from __future__ import annotations

import json

import pytest

from components.compare import lanes, whatif_panel
from components.files.traces import trace_from_state
from components.run import handlers as run_handlers
from components.run import knobs, page_decode
from components.run.random_stream import (COUNTER_LINE, TORCH_LINE, app_config, stream_line, stream_note,
                                          streams_line)
from s2d2.config import DecodeConfig, preset
from tests.support.node_runner import ROOT, WEB, node, run_module
from tests.support.web_decoder import trace_differences

BROWSER = {"where": "browser", "runtime": "onnxruntime-web", "runtime_version": "1.30.0", "backend": "wasm",
           "dtype": "float32"}  # the header record a page Run adds (components/run/js/page_run.js `request`)
REAL = "JetLM/SDAR-1.7B-Chat"  # a real checkpoint: the page never decodes it
# (preset, knob changes, prompt) on `tiny`: the default preset (greedy drafts, the `paper` acceptance test's u), and
# sampled drafts at temperature 1, where torch's stream routes differently from the counter stream at this seed.
CASES = {"paper": ("sdar-config-a", {}, 0), "sampled": ("sdar-config-b", {"temperature": 1.0}, 2)}
JOB = """
import { createRequire } from "node:module";
const require = createRequire(%s);
const ort = require("onnxruntime-node");
const posts = [];
await m.decodeJob(input, (message) => posts.push(message), ort);
output = posts.at(-1);
"""


def _knobs(name: str, **values) -> list:
    row = dict(zip(knobs.KNOB_NAMES, knobs.preset_values(name)))
    row.update(values)
    return [row[k] for k in knobs.KNOB_NAMES]


def test_the_bundled_models_draw_from_the_counter_stream_and_the_library_keeps_torchs():
    assert DecodeConfig().rng == "torch" and preset("sdar-config-a").rng == "torch"  # the library's default
    for model in ("tiny", "tiny-llada2"):
        assert app_config(preset("sdar-config-a"), model).rng == "counter"
        assert stream_line(model) == COUNTER_LINE and stream_note(model) == {"run_stream": COUNTER_LINE}
    assert app_config(preset("sdar-config-a"), REAL).rng == "torch" and stream_line(REAL) == TORCH_LINE
    assert stream_line(None) == TORCH_LINE  # a value no model has: no claim of a shared stream


def test_compare_lanes_draw_from_the_models_stream_and_a_lanes_own_setting_wins():
    configs = lanes.lane_configs(["sdar-config-a", "ar"], ["", "rng=torch"], 16, {"rng": "counter"})
    assert [c.rng for c in configs.values()] == ["counter", "torch"]
    assert streams_line(configs) == ("Random draws came from the shared counter stream (the draws a Run of this "
                                           "model makes on the server and in your browser alike) in Lane 1; "
                                           "torch's random generator in Lane 2.")
    one = lanes.lane_configs(["sdar-config-a", "ar"], ["", ""], 16, {"rng": "counter"})
    assert streams_line(one).startswith("Random draws came from the shared counter stream")
    assert [c.rng for c in lanes.lane_configs(["sdar-config-a", "ar"], ["", ""], 16).values()] == ["torch", "torch"]


def test_a_compare_on_tiny_runs_its_lanes_and_their_what_if_re_run_with_the_counter_stream(monkeypatch):
    status, state = lanes.run_compare(knobs.EXAMPLE_PROMPTS[0], "tiny", 3, 16, "sdar-config-a", "ar", lanes.OFF,
                                      lanes.OFF, "", "", "", "", load=_tiny, generate=None)
    assert state is not None, status
    assert {h["header"]["config"].get("rng") for h in state["lanes"].values()} == {"counter"}
    assert "Random draws came from the shared counter stream" in status
    asked = []

    def decode(model_name, prompt, configs, *args, **kwargs):
        asked.extend(c.rng for c in configs.values())
        return lanes.decode_lanes(model_name, prompt, configs, *args, **kwargs)

    monkeypatch.setattr(whatif_panel, "decode_lanes", decode)
    lane = "1·sdar-config-a"
    out = whatif_panel.rerun_whatif(state, lane, *whatif_panel.knob_values(state, lane), load=_tiny)
    assert asked == ["counter"] and "Outputs: identical token for token." in out["wi_status"], out["wi_status"]


def _tiny(name: str):
    from components.serve.model_pool import get_model

    return get_model(name)


def _page_decode(plan: dict, **extra) -> dict:
    """The page's decode of a plan: the worker's job (s2d2_web/decode_job.js) on the shipped export of plan's model,
    under Node with onnxruntime-node; its final post's trace."""
    node()
    if not (WEB / "node_modules" / "onnxruntime-node").is_dir():
        pytest.skip("onnxruntime-node is not installed: run `npm ci --prefix s2d2_web` (README, 'Set up')")
    folder = ROOT / "assets" / "web" / plan["model"]
    request = {"manifest": json.loads((folder / "manifest.json").read_text()), "modelUrl": str(folder / "model.onnx"),
               "tokenizer": json.loads((folder / "tokenizer.json").read_text()), "promptIds": plan["prompt_ids"],
               "promptText": plan["prompt_text"], "seed": plan["seed"], "config": plan["config"], **extra}
    last = run_module("decode_job.js", JOB % json.dumps((WEB / "package.json").as_uri()), request, timeout=300)
    assert last["type"] == "done", last
    return last["trace"]


def _server_run(name: str, changes: dict, prompt: str) -> dict:
    done = list(run_handlers.run(prompt, "tiny", *_knobs(name, **changes)))[-1]
    assert done["run_ok"] is True, done["run_status"]
    return trace_from_state(done["state"]).to_dict()


def _same_run(server: dict, page: dict) -> list[str]:
    """Where two traces of one Run differ (the model's record says where it ran, which is meant to differ)."""
    page = {**page, "header": {**page["header"], "model": server["header"]["model"]}}
    return trace_differences(server, page)


def _decisions(trace: dict) -> list:
    return [(s["decision"] or {}).get("verify") for s in trace["steps"]]


@pytest.mark.slow  # two server Runs, the same two with torch's stream, and a Node process per page decode
@pytest.mark.parametrize("case", list(CASES))
def test_the_servers_run_equals_the_pages_decode_and_torchs_stream_would_not(monkeypatch, case):
    name, changes, prompt_index = CASES[case]
    prompt, row = knobs.EXAMPLE_PROMPTS[prompt_index], _knobs(name, **changes)
    plan, line = page_decode.plan(prompt, "tiny", "", *row)
    if plan is None:
        pytest.skip(f"this server does not offer the page decoder: {line}")
    page = _page_decode(plan)
    server = _server_run(name, changes, prompt)
    assert server["header"]["config"].get("rng") == plan["config"]["rng"] == "counter"
    assert server["footer"]["output_ids"] == page["footer"]["output_ids"]
    assert _decisions(server) == _decisions(page)
    assert _same_run(server, page) == []  # every token, decision and draw; floats within 1e-4
    # The server's Run as it was (torch's generator): the page's answer is not its answer.
    monkeypatch.setattr(run_handlers, "app_config", lambda cfg, model_name: cfg)
    old = _server_run(name, changes, prompt)
    assert old["header"]["config"].get("rng", "torch") == "torch" and _same_run(old, page) != []
    if case == "sampled":
        assert _decisions(old) != _decisions(page)


@pytest.mark.slow  # a page decode under Node, then a Compare of two lanes on the server
def test_a_compare_of_a_page_runs_settings_gives_the_page_runs_answer(tmp_path):
    """The default Run decoded in the page and handed back (page_decode.receive, as the Run's hand-off event reads it)
    becomes the session's trace; Compare, run on the same prompt, seed and preset, decodes that lane on the server and
    gets the page's trace: the same tokens, decisions, draws and forwards."""
    prompt, row = knobs.EXAMPLE_PROMPTS[0], _knobs("sdar-config-a", seed=4)
    plan, line = page_decode.plan(prompt, "tiny", "", *row)
    if plan is None:
        pytest.skip(f"this server does not offer the page decoder: {line}")
    sent = tmp_path / "page-trace.json"
    sent.write_text(json.dumps(_page_decode(plan, decodedIn=BROWSER)), encoding="utf-8")
    handed = page_decode.receive("", str(sent))
    assert handed["run_ok"] is True, handed["run_status"]
    page = trace_from_state(handed["state"]).to_dict()
    assert page["header"]["decoded_in"]["where"] == "browser"
    gen = page["header"]["gen_length"]
    status, state = lanes.run_compare(prompt, "tiny", 4, gen, "sdar-config-a", "ar", lanes.OFF, lanes.OFF, "", "", "",
                                      "", load=_tiny, generate=None)
    assert state is not None, status
    lane = lanes.traces_of(state)["1·sdar-config-a"].to_dict()
    assert lane["header"]["config"] == page["header"]["config"] and lane["header"]["seed"] == page["header"]["seed"]
    for part in ("blocks", "forwards", "steps", "footer"):
        assert trace_differences(lane[part], page[part], path=part) == []
