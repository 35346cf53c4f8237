"""Unit tests of the app's files, run panel, handlers and tour (synthetic traces, engine traces on random models)."""
from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest

from fixtures import trace_factory as tf

from components.views import canvas
from components.files import examples
from components.views import figures
from components.replay import handlers
from components.run import handlers as run_handlers
from components.views import attention_mask
from components.views import step_views
from components.run import config_check
from components.run import knobs
from components.run import workers
from components.run import zerogpu
from components.serve import model_pool
from components.views import story
from components.tour import material as tour
from components.tour import stops as tour_stops
from components.tour import pictures
from components.files import traces as traces_io
from s2d2.compare import first_difference
from s2d2.config import preset  # noqa: E402
from s2d2.limits import limits  # noqa: E402
from s2d2.tasks import arithmetic  # noqa: E402
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
    for raw, msg in [(b"\xff\xfe", "not a text file"), (b"{not json", "not valid JSON"), (b"[]", "JSON object")]:
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
    assert json.loads(json.dumps(state)) == state and set(state) == {"key", "name"}  # a handle, not the trace
    assert json.loads(traces_io.STORE.get(state["key"])) == t.to_dict()
    assert traces_io.trace_from_state(state) is back
    text = traces_io.STORE.get(state["key"])
    assert traces_io.trace_from_state({"key": "other", "json": text}).to_dict() == t.to_dict()
    assert traces_io.trace_from_state({"key": "legacy", "trace": t.to_dict()}).to_dict() == t.to_dict()
    assert traces_io.trace_from_state(None) is None and traces_io.trace_from_state({"trace": {"x": 1}}) is None


# -- run panel ---------------------------------------------------------------------------------------------------

def test_config_from_inputs_presets_and_errors():
    values = knobs.preset_values("fastdllm-config-a", seed=7)
    cfg, seed, err = config_check.config_from_inputs(*values)
    assert err is None and seed == 7 and cfg == preset("fastdllm-config-a", gen_length=64)
    v = dict(zip(knobs.KNOB_NAMES, values))
    v.update(policy="score_hysteresis", hysteresis_on=-1.0, hysteresis_off=0.5)
    cfg, _, err = config_check.config_from_inputs(*v.values())
    assert cfg is None and err.startswith("Invalid setting — hysteresis_off:")
    v = dict(zip(knobs.KNOB_NAMES, values), gen_length=4096)
    assert "at most 512" in config_check.config_from_inputs(*v.values())[2]
    v = dict(zip(knobs.KNOB_NAMES, values), block_length=None)
    assert "block_length: no value" in config_check.config_from_inputs(*v.values())[2]
    v = dict(zip(knobs.KNOB_NAMES, values), acceptance="greedy_exact", temperature=0.7)
    assert "temperature" in config_check.config_from_inputs(*v.values())[2]
    assert "expected" in config_check.config_from_inputs(1, 2)[2]


def test_run_knobs_follow_the_policy_registry_and_presets_read_true():
    from components.views import describe
    from components.run import knob_scope
    from s2d2.config import LOOPS, METHODS, POLICIES, REMASKING
    from s2d2.policies import REGISTRY

    assert set(knobs.KNOB_NAMES) <= set(knob_scope.KNOB_SCOPE)  # every Run knob has a scope
    for method in METHODS:
        for policy in POLICIES:
            for rule in REMASKING:
                for loop in LOOPS:
                    shown = [k for k in knobs.KNOB_NAMES if knob_scope.shown(k, method, policy, rule, loop)]
                    assert sum(knob_scope.is_main(k) for k in shown) <= knob_scope.MAX_MAIN
    for name, cls in REGISTRY.items():  # a policy's knobs are shown exactly with the policies declaring them
        for knob in cls.knobs:
            users = {p for p, c in REGISTRY.items() if any(k.field == knob.field for k in c.knobs)}
            for policy in POLICIES:
                assert knob_scope.shown(knob.field, "s2d2", policy, "low_confidence_static") == (policy in users)
            assert not knob_scope.shown(knob.field, "diffusion", name, "low_confidence_static")
    assert knob_scope.is_main("score_threshold") and not knob_scope.is_main("penalty_coef")
    assert "(on at s ≥ 1, off at s < −5)" in describe.plain_title(preset("fastdllm-config-a", hysteresis_strict=False))
    assert "(on at s > 1, off at s < −5)" in describe.plain_title(preset("fastdllm-config-a"))
    assert describe.plain_title(preset("sdar-config-b+all")) == (
        "Always verify, adaptive blocks starting at 16, reusing the verifier's KV, commits fused into drafts")


def test_model_allow_list(monkeypatch):
    # the default list is decided once from the machine's free memory and the loaded-model cap: pin both, and
    # decide it afresh (another test may have decided it under its own settings; a small laptop would too)
    monkeypatch.setattr(model_pool, "free_memory_gb", lambda: 64.0)
    monkeypatch.setattr(model_pool, "fetchable", lambda *repos: True)  # as online (tests run offline)
    monkeypatch.delenv("S2D2_MODELS", raising=False)
    monkeypatch.delenv("S2D2_MAX_LOADED_MODELS", raising=False)
    model_pool.default_models.cache_clear()
    try:
        assert model_pool.check_model("tiny") is None and model_pool.check_model("JetLM/SDAR-1.7B-Chat") is None
        assert "Unknown model '/etc'" in model_pool.check_model("/etc")
        monkeypatch.setenv("S2D2_ALLOW_ANY_MODEL", "1")
        assert model_pool.check_model("/some/folder") is None
    finally:
        model_pool.default_models.cache_clear()  # the next caller decides it under its own settings


def test_prompt_caps_and_duration():
    assert config_check.check_prompt("  ") and config_check.check_prompt(None)
    assert f"longer than {knobs.MAX_PROMPT_CHARS:,} characters" in config_check.check_prompt(
        "x" * (knobs.MAX_PROMPT_CHARS + 1))
    assert config_check.check_prompt("2+3?") is None
    small = zerogpu.gpu_duration("p", "tiny", {"gen_length": 16, "block_length": 4})
    big = zerogpu.gpu_duration("p", "JetLM/SDAR-1.7B-Chat", {"gen_length": 512, "block_length": 4})
    assert 20 <= small < big <= knobs.MAX_RUN_SECONDS


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
    events = list(workers.record_stream("p", "tiny", cfg, 0, _fake_generate, lambda n: object(), min_interval=0))
    kinds = [e["kind"] for e in events]
    assert kinds[-1] == "done" and kinds.count("progress") == 7
    first = tf.mixed().steps[0].commits[0]
    assert events[0]["commits"] == [[6, first.text, "resampled", first.token]]
    done = pickle.loads(pickle.dumps(events[-1]))  # ZeroGPU pickles what record yields
    assert Trace.from_dict(json.loads(json.dumps(done["trace"]))).replay() == tf.mixed().footer.output_ids


def test_record_stream_errors_are_messages():
    cfg = preset("sdar-config-a").to_dict()

    def bad_load(name):
        raise ValueError("Could not load model 'x': missing")

    assert list(workers.record_stream("p", "x", cfg, 0, _fake_generate, bad_load)) == [
        {"kind": "error", "message": "Could not load model 'x': missing"}]

    def crash(*a, **k):
        raise RuntimeError("CUDA out of memory")

    ev = list(workers.record_stream("p", "tiny", cfg, 0, crash, lambda n: object()))
    assert ev[-1]["kind"] == "error" and "RuntimeError: CUDA out of memory" in ev[-1]["message"]
    ev = list(workers.record_stream("p", "tiny", {"block_length": 0}, 0, crash, lambda n: object()))
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

    gen = workers.record_stream("p", "tiny", preset("sdar-config-a").to_dict(), 0, slow, lambda n: object(),
                                  min_interval=0)
    assert next(gen)["kind"] == "progress"
    gen.close()
    assert stopped.wait(5)


# -- handlers ----------------------------------------------------------------------------------------------------

class _Request:
    def __init__(self, session_hash: str = "test-session"):
        self.session_hash = session_hash


def test_handlers_state_and_scrubbing():
    state = traces_io.make_state(tf.mixed(), "m")
    assert handlers.step_views(None, 1)["summary"] == handlers.NO_TRACE
    views = handlers.step_views(state, 1)
    assert set(views) == set(handlers.STEP_OUT) and views["summary"].startswith("Step 1 of")
    assert handlers.step_views(state, None) == {}  # a blank step box changes nothing
    # ◀ ▶ and Play run in the browser (components/replay/js/, tests/app/test_frame_bundle.py); the server draws
    # only the steps the browser hands it, and -1 (drawn in the browser) changes nothing.
    assert handlers.server_step(state, 3) == views | handlers.step_views(state, 3) and handlers.server_step(state, -1) == {}
    assert set(handlers.trace_views(tf.mixed(), 3)) == set(handlers.TRACE_OUT)


def test_handlers_upload_and_run_messages(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"header": {"schema_version": 7}}')
    out = handlers.upload_trace(str(bad))
    assert list(out) == ["load_status"]  # one message, every other output unchanged
    assert out["load_status"].startswith("⚠ bad.json: Invalid trace file") and "schema\\_version" in out["load_status"]
    good = traces_io.export_path(tf.all_accepted(), str(tmp_path))
    out = handlers.upload_trace(str(good))
    assert out["load_status"] == "Loaded the uploaded trace." and out["example"]["value"] is None and "your uploaded trace" in out["example"]["label"]
    assert traces_io.trace_from_state(out["state"]).to_dict() == tf.all_accepted().to_dict()
    assert set(out) == set(handlers.LOAD_OUT) and out["toggle"].visible is False
    msgs = list(run_handlers.run("", "tiny", *knobs.preset_values("sdar-config-a")))
    assert len(msgs) == 1 and msgs[0]["run_status"].startswith("⚠ Type a prompt") and msgs[0]["run_ok"] is False
    preset_out = run_handlers.apply_preset("ar", 3)
    assert set(preset_out) == {*run_handlers.KNOB_OUT, *run_handlers.PRESET_OUT}
    assert preset_out["knob_seed"]["value"] == 3
    assert preset_out["knob_block_length"]["visible"] is False and "`ar`" in preset_out["preset_note"]
    assert preset_out["preset_drift"] == ""  # a preset applied: no knob differs from it


def _fake_record(session: str, stop_after: int):
    """A stand-in for zerogpu.record: progress per block; honours the job's stop flag like the real decoder (which
    sees it before the next forward), and ends with the partial trace."""
    from components.serve import gpu_slot as guard

    def record(prompt, model_name, config, seed=0):
        t = tf.mixed()
        for k in range(1, len(t.steps) + 1):
            if k == stop_after:
                guard.stop(_Request(session))  # the Stop button, pressed while block k decodes
            yield {"kind": "progress", "steps": k, "commits": [[6, "x", "accepted", 5]], "stop_ids": [2],
                   "elapsed": 0.1 * k}
            if guard.stop_requested():  # the run up to its last complete block (tf.mixed: steps 1-2 fill block 1)
                last = t.steps[k - 1].block
                t.steps, t.blocks = t.steps[:k], [b for b in t.blocks if b.index <= last]
                t.forwards = [f for f in t.forwards if f.block <= last]
                t.footer.finish_reason = "cancelled"
                break
        yield {"kind": "done", "trace": t.to_dict(), "text": "partial", "elapsed": 1.0}

    return record


def _guarded_run(session: str, *args):
    """run_handlers.run as app.py wires it: the session's one job (components/serve/gpu_slot.py)."""
    from components.serve import gpu_slot as guard

    return list(guard.one_job(run_handlers.run, run_handlers.run_refused)(_Request(session), *args))


def test_stop_ends_on_partial_trace_kept(monkeypatch):
    from components.serve import gpu_slot as guard

    monkeypatch.setattr(run_handlers, "record", _fake_record("s1", stop_after=2))
    outs = _guarded_run("s1", "2+3", "tiny", *knobs.preset_values("sdar-config-a"))
    last = outs[-1]
    assert last["run_status"].startswith("■ Stopped — partial trace kept (2 steps") and last["run_ok"] is True
    assert len(traces_io.trace_from_state(last["state"]).steps) == 2
    # the run is the only writer of its status: nothing after the final line, and no "Decoding…" once Stop is down
    statuses = [o["run_status"] for o in outs if "run_status" in o]
    assert statuses[-1] == last["run_status"] and statuses[-2] == "Stopping…"
    assert not guard.JOBS.running("s1")
    # a new run is a new job: the earlier Stop press is forgotten
    monkeypatch.setattr(run_handlers, "record", _fake_record("s1", stop_after=99))
    outs = _guarded_run("s1", "2+3", "tiny", *knobs.preset_values("sdar-config-a"))
    assert outs[-1]["run_status"].startswith("✓ Done")


def test_stop_abandons_a_worker_that_cannot_see_the_flag(monkeypatch):
    from components.serve import gpu_slot as guard

    def deaf(prompt, model_name, config, seed=0):
        guard.stop(_Request("s2"))
        for k in range(1, 20):  # never stops (a worker process with its own copy of the flags)
            yield {"kind": "progress", "steps": k, "commits": [], "elapsed": 0.1}

    monkeypatch.setattr(run_handlers, "record", deaf)
    outs = _guarded_run("s2", "2+3", "tiny", *knobs.preset_values("sdar-config-a"))
    assert outs[-1]["run_status"].startswith("■ Stopped") and outs[-1]["run_ok"] is False
    assert len(outs) <= 2 + run_handlers.MAX_LATE_PROGRESS and not guard.JOBS.running("s2")


def test_a_run_stopped_while_queued_does_nothing_when_its_turn_comes(monkeypatch):
    from components.serve import gpu_slot as guard

    ran = []

    def record(*args):
        ran.append(args)
        yield from ()

    monkeypatch.setattr(run_handlers, "record", record)
    assert guard.JOBS.admit("s3") is None  # the Run event is admitted to the queue (its validator)
    guard.stop(_Request("s3"))  # Stop while it waits
    assert guard.JOBS.admit("s3") is None  # the visitor may submit again at once
    first = _guarded_run("s3", "2+3", "tiny", *knobs.preset_values("sdar-config-a"))
    assert first == [{"run_status": guard.STOPPED_QUEUED, "run_ok": False,
                      "run_final": {"run_status": guard.STOPPED_QUEUED}}] and ran == []
    second = _guarded_run("s3", "2+3", "tiny", *knobs.preset_values("sdar-config-a"))
    assert second[0]["run_status"].startswith("Loading") and len(ran) == 1 and not guard.JOBS.running("s3")
    for _ in range(guard.MAX_WITHDRAWN):  # a visitor cannot fill the queue with stopped runs either
        assert guard.JOBS.admit("s3") is None
        guard.stop(_Request("s3"))
    assert guard.JOBS.admit("s3") == guard.LEAVING
    guard.on_unload(_Request("s3"))  # the tab closed: its queued events went with it
    assert guard.JOBS.admit("s3") is None and guard.JOBS.stop_session("s3")
    guard.on_unload(_Request("s3"))


def _pic(trace, stop, kind):
    """The value a stop draws for one picture kind (the tour's shared views)."""
    pic = next(p for p in stop.pictures if p.kind == kind)
    return pictures.picture(tour_stops.TourMaterial(trace), stop, pic)


def test_tour_stops_follow_the_story_in_order():
    t = tf.mixed()
    stops = tour.tour_stops(t)
    assert [s.key for s in stops] == ["draft", "route", "verify", "reject", "resample", "skip", "calibration",
                                      "cost", "run"]
    assert tour.numbered(stops)[:2] == ["1 · Draft", "2 · Span and routing"]
    focus = tour_stops.focus_step(t)
    v = focus.verification
    assert v.first_reject is not None and v.resampled is not None
    assert all(s.step == focus.index + 1 for s in stops[:5])
    skip = next(s for s in stops if s.key == "skip")
    assert t.steps[skip.step - 1].decision.verify is False
    # each picture is the moment its text describes: drafts before commit, the rejected column, the routing plot
    draft = _pic(t, stops[0], "canvas").split('class="s2d2-legend"')[0]
    assert "st-drafted" in draft and "st-resampled" not in draft and 'data-watch="1"' in draft
    assert 'class="first-reject' in _pic(t, stops[3], "strip")
    assert "st-resampled new" in _pic(t, stops[4], "canvas").split('class="s2d2-legend"')[0]
    assert stops[1].kinds == ("routing", "canvas") and stops[5].kinds[0] == "routing"  # the plot the words name first
    keys = [s.key for s in tour.tour_stops(tf.diffusion_only())]
    assert keys == ["draft", "run"]
    assert [s.key for s in tour.tour_stops(tf.all_accepted())] == ["draft", "route", "verify", "cost", "run"]


# -- traces recorded by the real engine (random tiny models): the views read what the decoder writes -------------

@pytest.mark.parametrize("family,preset_name,gen", [("aligned", "sdar-config-b", 12),
                                                     ("shifted", "fastdllm-config-c", 8), ("aligned", "ar", 4)])
@pytest.mark.slow
def test_views_on_engine_traces(family, preset_name, gen):
    from tests.support import tiny_models
    import s2d2

    model = tiny_models.tiny_qwen3(block_size=4) if family == "aligned" else tiny_models.tiny_qwen2()
    trace = s2d2.generate(model, list(range(10, 17)), preset(preset_name, gen_length=gen), seed=0).trace
    trace = Trace.from_json(trace.to_json())
    idx = canvas.index_of(trace)
    for s in range(len(trace.steps) + 1):
        out = step_views.render_step(trace, s)
        block = idx.answer_block(trace.steps[s - 1].block) if s else 0
        head = f"Step {s} of {len(trace.steps)} (answer block {block})"
        assert out["summary"].startswith("Start" if s == 0 else head)
        for which in attention_mask.WHICH:
            fig = attention_mask.mask_figure(trace, s, which)
            if fig.data:
                f = attention_mask.pick_forward(trace, s, which)
                assert len(fig.data[0].z) == f.input_len
    final = canvas.render_canvas(trace, len(trace.steps), show_future=True)
    committed = {c.position for st in trace.steps for c in st.commits}
    assert all(f'data-pos="{p}"' in final for p in committed) and set(idx.commit_of) == committed
    rows = {r[0]: r[1] for r in step_views.metrics_table(trace)}
    assert rows["forwards (NFE)"] == str(len(trace.forwards))
    skeleton = s2d2.generate(model, list(range(10, 17)), preset(preset_name, gen_length=gen), seed=0,
                             detailed=False).trace
    html = canvas.render_canvas(skeleton, len(skeleton.steps), show_future=True)
    assert "Skeleton trace" in html and 'data-pos="0"' in html and "#10" in html
    assert all(len(step_views.render_step(skeleton, s)) == len(step_views.STEP_VIEWS) for s in range(len(skeleton.steps) + 1))
    if preset_name == "sdar-config-b":  # always verifies: every step has a strip and an accepted-length
        assert len(figures.acceptance_lengths(trace)) == len(trace.steps)


@pytest.mark.slow
def test_precompute_script_writes_loadable_examples(tmp_path, monkeypatch):
    from tests.support import tiny_models
    import importlib

    import s2d2
    from tests.support.app_server import CharTokenizer

    import torch

    model = tiny_models.tiny_qwen3(dtype=torch.float32, block_size=4)
    model.tokenizer = CharTokenizer()
    monkeypatch.setattr(s2d2, "load_model", lambda name: model, raising=False)
    script = importlib.import_module("scripts.precompute_traces")
    assert script.main(["--gen-length", "4", "--out", str(tmp_path)]) == 0
    listed = examples.list_examples(tmp_path)
    pairs = [e for e in listed.values() if e.baseline is not None]
    assert list(listed)[0] == "Verifier catches a wrong digit" and pairs == [
        listed["Verifier catches a wrong digit"], listed["Pipeline · blocks in flight · D2F"]]
    tour_files = sorted(f.name for f in (tmp_path / "tour").glob("*.json"))  # the tour's material, not examples
    assert tour_files == ["lossless-ar.json", "lossless-s2d2.json"]
    assert len(listed) + len(pairs) + len(tour_files) == len(script.RUNS) and "Always verify · block 16" in listed
    assert "Self correction meets verification · LLaDA2" in listed  # recorded with its own model (here: the stub)
    for example in listed.values():
        trace, baseline = examples.load_pair(example)
        assert trace.header.provenance == "measured" and trace.steps
    trace, baseline = examples.load_pair(pairs[0])
    assert trace.header.prompt_ids == baseline.header.prompt_ids and trace.header.seed == baseline.header.seed
    assert baseline.header.config["method"] == "diffusion" and trace.header.config["method"] == "s2d2"
    monkeypatch.setattr(s2d2, "load_model", lambda name: (_ for _ in ()).throw(ValueError("no such model")),
                        raising=False)
    assert script.main(["--out", str(tmp_path / "none")]) == 1


def test_example_and_state_handlers():
    listed = examples.list_examples()
    if not listed:
        pytest.skip("no shipped example traces (run scripts/precompute_traces.py)")
    name = next(iter(listed))
    out = handlers.open_example(name)
    assert set(out) == set(handlers.LOAD_OUT) and out["load_status"] == f"Loaded example **{name}**."
    assert traces_io.trace_from_state(out["state"]).header.provenance == "measured"
    assert handlers.open_example("nope") == {"load_status": "Unknown example 'nope'."}
    shown = handlers.show_state(out["state"], True)
    assert shown["example"]["value"] is None and "Replay shows this session" in shown["example"]["label"] and shown["selected"] is None  # nothing stale after a run
    assert "data-pinned" not in shown["detail"]
    assert handlers.show_state(out["state"], False) == {}


def test_first_screen_pair_and_headline():
    """The shipped default: S2D2 catches the baseline's wrong digit; the headline is computed from both traces."""
    listed = examples.list_examples()
    pair = next((e for e in listed.values() if e.baseline is not None), None)
    if pair is None:
        pytest.skip("no shipped example pair")
    assert next(iter(listed.values())) == pair  # it opens the app
    trace, baseline = examples.load_pair(pair)
    story_ = story.pair_story(trace, baseline)
    gold = arithmetic.solve(story.question_of(trace))
    ours, theirs = (arithmetic.extract_answer(t.footer.output_text) for t in (trace, baseline))
    assert ours == gold != theirs
    assert f"answered **{theirs} ✗**" in story_.text and f"→ **{ours} ✓**" in story_.text
    rec = trace.steps[story_.step - 1]
    v = rec.verification
    assert v.first_reject is not None and f"at step {story_.step} and resampled `{v.resampled_text}`" in story_.text
    pos = v.positions[v.first_reject].position
    base_commit = canvas.index_of(baseline).commit_of[pos][1]
    assert base_commit.text == v.positions[v.first_reject].draft_text  # the baseline committed the rejected draft
    out = handlers.open_example(pair.label)
    assert out["headline"] == story_.text and out["slider"].value == story_.step and out["toggle"].visible
    taus = [t.header.config["confidence_threshold"] for t in (trace, baseline)]
    assert out["toggle"].info.startswith("Same question, seed and block length B.")
    if taus[0] != taus[1]:  # the pair's other difference is said where the reader switches runs
        assert (f"A draft commits unchecked at p > {taus[1]:g} in the diffusion run, p > {taus[0]:g} in S2D2's."
                in out["toggle"].info)
    assert "st-resampled new" in out["canvas"] and 'class="first-reject"' in out["strip"]
    base = handlers.open_example(pair.label, handlers.RUNS["baseline"])
    assert base["slider"].value == story_.baseline_step and base["headline"] == story_.text
    assert traces_io.trace_from_state(base["state"]).header.config["method"] == "diffusion"
    tour = handlers.open_tour_step(pair.label, 1)
    assert tour["slider"].value == 1 and tour["tabs"].selected == "replay"


def test_single_story_and_unknown_questions():
    line = story.single_story(tf.mixed()).text
    assert line.startswith("S2D2 answered") and "with a rejected draft" in line
    assert story.single_story(tf.diffusion_only()).text.startswith("Diffusion alone (never verifies)")
    assert first_difference([1, 2, 3], [1, 2, 3]) is None and first_difference([1, 2], [1, 3]) == 1


def test_app_structure_internal_handlers_are_private():
    import app

    cfg = app.demo.get_config_file()
    deps = {d.get("api_name"): d.get("api_visibility") for d in cfg["dependencies"]}
    for public in ("step", "open_example", "upload_trace", "run", "show_trace"):
        assert deps.get(public) == "public", public
    assert sum(v == "public" for v in deps.values()) == 7  # the five above + compare and load_sweep
    ids = {c.get("props", {}).get("elem_id") for c in cfg["components"]}
    assert {"canvas", "strip", "routing", "mask", "summary", "step-slider", "run", "stop", "tour", "headline",
            "run-toggle", "color-by", "advanced"} <= ids
    assert [label for label, _, _ in app.TABS] == ["Replay", "Learn", "Run", "Metrics & about", "Compare", "Sweep"]


def test_find_catch_finds_the_shipped_pair():
    """scripts/find_catch.py's criteria hold for the question the app opens with (held-out 8, seed 8)."""
    if not (Path(__file__).resolve().parents[2] / "assets" / "tiny").exists():
        pytest.skip("assets/tiny (the bundled model) is not trained yet")
    import importlib

    import s2d2

    script = importlib.import_module("scripts.find_catch")
    hit = script.check(8, arithmetic.heldout(9)[8], s2d2.load_model("tiny"), 16, 64)
    assert hit is not None and hit.strong and (hit.baseline_answer, hit.s2d2_answer, hit.gold) == (53, 63, 63)
    assert (hit.rejected, hit.resampled, hit.step) == ("2", "3", 2)


# -- LLaDA2.x self-correction: the example, the tour stop, the Run panel on a model that edits ---------------------

LLADA2_EXAMPLE = "Editing fixes a wrong digit · LLaDA2"


def test_llada2_example_loads_through_the_validator_and_shows_its_edit():
    listed = examples.list_examples()
    if LLADA2_EXAMPLE not in listed:
        pytest.skip("no shipped LLaDA2 example trace")
    trace, partner = examples.load_pair(listed[LLADA2_EXAMPLE])  # parsed and checked like an upload
    assert partner is None and trace.header.config["loop"] == "editing" and trace.header.model.name == "tiny-llada2"
    edit_step = next(s for s in trace.steps if s.edits)
    e = edit_step.edits[0]
    out = handlers.open_example(LLADA2_EXAMPLE)
    assert out["slider"].value == edit_step.index + 1  # it opens on the moment of the edit
    assert (f"corrected itself at step {edit_step.index + 1}, editing `{e.old_text}` → `{e.new_text}`"
            in out["headline"]) and "answered **38 ✓**" in out["headline"]
    assert 'class="tok st-edited new"' in out["canvas"] and f"<s>{e.old_text}</s> {e.new_text}" in out["canvas"]
    assert "edited (self-correction)" in out["legend"]
    assert f"1 edited ('{e.old_text}' → '{e.new_text}')" in out["summary"]
    assert "no masks left" in step_views.step_summary(trace, edit_step.index + 1)  # a post step: nothing to route
    rows = {r[0]: r[1] for r in out["metrics"]}
    assert rows["edits (self-correction)"] == "1"
    assert "editing τ_edit=0.5" in out["title"]
    # the tour: a self-correction stop, numbered by position, its canvas the moment of the edit with it ringed
    m = tour.load_material(trace)
    stops = tour.tour_stops(m)
    assert [s.key for s in stops] == ["draft", "edit", "run"]
    assert tour.numbered(stops)[1] == "2 · Self-correction" and stops[1].step == edit_step.index + 1
    assert f"`{e.old_text}`" in stops[1].text and f"p = {e.p:.3f} > τ_edit = 0.5" in stops[1].text
    pic = pictures.picture(m, stops[1], stops[1].pictures[0]).split('class="s2d2-legend"')[0]
    assert f'data-pos="{e.position}" data-watch="1"' in pic and "st-edited new" in pic
    # only traces that edit have the stop
    assert "edit" not in [s.key for s in tour.tour_stops(tf.mixed())]


def test_run_panel_on_a_model_that_edits_shows_the_editing_knobs():
    from components.views import describe
    from components.run import knob_scope

    out = run_handlers.model_changed("tiny-llada2", "block", 3)  # a LLaDA2 model opens on S2D2 with editing
    assert out["preset"] == knobs.FAMILY_PRESETS["llada2"] == "llada2-quality"
    assert out["knob_loop"]["value"] == "editing" and out["knob_editing_threshold"]["value"] == 0.5
    assert out["knob_seed"]["value"] == 3 and "llada2-quality" in out["preset_note"]
    visible = {k for k in knobs.KNOB_NAMES if out[f"knob_{k}"]["visible"]}
    assert {"loop", "editing_threshold", "max_post_steps"} <= visible
    assert not visible & {"kv_reuse", "fused_commit", "adaptive_block", "sub_block_length"}  # refused by the loop
    assert sum(knob_scope.is_main(k) for k in visible) <= knob_scope.MAX_MAIN
    assert knob_scope.is_main("editing_threshold") and not knob_scope.is_main("max_post_steps")
    assert run_handlers.model_changed("tiny-llada2", "editing") == {}  # already on the editing loop: knobs kept
    assert run_handlers.model_changed("tiny", "editing")["preset"] == knobs.DEFAULT_PRESET
    assert run_handlers.model_changed("tiny", "block") == {} and run_handlers.model_changed("/a/folder", "block") == {}
    hidden = run_handlers.knob_visibility("s2d2", "score_threshold", "low_confidence_dynamic", "block")
    assert not hidden["knob_editing_threshold"]["visible"] and hidden["knob_loop"]["visible"]
    # the UI's values make the preset's config; τ_edit 0 means editing off
    values = dict(zip(knobs.KNOB_NAMES, knobs.preset_values("llada2-quality")))
    cfg, _, error = config_check.config_from_inputs(*values.values())
    assert error is None and (cfg.loop, cfg.editing_threshold, cfg.block_length) == ("editing", 0.5, 32)
    cfg, _, _ = config_check.config_from_inputs(*{**values, "editing_threshold": 0}.values())
    assert cfg.editing_threshold is None
    message = config_check.config_from_inputs(*{**values, "kv_reuse": True, "cache_ver": True,
                                             "draft_ver": True}.values())[2]
    assert message.startswith("Invalid setting — kv_reuse: not available with loop='editing'")
    assert describe.plain_title(preset("llada2-dynamic-edit")) == (
        "Diffusion alone (commit drafts with p > 0.7), block 32, edits at p > 0.5")
    post = {"gen_length": 256, "block_length": 4, "max_post_steps": 4}  # mask-free steps are forwards too
    assert zerogpu.gpu_duration("", "JetLM/SDAR-1.7B-Chat", post) > \
        zerogpu.gpu_duration("", "JetLM/SDAR-1.7B-Chat", {**post, "max_post_steps": 0})


def test_live_output_shows_edits():
    trace = Trace.from_json(examples.list_examples()[LLADA2_EXAMPLE].path.read_text()) \
        if LLADA2_EXAMPLE in examples.list_examples() else None
    if trace is None:
        pytest.skip("no shipped LLaDA2 example trace")
    e = next(e for s in trace.steps for e in s.edits)
    rows = {r[0]: r for r in canvas.live_rows(trace.steps)}
    assert rows[e.position] == [e.position, e.new_text, "edited", e.new]
    assert len(rows) == sum(len(s.commits) for s in trace.steps)  # one row per position
    html = canvas.render_live(list(rows.values()), stop_ids=trace.header.model.stop_ids)
    assert f'class="tok st-edited" data-pos="{e.position}"' in html



def test_a_shared_run_withdrawn_from_the_batch_queue_says_nothing_ran(monkeypatch):
    """record's "stopped" event (components/run/shared_batch.py: Stop while the Run waited for a place in the shared
    batch) is the Run's last line: nothing ran, no trace, and the session's slot is free for its next Run."""
    from components.serve import gpu_slot as guard

    def queued_then_withdrawn(prompt, model_name, config, seed=0):
        yield {"kind": "progress", "steps": 0, "commits": [], "elapsed": 0.1, "queued": 2}
        guard.stop(_Request("s5"))
        yield {"kind": "stopped", "message": guard.STOPPED_QUEUED}

    monkeypatch.setattr(run_handlers, "record", queued_then_withdrawn)
    outs = _guarded_run("s5", "2+3", "tiny", *knobs.preset_values("sdar-config-a"))
    assert "position 2" in outs[1]["run_status"]
    assert outs[-1]["run_status"] == guard.STOPPED_QUEUED and outs[-1]["run_ok"] is False
    assert "state" not in outs[-1] and not guard.JOBS.running("s5") and not guard.JOBS.holds("s5")


def test_a_preset_sets_the_knobs_once_per_pick():
    """Gradio's dropdown sends `input` twice for one pick (on the pick, then on the blur that follows it) and on any
    blur: wired to input, the second setting of every knob, landing late on a busy server, undid a knob typed since
    (a CI flake: the page's Run and the server's disagreed on the temperature). The preset is wired to `change`,
    sent once per new value (`select` would miss a pick made with the keyboard)."""
    import app

    cfg = app.demo.get_config_file()
    (preset,) = [c["id"] for c in cfg["components"] if c.get("props", {}).get("elem_id") == "preset"]
    knob = next(c["id"] for c in cfg["components"] if c.get("props", {}).get("elem_id") == "knob-temperature")
    setters = [d for d in cfg["dependencies"] if knob in d["outputs"] and any(t[0] == preset for t in d["targets"])]
    assert [tuple(t) for d in setters for t in d["targets"]] == [(preset, "change")]
