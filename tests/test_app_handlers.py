"""Unit tests of the app's files, run panel, handlers and tour (synthetic traces, engine traces on random models)."""
from __future__ import annotations

import json
import pickle
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import trace_factory as tf  # noqa: E402

from components import canvas, figures, handlers, learn, mask_view, replay, run_panel, traces_io  # noqa: E402
from s2d2.config import preset  # noqa: E402
from s2d2.limits import limits  # noqa: E402
from s2d2.trace import Trace  # noqa: E402


# -- traces as files ---------------------------------------------------------------------------------------------

def _bad(mutate) -> str:
    data = tf.mixed().to_dict()
    mutate(data)
    with pytest.raises(traces_io.TraceError) as exc:
        traces_io.parse_text(json.dumps(data))
    return str(exc.value)


def test_upload_validation_messages(tmp_path):
    assert "schema_version" in _bad(lambda d: d["header"].__setitem__("schema_version", 99))
    assert "expected an integer" in _bad(lambda d: d["forwards"][0].__setitem__("index", "0"))
    assert ".commits[0].how: must be one of" in _bad(lambda d: d["steps"][0]["commits"][0].__setitem__("how", "<x>"))
    assert "longer than" in _bad(lambda d: d["header"].__setitem__("prompt_text", "x" * 20_001))
    assert "unknown field" in _bad(lambda d: d.__setitem__("__class__", "os.system"))
    for raw, msg in [(b"\xff\xfe", "UTF-8"), (b"{not json", "not valid JSON"), (b"[]", "JSON object")]:
        with pytest.raises(traces_io.TraceError, match=msg):
            traces_io.parse_text(raw)
    big = tmp_path / "big.json"
    big.write_bytes(b" " * (limits().max_upload_bytes + 1))
    with pytest.raises(traces_io.TraceError, match="too large"):
        traces_io.parse_upload(str(big))
    with pytest.raises(traces_io.TraceError, match="No file"):
        traces_io.parse_upload(None)


def test_download_upload_roundtrip_and_state(tmp_path):
    t = tf.hostile()
    path = traces_io.export_path(t, str(tmp_path))
    assert Path(path).name == "s2d2-trace-synthetic-tiny-s2d2-seed0.json"
    back = traces_io.parse_upload(path)
    assert back.to_dict() == t.to_dict()
    state = traces_io.make_state(back, "x")
    assert json.loads(json.loads(json.dumps(state))["json"]) == t.to_dict()
    assert traces_io.trace_from_state(state) is back
    assert traces_io.trace_from_state({"key": "other", "json": state["json"]}).to_dict() == t.to_dict()
    assert traces_io.trace_from_state({"key": "legacy", "trace": t.to_dict()}).to_dict() == t.to_dict()
    assert traces_io.trace_from_state(None) is None and traces_io.trace_from_state({"trace": {"x": 1}}) is None
    assert traces_io.example_label("01-sdar-config-b--arithmetic") == "sdar-config-b · arithmetic"


# -- run panel ---------------------------------------------------------------------------------------------------

def test_config_from_inputs_presets_and_errors():
    values = run_panel.preset_values("fastdllm-config-a", seed=7)
    cfg, seed, err = run_panel.config_from_inputs(*values)
    assert err is None and seed == 7 and cfg == preset("fastdllm-config-a", gen_length=64)
    v = dict(zip(run_panel.KNOB_NAMES, values))
    v.update(policy="score_hysteresis", hysteresis_on=-1.0, hysteresis_off=0.5)
    cfg, _, err = run_panel.config_from_inputs(*v.values())
    assert cfg is None and err.startswith("Invalid setting — hysteresis_off:")
    v = dict(zip(run_panel.KNOB_NAMES, values), gen_length=4096)
    assert "at most 512" in run_panel.config_from_inputs(*v.values())[2]
    v = dict(zip(run_panel.KNOB_NAMES, values), block_length=None)
    assert "block_length: no value" in run_panel.config_from_inputs(*v.values())[2]
    v = dict(zip(run_panel.KNOB_NAMES, values), acceptance="greedy_exact", temperature=0.7)
    assert "temperature" in run_panel.config_from_inputs(*v.values())[2]
    assert "expected" in run_panel.config_from_inputs(1, 2)[2]


def test_model_allow_list(monkeypatch):
    assert run_panel.check_model("tiny") is None and run_panel.check_model("JetLM/SDAR-1.7B-Chat") is None
    assert "Unknown model '/etc'" in run_panel.check_model("/etc")
    monkeypatch.setenv("S2D2_ALLOW_ANY_MODEL", "1")
    assert run_panel.check_model("/some/folder") is None


def test_prompt_caps_and_duration():
    assert run_panel.check_prompt("  ") and run_panel.check_prompt(None)
    assert "at most" in run_panel.check_prompt("x" * (run_panel.MAX_PROMPT_CHARS + 1))
    assert run_panel.check_prompt("2+3?") is None
    small = run_panel.gpu_duration("p", "tiny", {"gen_length": 16, "block_length": 4})
    big = run_panel.gpu_duration("p", "JetLM/SDAR-1.7B-Chat", {"gen_length": 512, "block_length": 4})
    assert 20 <= small < big <= run_panel.MAX_RUN_SECONDS


class _Result:
    def __init__(self, trace):
        self.trace, self.text = trace, trace.footer.output_text


def _fake_generate(model, prompt, cfg, seed=0, on_block=None, should_stop=None, max_seconds=None):
    t = tf.mixed()
    for k in range(1, len(t.steps) + 1):
        on_block(t.steps[:k])
        if should_stop():
            raise RuntimeError("stopped")
    return _Result(t)


def test_record_stream_progress_and_done():
    cfg = preset("sdar-config-a").to_dict()
    events = list(run_panel.record_stream("p", "tiny", cfg, 0, _fake_generate, lambda n: object(), min_interval=0))
    kinds = [e["kind"] for e in events]
    assert kinds[-1] == "done" and kinds.count("progress") == 7
    assert events[0]["commits"] == [[6, tf.mixed().steps[0].commits[0].text, "resampled"]]
    done = pickle.loads(pickle.dumps(events[-1]))  # ZeroGPU pickles what record yields
    assert Trace.from_dict(json.loads(json.dumps(done["trace"]))).replay() == tf.mixed().footer.output_ids


def test_record_stream_errors_are_messages():
    cfg = preset("sdar-config-a").to_dict()

    def bad_load(name):
        raise ValueError("Could not load model 'x': missing")

    assert list(run_panel.record_stream("p", "x", cfg, 0, _fake_generate, bad_load)) == [
        {"kind": "error", "message": "Could not load model 'x': missing"}]

    def crash(*a, **k):
        raise RuntimeError("CUDA out of memory")

    ev = list(run_panel.record_stream("p", "tiny", cfg, 0, crash, lambda n: object()))
    assert ev[-1]["kind"] == "error" and "RuntimeError: CUDA out of memory" in ev[-1]["message"]
    ev = list(run_panel.record_stream("p", "tiny", {"block_length": 0}, 0, crash, lambda n: object()))
    assert ev[0]["kind"] == "error" and "block_length" in ev[0]["message"]


def test_record_stream_close_stops_the_decode():
    import threading

    stopped = threading.Event()

    def slow(model, prompt, cfg, seed=0, on_block=None, should_stop=None, max_seconds=None):
        for k in range(200):
            on_block(tf.mixed().steps[:1])
            if should_stop():
                stopped.set()
                raise RuntimeError("stopped")
            threading.Event().wait(0.01)
        return _Result(tf.mixed())

    gen = run_panel.record_stream("p", "tiny", preset("sdar-config-a").to_dict(), 0, slow, lambda n: object(),
                                  min_interval=0)
    assert next(gen)["kind"] == "progress"
    gen.close()
    assert stopped.wait(5)


# -- handlers ----------------------------------------------------------------------------------------------------

def test_handlers_state_and_scrubbing():
    state = traces_io.make_state(tf.mixed(), "m")
    assert handlers.step_views(None, 1)[4] == handlers.NO_TRACE
    assert handlers.step_views(state, 1)[4].startswith("Block 1, step 1")
    assert handlers.move(state, 0, -1) == 0 and handlers.move(state, 7, 1) == 7 and handlers.move(state, 3.0, 1) == 4
    step, timer, _, playing = handlers.tick(state, 6)
    assert step == 7 and timer.active is False and playing is False
    assert handlers.tick(state, 2)[0] == 3
    playing, timer, _, start = handlers.toggle_play(False, state, 7, 2.0)
    assert playing is True and timer.active and timer.value == 0.5 and start == 0
    assert handlers.toggle_play(True, state, 3, 1.0)[0] is False


def test_handlers_upload_and_run_messages(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"header": {"schema_version": 7}}')
    out = handlers.upload_trace(str(bad))
    assert out[1].startswith("⚠️ Invalid trace file") and "schema\\_version" in out[1]
    good = traces_io.export_path(tf.all_accepted(), str(tmp_path))
    out = handlers.upload_trace(str(good))
    assert out[1] == "Loaded the uploaded trace." and traces_io.trace_from_state(out[0]).to_dict() == \
        tf.all_accepted().to_dict()
    assert len(out) == 15
    msgs = list(handlers.run("", "tiny", *run_panel.preset_values("sdar-config-a")))
    assert len(msgs) == 1 and msgs[0][0].startswith("⚠️ Type a prompt") and msgs[0][4] is False
    assert len(handlers.apply_preset("ar")) == len(run_panel.KNOBS)


def test_tour_stops_point_at_illustrative_steps():
    t = tf.mixed()
    stops = learn.tour_stops(t)
    titles = [s.title.split(" · ")[1] for s in stops]
    assert titles == ["Draft", "Span and routing", "Verify with the same model", "Accept or reject",
                      "Residual resampling", "Skipping verification", "The whole run"]
    res = next(s for s in stops if s.title.endswith("Residual resampling"))
    assert any(c.how == "resampled" for c in t.steps[res.step - 1].commits)
    assert len(learn.tour_stops(tf.diffusion_only())) == 2


# -- traces recorded by the real engine (random tiny models): the views read what the decoder writes -------------

@pytest.mark.parametrize("family,preset_name,gen", [("aligned", "sdar-config-b", 12),
                                                     ("shifted", "fastdllm-config-c", 8), ("aligned", "ar", 4)])
def test_views_on_engine_traces(family, preset_name, gen):
    conftest = pytest.importorskip("conftest")
    import s2d2

    model = conftest.tiny_qwen3(block_size=4) if family == "aligned" else conftest.tiny_qwen2()
    trace = s2d2.generate(model, list(range(10, 17)), preset(preset_name, gen_length=gen), seed=0).trace
    trace = Trace.from_json(trace.to_json())
    idx = canvas.index_of(trace)
    for s in range(len(trace.steps) + 1):
        out = replay.render_step(trace, s)
        assert out[4].startswith("Start" if s == 0 else f"Block {trace.steps[s - 1].block}")
        for which in mask_view.WHICH:
            fig = mask_view.mask_figure(trace, s, which)
            if fig.data:
                f = mask_view.pick_forward(trace, s, which)
                assert len(fig.data[0].z) == f.input_len
    final = canvas.render_canvas(trace, len(trace.steps), show_future=True)
    committed = {c.position for st in trace.steps for c in st.commits}
    assert all(f'data-pos="{p}"' in final for p in committed) and set(idx.commit_of) == committed
    rows = dict(replay.metrics_table(trace))
    assert rows["NFE (forward passes)"] == str(len(trace.forwards))
    skeleton = s2d2.generate(model, list(range(10, 17)), preset(preset_name, gen_length=gen), seed=0,
                             detailed=False).trace
    html = canvas.render_canvas(skeleton, len(skeleton.steps), show_future=True)
    assert "Skeleton trace" in html and 'data-pos="0"' in html and "#10" in html
    assert all(len(replay.render_step(skeleton, s)) == 5 for s in range(len(skeleton.steps) + 1))
    if preset_name == "sdar-config-b":  # always verifies: every step has a strip and an accepted-length
        assert len(figures.acceptance_lengths(trace)) == len(trace.steps)


def test_precompute_script_writes_loadable_examples(tmp_path, monkeypatch):
    conftest = pytest.importorskip("conftest")
    import importlib

    import s2d2
    from test_app_client import CharTokenizer

    import torch

    model = conftest.tiny_qwen3(dtype=torch.float32, block_size=4)
    model.tokenizer = CharTokenizer()
    monkeypatch.setattr(s2d2, "load_model", lambda name: model, raising=False)
    script = importlib.import_module("scripts.precompute_traces")
    assert script.main(["--gen-length", "4", "--out", str(tmp_path)]) == 0
    examples = traces_io.example_traces(tmp_path)
    assert list(examples)[0] == "s2d2-sampled · apples" and len(examples) == len(script.RUNS)
    for path in examples.values():
        trace = traces_io.load_example(path)
        assert trace.header.provenance == "measured" and trace.steps
    monkeypatch.setattr(s2d2, "load_model", lambda name: (_ for _ in ()).throw(ValueError("no such model")),
                        raising=False)
    assert script.main(["--out", str(tmp_path / "none")]) == 1


def test_example_and_state_handlers():
    examples = traces_io.example_traces()
    if not examples:
        pytest.skip("no shipped example traces (run scripts/precompute_traces.py)")
    name = next(iter(examples))
    out = handlers.load_example_trace(name)
    assert len(out) == 15 and out[1] == f"Loaded example **{name}**."
    assert traces_io.trace_from_state(out[0]).header.provenance == "measured"
    assert handlers.load_example_trace("nope")[1] == "Unknown example 'nope'."
    assert all(v is not None for v in handlers.state_views(out[0], True)[2:])
    skipped = handlers.state_views(out[0], False)
    assert len(skipped) == 15 and all(v == gr_skip() for v in skipped)
    assert handlers.set_speed(4, True).value == 0.25 and handlers.set_speed(0, False).value == 1.0


def gr_skip():
    import gradio as gr

    return gr.skip()


def test_app_structure_internal_handlers_are_private():
    import app

    cfg = app.demo.get_config_file()
    deps = {d.get("api_name"): d.get("api_visibility") for d in cfg["dependencies"]}
    for public in ("step", "open_example", "upload_trace", "run", "show_trace"):
        assert deps.get(public) == "public", public
    internal = [n for n in deps if n and n.startswith(("lambda", "tick", "toggle_play", "set_speed", "apply_preset",
                                                        "state_views", "step_views"))]
    assert internal and all(deps[n] == "private" for n in internal)
    ids = {c.get("props", {}).get("elem_id") for c in cfg["components"]}
    assert {"canvas", "strip", "routing", "mask", "summary", "step-slider", "run", "stop", "tour"} <= ids
    assert [label for label, _, _ in app.TABS][:4] == ["Replay", "Run", "Learn", "Metrics & about"]
