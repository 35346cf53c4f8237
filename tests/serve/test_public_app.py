"""The app's public-Space guards, unit by unit (issue 8): model allow-list and LRU, one job per session, stop
within one forward, time caps for Run and Compare, bounded exports, and the CLI's one-line errors."""
from __future__ import annotations

import contextvars
import threading
import time
from pathlib import Path

import pytest

from components.compare import lanes as cc
from components.serve import gpu_slot
from components.serve import model_pool
from components.run import config_check
from components.run import knobs
from components.run import workers
from components.run import zerogpu
from components.serve import model_pool
from components.files import traces
from s2d2.config import preset
from s2d2.limits import SEED_MAX
from s2d2.trace import Trace


def _slow(seconds: float = 0.02):
    """The tiny model with a tokenizer, each forward `seconds` long and counted."""
    from tests.support.lanes import tiny_with_tokenizer

    model = tiny_with_tokenizer()
    model.calls = 0
    fast = model.forward

    def forward(*args, **kwargs):
        model.calls += 1
        time.sleep(seconds)
        return fast(*args, **kwargs)

    model.forward = forward
    return model


# -- models ------------------------------------------------------------------------------------------------------

def _defaults(monkeypatch, free_gb: float, gpu: bool, loaded: int) -> list[str]:
    monkeypatch.delenv("S2D2_MODELS", raising=False)
    monkeypatch.setenv("S2D2_MAX_LOADED_MODELS", str(loaded))
    monkeypatch.setattr(model_pool, "free_memory_gb", lambda: free_gb)
    monkeypatch.setattr(model_pool, "on_gpu", lambda: gpu)
    monkeypatch.setattr(model_pool, "fetchable", lambda *repos: True)  # as online (tests run offline)
    model_pool.default_models.cache_clear()
    try:
        return model_pool.allowed_models()
    finally:
        model_pool.default_models.cache_clear()


def test_default_allow_list_fits_memory_and_never_offers_the_30b(monkeypatch):
    """Issue 19 row 1: the dtype the loader uses (float32 on the CPU), the headroom and S2D2_MAX_LOADED_MODELS models
    at once all count: a 24 GiB CPU machine is offered no 4B, 7B or 8B checkpoint."""
    cpu = _defaults(monkeypatch, 22.0, gpu=False, loaded=2)
    assert cpu[0] == "tiny" and "JetLM/SDAR-1.7B-Chat" in cpu and "Efficient-Large-Model/Fast_dLLM_v2_1.5B" in cpu
    assert not any(size in name for name in cpu for size in ("SDAR-4B", "SDAR-8B", "v2_7B", "30B")), cpu
    if (Path(__file__).resolve().parents[2] / "assets" / "tiny-llada2").is_dir():
        assert cpu[1] == "tiny-llada2"  # the bundled models come first, the LLaDA2 one included
    gpu = _defaults(monkeypatch, 48.0, gpu=True, loaded=2)  # ZeroGPU's large slice: two 8B in bf16 fit
    assert "JetLM/SDAR-8B-Chat" in gpu and "Efficient-Large-Model/Fast_dLLM_v2_7B" in gpu
    assert "inclusionAI/LLaDA2.1-mini" not in gpu and "JetLM/SDAR-30B-A3B-Chat" not in gpu  # never by default
    assert "JetLM/SDAR-8B-Chat" not in _defaults(monkeypatch, 30.0, gpu=True, loaded=2)  # two of them do not fit
    assert "JetLM/SDAR-8B-Chat" in _defaults(monkeypatch, 30.0, gpu=True, loaded=1)
    assert [n for n in _defaults(monkeypatch, 4.0, gpu=False, loaded=2) if "/" in n] == []  # bundled only
    assert model_pool.fitting({"a": 5, "b": 6, "c": 7}, 13, 2) == ["a", "b", "c"]  # the two largest: 6 + 7
    assert model_pool.fitting({"a": 5, "b": 6, "c": 7}, 12, 2) == ["a", "b"]
    assert "not offered on this server (about 61 GB" in model_pool.check_model("JetLM/SDAR-30B-A3B-Chat")
    monkeypatch.setenv("S2D2_MODELS", "tiny, JetLM/SDAR-8B-Chat")
    assert model_pool.model_choices() == ["tiny", "JetLM/SDAR-8B-Chat"] and model_pool.check_model("JetLM/SDAR-8B-Chat") is None
    assert model_pool.check_model("JetLM/SDAR-1.7B-Chat").startswith("Model 'JetLM/SDAR-1.7B-Chat' is not offered")
    assert model_pool.check_model("/etc").startswith("Unknown model '/etc'")


def test_offline_the_list_offers_only_what_can_load_here(monkeypatch, tmp_path):
    """Offline (HF_HUB_OFFLINE, as on a laptop without network), a Hub checkpoint is offered only when the local
    cache holds it: a choice that can only fail to download is not a choice. Online, every fitting one is."""
    from s2d2.models import hub

    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))  # an empty cache
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert not hub.can_fetch("JetLM/SDAR-1.7B-Chat") and not model_pool.fetchable("tiny-repo", None)
    snap = tmp_path / "models--JetLM--SDAR-1.7B-Chat"
    (snap / "snapshots" / "abc").mkdir(parents=True)
    (snap / "refs").mkdir()
    (snap / "refs" / "main").write_text("abc")
    (snap / "snapshots" / "abc" / "config.json").write_text("{}")
    assert hub.can_fetch("JetLM/SDAR-1.7B-Chat") and not hub.can_fetch("Efficient-Large-Model/Fast_dLLM_v2_1.5B")
    monkeypatch.delenv("S2D2_MODELS", raising=False)
    monkeypatch.setenv("S2D2_MAX_LOADED_MODELS", "2")
    monkeypatch.setattr(model_pool, "free_memory_gb", lambda: 22.0)
    monkeypatch.setattr(model_pool, "on_gpu", lambda: False)
    model_pool.default_models.cache_clear()
    try:
        offline = model_pool.allowed_models()
        assert offline[0] == "tiny" and "JetLM/SDAR-1.7B-Chat" in offline
        assert not any("Fast_dLLM" in n for n in offline), offline
        for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", False)
        assert hub.can_fetch("Efficient-Large-Model/Fast_dLLM_v2_1.5B")  # online: a download may be tried
    finally:
        model_pool.default_models.cache_clear()


def test_refused_models_never_load_and_the_least_recently_used_is_evicted(monkeypatch):
    import s2d2

    loads = []
    monkeypatch.setattr(s2d2, "load_model", lambda name: loads.append(name) or f"model:{name}")
    monkeypatch.setenv("S2D2_MODELS", "m-a,m-b,m-c")
    monkeypatch.setenv("S2D2_MAX_LOADED_MODELS", "2")
    saved = {name: model_pool.get_model(name) for name in model_pool.loaded_models()}
    for name in saved:
        model_pool.forget_model(name)
    try:
        with pytest.raises(ValueError, match="not offered"):
            model_pool.get_model("JetLM/SDAR-30B-A3B-Chat")
        assert loads == []  # refused before any download
        for name in ["m-a", "m-b", "m-a", "m-c"]:
            assert model_pool.get_model(name) == f"model:{name}"
        assert loads == ["m-a", "m-b", "m-c"] and model_pool.loaded_models() == ["m-a", "m-c"]  # m-b was least recent
    finally:
        for name in model_pool.loaded_models():
            model_pool.forget_model(name)
        monkeypatch.setenv("S2D2_MAX_LOADED_MODELS", "8")
        for name, model in saved.items():
            model_pool.register_model(name, model)


# -- one job per session -----------------------------------------------------------------------------------------

def test_one_job_per_session_and_stop():
    jobs = gpu_slot.Jobs()
    assert jobs.admit("s1") is None and jobs.admit("s1") == gpu_slot.BUSY and jobs.admit("s2") is None
    job = jobs.claim("s1")
    assert job is not None and jobs.claim("s1") is None  # already running
    assert jobs.stop_session("s1") and jobs.cancelled(job.id)
    assert jobs.admit("s1") == gpu_slot.BUSY  # still running until its handler returns
    jobs.finish(job)
    assert jobs.admit("s1") is None and jobs.stop_session("s1") and jobs.admit("s1") is None  # queued: withdrawn
    withdrawn = jobs.claim("s1")  # the withdrawn event's turn comes first (queue order): it must not run
    assert withdrawn is not None and withdrawn.stop.is_set() and jobs.running("s1") is False
    jobs.finish(withdrawn)
    job = jobs.claim("s1")
    assert job is not None and not job.stop.is_set() and jobs.running("s1")


def test_guarded_generator_sees_its_job_in_every_fresh_context():
    """Gradio resumes a generator from a fresh worker context each time; the job id must be there every time."""
    class Request:
        session_hash = "ctx-session"

    def handler(n):
        for _ in range(n):
            yield gpu_slot.current_job()

    gen = gpu_slot.one_job(handler, lambda msg: msg)(Request(), 3)
    seen = [contextvars.Context().run(next, gen) for _ in range(3)]
    assert len(set(seen)) == 1 and seen[0] and gpu_slot.JOBS.active() == 1
    with pytest.raises(StopIteration):
        next(gen)
    assert gpu_slot.JOBS.active() == 0
    busy = gpu_slot.one_job(handler, lambda msg: msg)
    gpu_slot.JOBS.admit("ctx-session")
    gpu_slot.JOBS.claim("ctx-session")
    assert list(busy(Request(), 1)) == [gpu_slot.BUSY]
    gpu_slot.JOBS.stop_session("ctx-session")


# -- stopping and time caps ----------------------------------------------------------------------------------------

def test_a_cancelled_run_stops_within_one_forward_and_keeps_its_trace():
    from s2d2.api import generate

    model = _slow(0.01)
    stop = threading.Event()
    events = workers.record_stream([10, 11, 12], "m", preset("dynamic-baseline", gen_length=256).to_dict(), 0,
                                     generate, lambda name: model, min_interval=0, cancel=stop.is_set)
    first = next(events)
    assert first["kind"] == "progress"
    stop.set()
    at_stop = model.calls
    rest = list(events)
    assert rest[-1]["kind"] == "done" and model.calls - at_stop <= 1
    trace = Trace.from_dict(rest[-1]["trace"])  # the partial trace: every block completed before the stop
    assert trace.footer.finish_reason == "cancelled" and trace.blocks  # progress comes after a whole block
    assert len(trace.forwards) <= at_stop + 1 and trace.replay() == trace.footer.output_ids


def test_runs_and_lanes_end_at_the_time_limit(monkeypatch):
    from s2d2.api import generate

    monkeypatch.setenv("S2D2_MAX_RUN_SECONDS", "0.5")
    model = _slow(0.02)
    events = list(workers.record_stream([10, 11, 12], "m", preset("dynamic-baseline", gen_length=256).to_dict(), 0,
                                          generate, lambda name: model))
    done = events[-1]
    assert done["kind"] == "done" and done["trace"]["footer"]["finish_reason"] == "time_limit"
    model_pool.register_model("test-slow-lanes", model)
    try:
        configs = {n: preset(n, gen_length=256).to_dict() for n in ("dynamic-baseline", "sdar-config-a")}
        out = list(zerogpu.record_lanes([10, 11, 12], "test-slow-lanes", configs, 0))
    finally:
        model_pool.forget_model("test-slow-lanes")
    assert out[-1]["kind"] == "error" and out[-1]["message"].startswith("Time limit: the lanes together may run 0.5 s")


def test_stopped_lanes_end_within_one_forward_and_compare_nothing():
    """Compare's Stop is the same job flag: the lane in flight ends within one forward, later lanes never start."""
    model = _slow(0.01)
    configs = {n: preset(n, gen_length=256).to_dict() for n in ("dynamic-baseline", "sdar-config-a")}
    at_stop = []

    def stop_soon():
        deadline = time.monotonic() + 120  # a bound on a hang only
        while model.calls < 3 and time.monotonic() < deadline:
            time.sleep(0.002)
        gpu_slot.JOBS.stop_session("lanes-session")  # what the Stop button does
        at_stop.append(model.calls)  # read after the flag: a starved watcher cannot let forwards slip in between

    class Request:
        session_hash = "lanes-session"

    model_pool.register_model("test-slow-stop", model)
    watcher = threading.Thread(target=stop_soon)
    watcher.start()
    try:
        lanes = gpu_slot.one_job(lambda: list(zerogpu.record_lanes([10, 11, 12], "test-slow-stop", configs, 0)),
                              lambda msg: msg)
        out = lanes(Request())
    finally:
        watcher.join()
        model_pool.forget_model("test-slow-stop")
    assert out[-1] == {"kind": "stopped", "message": "Stopped during lane dynamic-baseline (lanes finished before: "
                                                     "none)."}
    assert model.calls - at_stop[0] <= 1 and not gpu_slot.JOBS.running("lanes-session")


def test_compare_obeys_the_run_caps(monkeypatch):
    lanes = ["ar", "sdar-config-a", cc.OFF, cc.OFF, "", "", "", ""]
    status, state = cc.run_compare("x" * 3000, "tiny", 0, 8, *lanes)
    assert state is None and status == ("⚠ The prompt is longer than 2,000 characters, the most a run takes (the line "
                                        "under the box gives its length). Nothing was cut: shorten it.")
    status, _ = cc.run_compare("2+3", "tiny", 10**249, 8, *lanes)  # 250 digits, counted exactly
    assert status == f"⚠ seed: must be in [0, {SEED_MAX}], got a 250-digit number"
    status, _ = cc.run_compare("2+3", "tiny", 1e99, 8, *lanes)  # the Number box's float, said as typed
    assert status == f"⚠ seed: must be in [0, {SEED_MAX}], got 1e+99"
    status, _ = cc.run_compare("2+3", "tiny", 0, 100_000, *lanes)
    assert status.startswith("⚠ Generation length: 8 to 256, got 100000")  # refused, never clamped
    status, _ = cc.run_compare("2+3", "tiny", 0, 8, "ar", "sdar-config-a", cc.OFF, cc.OFF, "", "block_length=128",
                               "", "")
    assert status == "⚠ lane 2: block_length: at most 64 (S2D2_MAX_BLOCK_LENGTH), got 128"


def test_run_settings_within_limits():
    values = dict(zip(knobs.KNOB_NAMES, knobs.preset_values("sdar-config-a")))
    for seed, shown in ((-1, "-1"), (10**249, "-digit number"), (float("inf"), None)):
        cfg, _, err = config_check.config_from_inputs(*dict(values, seed=seed).values())
        assert cfg is None and err.startswith("Invalid setting — ") and (shown is None or shown in err), err
    _, _, err = config_check.config_from_inputs(*dict(values, block_length=65).values())
    assert err == "Invalid setting — block_length: at most 64 (S2D2_MAX_BLOCK_LENGTH), got 65"


# -- temp files ----------------------------------------------------------------------------------------------------

def test_exports_share_one_bounded_folder(monkeypatch, tmp_path):
    from fixtures import trace_factory as tf

    monkeypatch.setenv("S2D2_EXPORT_DIR", str(tmp_path / "exports"))
    paths = {traces.export_path(tf.mixed()) for _ in range(5)}
    assert len(paths) == 1 and len(list((tmp_path / "exports").iterdir())) == 1
    for name in tf.SCENARIOS:
        traces.export_path(tf.SCENARIOS[name]())
    assert traces.prune_exports(tmp_path / "exports", keep=3) > 0
    assert len(list((tmp_path / "exports").iterdir())) == 3
    assert traces.prune_exports(tmp_path / "exports", max_age=-1) == 3


# -- CLI -----------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("args, message", [
    (["--seed", "-1"], "error: --seed: must be in [0, 2147483647], got -1"),
    (["--seed", "9" * 250], "error: --seed: must be in [0, 2147483647], got a 250-digit number"),
    (["--seed", "x"], "error: python -m s2d2 generate: argument --seed: invalid int value: 'x' (see --help)"),
    (["--trace", "."], "error: --trace: cannot write a file at '.'"),
    (["--trace", "/no/such/folder/t.json"], "error: --trace: cannot write a file at '/no/such/folder/t.json'"),
    (["--set", "gen_length=600"], "error: --preset/--set: gen_length: at most 512 tokens (S2D2_MAX_GEN_TOKENS)"),
    (["--prompt", "x" * 2001], "error: --prompt: 2001 characters; at most 2000 (S2D2_MAX_PROMPT_CHARS)"),
    (["--device", "warp-drive"], "error: --device: 'warp-drive' is not a device"),
])
def test_cli_bad_arguments_are_one_line_and_exit_2(capsys, args, message):
    from s2d2.__main__ import main

    argv = ["generate", "--model", "/nonexistent", "--prompt", "hi", *args]
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own errors
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2 and err.startswith(message) and err.count("\n") == 1, err
