"""The launched app driven through gradio_client: runs, download -> upload -> replay, 8 sessions, bad uploads.

Runs use a seeded random tiny Qwen3 with a character tokenizer (always available), and the bundled model when
assets/tiny exists.
"""
from __future__ import annotations

import json
import os
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent.parent
ROOT = HERE.parent
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from fixtures import trace_factory as tf

gradio_client = pytest.importorskip("gradio_client")
from gradio_client import Client, handle_file  # noqa: E402

from components.replay.handlers import STEP_OUT  # noqa: E402

from tests.support.app_server import RANDOM_MODEL, SLOW_MODEL, served  # noqa: E402,F401  (the fixture)

SESSION_SCENARIOS = ["all_accepted", "reject_at_zero", "residual_fallback_to_q", "mixed", "hysteresis_flip",
                     "ucb_first_visit", "diffusion_only", "greedy_exact"]

pytestmark = pytest.mark.slow  # launches the app and drives it through gradio_client


def knob_values(preset: str = "sdar-config-b", **changes):
    from components.run.knobs import KNOB_NAMES, preset_values

    values = dict(zip(KNOB_NAMES, preset_values(preset)))
    values.update(changes)
    return list(values.values())


def test_api_surface(served):
    _, url = served
    client = Client(url, verbose=False)
    names = set(client.view_api(print_info=False, return_format="dict")["named_endpoints"])
    assert {"/run", "/step", "/upload_trace", "/open_example", "/show_trace"} <= names
    assert not any(n.startswith(("/lambda", "/tick", "/toggle_play", "/set_speed", "/apply_preset")) for n in names)
    client.close()


def api_values(values, names) -> dict:
    """An endpoint's outputs by component name (gradio_client leaves out states and layout blocks)."""
    shown = [n for n in names if n not in ("state", "selected", "tabs")]
    assert len(values) == len(shown)
    return dict(zip(shown, values))


def _run_and_replay(url: str, model: str, tmp_path: Path) -> None:
    from components.replay.handlers import LOAD_OUT, STEP_OUT

    client = Client(url, verbose=False)
    status, live, text = client.predict("2+3=", model, *knob_values("sdar-config-b", gen_length=16, block_length=4),
                                        api_name="/run")
    assert status.startswith("✓ Done"), status
    assert "data-pos" in live
    shown = api_values(client.predict(api_name="/show_trace"), ["tabs", *LOAD_OUT])
    title, summary, download = shown["title"], shown["summary"], shown["download"]
    # opened at the moment the headline names (its first rejection), or at the start when there is none
    assert "measured trace" in title and re.match(r"Start: a prompt of \d+ tokens|Step \d+ of \d+", summary)
    data = json.loads(Path(download).read_text())
    assert data["header"]["provenance"] == "measured" and data["header"]["config"]["gen_length"] == 16
    step = api_values(client.predict(1, "auto", "state", api_name="/step"), STEP_OUT)
    canvas, strip_html, routing, summary = step["canvas"], step["strip"], step["routing"], step["summary"]
    assert re.match(r"Step 1 of \d+ \(answer block 1\): verify ON", summary) and "verifier" in strip_html
    assert routing["type"] == "plotly" and "bdata" not in routing["plot"]
    # download -> upload -> replay in a fresh session gives the same step view
    other = Client(url, verbose=False)
    up = other.predict(handle_file(download), api_name="/upload_trace")
    assert up[0] == "Loaded the uploaded trace."
    assert other.predict(1, "auto", "state", api_name="/step")[0] == canvas
    client.close()
    other.close()


def test_full_run_random_model_then_download_upload_replay(served, tmp_path):
    _run_and_replay(served[1], RANDOM_MODEL, tmp_path)


def test_full_run_bundled_model(served, tmp_path):
    if not (ROOT / "assets" / "tiny").exists():
        pytest.skip("assets/tiny (the bundled model) is not trained yet")
    _run_and_replay(served[1], "tiny", tmp_path)


def test_run_rejects_bad_input_with_messages(served):
    client = Client(served[1], verbose=False)
    out = client.predict("", RANDOM_MODEL, *knob_values(), api_name="/run")
    assert out[0].startswith("⚠ Type a prompt")
    out = client.predict("hi", RANDOM_MODEL, *knob_values(policy="score_hysteresis", hysteresis_on=-2.0,
                                                          hysteresis_off=1.0), api_name="/run")
    assert out[0].startswith("⚠ Invalid setting — hysteresis_off")
    out = client.predict("hi", "no/such-model", *knob_values(gen_length=8), api_name="/run")
    assert out[0].startswith("⚠ Unknown model 'no/such-model'")
    out = client.predict("hi", "JetLM/SDAR-1.7B-Chat", *knob_values(gen_length=8), api_name="/run")
    assert out[0].startswith("⚠ Could not load model 'JetLM/SDAR-1.7B-Chat'")
    client.close()


def _session(url: str, name: str, tmp: Path) -> tuple[str, str, str]:
    path = tmp / f"{name}.json"
    path.write_text(tf.SCENARIOS[name]().to_json())
    visitor = f"10.0.8.{SESSION_SCENARIOS.index(name) + 1}"  # eight visitors, each from its own address
    client = Client(url, verbose=False, headers={"X-Forwarded-For": visitor})
    try:
        assert client.predict(handle_file(str(path)), api_name="/upload_trace")[0] == "Loaded the uploaded trace."
        views = [client.predict(s, "auto", "state", api_name="/step") for s in (1, 0, 1)]
        return name, views[0][STEP_OUT.index("canvas")], views[2][STEP_OUT.index("summary")]
    finally:
        client.close()


def test_eight_concurrent_sessions_keep_their_own_trace(served, tmp_path, monkeypatch):
    # About which trace each session sees, not fairness: API clients with no page open share one member of their
    # address's unit by design (components/serve/roster.py), so on a loaded machine their fair CPU part could
    # refuse a step; the fair-share tests (tests/serve/test_fair_share.py) cover that rule.
    monkeypatch.setenv("S2D2_CPU_SHARE", "64")
    from components.views.canvas import render_canvas
    from components.views.step_views import step_summary

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda n: _session(served[1], n, tmp_path), SESSION_SCENARIOS))
    for name, canvas_html, summary in results:
        trace = tf.SCENARIOS[name]()
        assert canvas_html == render_canvas(trace, 1), name
        assert summary == step_summary(trace, 1), name


@pytest.mark.parametrize("kind", ["version", "types", "hostile", "not_json", "oversize"])
def test_malformed_uploads_are_rejected(served, tmp_path, kind):
    data = tf.mixed().to_dict()
    path = tmp_path / f"{kind}.json"
    if kind == "version":
        data["header"]["schema_version"] = 2
    elif kind == "types":
        data["steps"][0]["span"] = "everything"
    elif kind == "hostile":
        data["steps"][0]["commits"][0]["how"] = "<img src=x onerror=alert(1)>"
    if kind == "not_json":
        path.write_bytes(b"\x80\x04K\x01.")  # a pickle: never unpickled
    elif kind == "oversize":
        path.write_bytes(b" " * (5 * 1024 * 1024 + 10))
    else:
        path.write_text(json.dumps(data))
    client = Client(served[1], verbose=False)
    try:
        out = client.predict(handle_file(str(path)), api_name="/upload_trace")
        assert out[0].startswith("⚠"), out[0]
        assert "<img" not in out[0] or kind == "hostile"
    except Exception as exc:  # the server's upload size limit refuses the file before the handler
        assert kind == "oversize" and ("large" in str(exc).lower() or "size" in str(exc).lower()), exc
    finally:
        client.close()


def test_cancel_stops_the_decode_thread(served):
    import threading
    import time

    def running() -> bool:
        return any(t.name == "s2d2-record" for t in threading.enumerate())

    client = Client(served[1], verbose=False)
    job = client.submit("Once", SLOW_MODEL, *knob_values("dynamic-baseline", gen_length=480, block_length=4),
                        api_name="/run")
    deadline = time.time() + 60
    while time.time() < deadline and not any(str(o[0]).startswith("Decoding") for o in job.outputs()):
        time.sleep(0.05)
    assert running(), f"the run is not decoding: {[o[0] for o in job.outputs()]}"
    job.cancel()
    deadline = time.time() + 60  # a bound on a hang only: Stop ends the decode within one forward
    while time.time() < deadline and running():
        time.sleep(0.2)
    assert not running(), "the decode kept running after Stop"
    assert not any(str(o[0]).startswith("✓") for o in job.outputs())
    client.close()


# -- a public Space (issue 8): fair queue, cancellation on disconnect, allow-list, capped Compare, bounded files ----

def _decoding() -> bool:
    import threading

    return any(t.name == "s2d2-record" for t in threading.enumerate())


def _wait(condition, seconds: float = 60) -> bool:
    import time

    deadline = time.time() + seconds
    while time.time() < deadline and not condition():
        time.sleep(0.05)
    return condition()


def test_one_job_per_session_and_a_closed_client_stops_its_decode(served):
    """Rows 4 and 6: a second submission from a session is refused before it enters the queue, and closing the
    client (its heartbeat and event stream) stops the running decode."""
    from components.serve import gpu_slot

    client = Client(served[1], verbose=False)
    client.submit("Once", SLOW_MODEL, *knob_values("dynamic-baseline", gen_length=480, block_length=4),
                  api_name="/run")
    assert _wait(_decoding), "the first run never started"
    for _ in range(5):
        with pytest.raises(Exception, match="already have a run in progress"):
            client.predict("Twice", RANDOM_MODEL, *knob_values(gen_length=8), api_name="/run")
    assert gpu_slot.JOBS.active() == 1
    client.close()
    assert _wait(lambda: not _decoding(), 60), "the decode kept running after its client left"
    assert _wait(lambda: gpu_slot.JOBS.active() == 0, 60)


def test_closing_the_event_stream_stops_the_decode(served):
    """Row 6 on raw HTTP (no heartbeat): join the queue, read the stream until the run is decoding, hang up."""
    import httpx

    url = served[1].rstrip("/")
    deps = httpx.get(url + "/config").json()["dependencies"]
    fn = next(d["id"] for d in deps if d.get("api_name") == "run")
    body = {"data": ["Once", SLOW_MODEL, *knob_values("dynamic-baseline", gen_length=480, block_length=4)],
            "fn_index": fn, "session_hash": "raw-http-session", "event_data": None, "trigger_id": None}
    assert httpx.post(url + "/gradio_api/queue/join", json=body).status_code == 200
    with httpx.Client(timeout=60) as http, http.stream(
            "GET", url + "/gradio_api/queue/data?session_hash=raw-http-session") as stream:
        for line in stream.iter_lines():
            if line.startswith("data:") and json.loads(line[5:]).get("msg") == "process_generating" and _decoding():
                break
    assert _wait(lambda: not _decoding(), 60), "the decode kept running after its stream closed"


def test_stop_keeps_the_partial_trace_and_opens_it(served):
    """The Stop button's path end to end: the job's flag ends the decode within one forward, the run itself writes
    "Stopped — partial trace kept", and the session's trace is that partial run."""
    from components.serve import gpu_slot
    from components.replay.handlers import LOAD_OUT

    client = Client(served[1], verbose=False)
    job = client.submit("Once", SLOW_MODEL, *knob_values("dynamic-baseline", gen_length=480, block_length=4),
                        api_name="/run")
    assert _wait(lambda: any(str(o[0]).startswith("Decoding") for o in job.outputs())), "the run never decoded"
    gpu_slot.JOBS.stop_session(client.session_hash)  # what the Stop button does
    status = job.result(timeout=120)[0]
    assert status.startswith("■ Stopped — partial trace kept ("), status
    assert _wait(lambda: not _decoding(), 60) and not gpu_slot.JOBS.running(client.session_hash)
    shown = api_values(client.predict(api_name="/show_trace"), ["tabs", *LOAD_OUT])
    data = json.loads(Path(shown["download"]).read_text())
    assert data["footer"]["finish_reason"] == "cancelled" and 0 < len(data["steps"]) < 480
    assert f"{len(data['steps'])} steps, {len(data['forwards'])} forwards" in status
    client.close()


def test_models_off_the_list_and_huge_seeds_are_refused(served):
    """Rows 3 and 7: the 30B is not offered (refused before any download); a 250-digit seed is a message."""
    client = Client(served[1], verbose=False)
    out = client.predict("hi", "JetLM/SDAR-30B-A3B-Chat", *knob_values(gen_length=8), api_name="/run")
    assert out[0].startswith("⚠ Model 'JetLM/SDAR-30B-A3B-Chat' is not offered on this server")
    out = client.predict("hi", RANDOM_MODEL, *knob_values(gen_length=8, seed=10**249), api_name="/run")
    assert out[0].startswith("⚠ Invalid setting — seed: must be in [0, 2147483647], got a 2")
    client.close()


def test_compare_is_one_job_and_stops_within_a_forward(served):
    """Row 5: Compare runs as the session's one GPU job, under the run caps, and Stop ends it promptly."""
    from components.serve import gpu_slot

    client = Client(served[1], verbose=False)
    heavy = "block_length=64 remasking=low_confidence_static"
    lanes = ["dynamic-baseline"] * 4 + [heavy] * 4
    job = client.submit("Once upon a time", 0, 256, *lanes, api_name="/compare")
    assert _wait(lambda: gpu_slot.JOBS.running(client.session_hash) and _decoding())
    with pytest.raises(Exception, match="already have a run in progress"):
        client.predict("hi", RANDOM_MODEL, *knob_values(gen_length=8), api_name="/run")
    gpu_slot.JOBS.stop_session(client.session_hash)  # what the Stop button does
    status = job.result(timeout=120)  # eight lanes of 256 tokens would take far longer: it ended in lane 1
    assert status.startswith("■ Stopped during Lane 1 (lanes finished before: none)"), status
    refused = client.predict("x" * 2001, 0, 8, *lanes, api_name="/compare")
    assert refused.startswith("⚠ The prompt is longer than 2,000 characters")
    client.close()


def test_repeated_uploads_share_one_export(served, tmp_path):
    """Row 9: downloads live in one bounded folder; the same trace uploaded again reuses its file."""
    path = tmp_path / "mixed.json"
    path.write_text(tf.mixed().to_json())
    client = Client(served[1], verbose=False)
    before = set(Path(os.environ["S2D2_EXPORT_DIR"]).iterdir())
    downloads = {client.predict(handle_file(str(path)), api_name="/upload_trace")[-1] for _ in range(4)}
    after = set(Path(os.environ["S2D2_EXPORT_DIR"]).iterdir())
    assert len(after - before) <= 1 and len({Path(d).name for d in downloads}) == 1
    assert served[0].demo.delete_cache == (600, 3600)
    client.close()


def test_bundled_llada2_model_runs_and_replays_its_edits(served):
    """The official-layout LLaDA2 tiny model decodes in the app with the editing loop; a step with an edit
    replays with the old token struck through."""
    from components.replay.handlers import LOAD_OUT, STEP_OUT

    if not (ROOT / "assets" / "tiny-llada2").exists():
        pytest.skip("assets/tiny-llada2 (the bundled LLaDA2 model) is not trained yet")
    client = Client(served[1], verbose=False)
    prompt = "Tom has 12 apples. He buys 7 more. He doubles the apples. How many apples does Tom have now?"
    status = client.predict(prompt, "tiny-llada2", *knob_values("llada2-dynamic-edit", gen_length=64,
                                                                editing_threshold=0.3), api_name="/run")[0]
    assert status.startswith("✓ Done"), status
    shown = api_values(client.predict(api_name="/show_trace"), ["tabs", *LOAD_OUT])
    data = json.loads(Path(shown["download"]).read_text())
    assert data["header"]["config"]["loop"] == "editing"
    step = next(i for i, s in enumerate(data["steps"]) if s.get("edits"))
    view = api_values(client.predict(step + 1, "auto", "state", api_name="/step"), STEP_OUT)
    assert "st-edited" in view["canvas"] and "<s>" in view["canvas"] and " edited (" in view["summary"]
    client.close()
