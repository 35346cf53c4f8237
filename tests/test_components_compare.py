"""Compare and Sweep tab handlers on recorded traces (tiny random model), and the tabs' structure."""
from __future__ import annotations

import json

import pytest

from lanes_helpers import PROMPT, tiny_with_tokenizer
from components import compare as cc
from components import compare_tab as ct
from components import whatif_view as wv
from components import sweep as sw


@pytest.fixture(scope="module")
def model():
    return tiny_with_tokenizer()


@pytest.fixture(scope="module")
def state(model):
    import s2d2

    lanes = ["ar", "dynamic-baseline", "sdar-config-a", "sdar-config-b"]
    extra = ["", "", "", "block_length=4 acceptance=greedy_exact policy=always"]
    status, st = cc.run_compare(PROMPT, "tiny", 0, 8, *lanes, *extra, load=lambda name: model, generate=s2d2.generate)
    assert st is not None, status
    return st


def test_run_compare_state_and_views(state):
    assert list(state["lanes"]) == ["1·ar", "2·dynamic-baseline", "3·sdar-config-a", "4·sdar-config-b*"]
    json.dumps(state)  # plain, deep-copyable session state
    views = cc.compare_views(state, 1)
    assert list(views) == cc.VIEW_OUT
    html, nfe_fig, wall_fig, table, diff = (views[k] for k in cc.VIEW_OUT)
    assert table["headers"] == ["metric", *state["lanes"]]
    rows = table["data"]
    for name in state["lanes"]:
        assert name in html
    assert "answer block 1 (positions" in html and "s2d2-canvas" in html
    traces = cc.traces_of(state)  # the lanes' traces live in the state store; the state keeps their headers
    assert list(traces) == list(state["lanes"]) and set(state["lanes"]["1·ar"]) == {"header"}
    nfe = traces["3·sdar-config-a"]
    total = sum(len(t.x) for t in nfe_fig.data)
    assert total == sum(len(t.forwards) for t in traces.values())
    assert max(max(t.x) for t in nfe_fig.data) == max(len(t.forwards) for t in traces.values())
    assert len(nfe.forwards) > 0 and all(isinstance(t.x, tuple) for t in wall_fig.data)
    labels = [r[0] for r in rows]
    assert "speedup vs AR (NFE/token)" in labels and rows[-1][0] == "output equals AR"
    assert rows[-1][1].startswith("✓") and rows[-1][4].startswith("✓")  # AR itself, and greedy_exact always-verify
    assert "fused accounting" in diff
    lo, hi = cc.block_range(state)
    assert lo == 0 and hi >= 2  # 0 = the prompt prefill, answer blocks from 1


def test_block_control_clamps_and_ignores_blank(state):
    lo, hi = cc.block_range(state)
    top = cc.compare_views(state, hi)["cmp_lanes_html"]
    assert cc.compare_views(state, 10 * hi)["cmp_lanes_html"] == top  # typed 10: clamped to the last block
    assert "prompt prefill" in cc.compare_views(state, -1)["cmp_lanes_html"]  # typed −1: clamped to 0
    assert cc.compare_views(state, None) == {}  # blank box: nothing changes
    assert cc.compare_views(None, 3)["cmp_lanes_html"].startswith("<p>No comparison yet")
    out = ct.after_run(state)
    assert out["cmp_results"].visible is True and out["cmp_empty"].visible is False
    assert (out["cmp_block"].minimum, out["cmp_block"].value) == (0, 1) and out["cmp_block"].maximum == hi
    assert ct.after_run(None) == {}


def test_only_the_chosen_policys_whatif_knobs_show(state):
    ups = wv.knob_updates(state, "3·sdar-config-a")  # score_threshold, static, negexp
    shown = {k for k, u in ups.items() if u["visible"]}
    assert shown == {"wi_score_threshold", "wi_penalty_coef", "wi_negexp_beta"}
    assert not any(u["visible"] for u in wv.knob_updates(state, "4·sdar-config-b*").values())  # policy always
    assert not any(u["visible"] for u in wv.knob_updates(state, None).values())


def test_divergence_text_names_what_differs(state):
    comp = cc.compare_traces(cc.traces_of(state))
    traces = cc.traces_of(state)
    from s2d2.compare import DecisionDivergence

    a, b = "3·sdar-config-a", "4·sdar-config-b*"
    first = traces[a].blocks[0].index
    text = cc.divergence_text(comp, traces, DecisionDivergence((a, b), 2, (first + 1, first + 2), (True, True)))
    assert "both verifies" not in text and "answer block 2" in text and "answer block 3" in text
    assert "True" not in text
    text = cc.divergence_text(comp, traces, DecisionDivergence((a, b), 0, (first, first), (True, False)))
    assert f"**{a}** verifies and **{b}** skips" in text


def test_lane_validation_messages():
    with pytest.raises(ValueError, match="2 to 4 lanes"):
        cc.lane_configs(["ar", cc.OFF, cc.OFF, cc.OFF], ["", "", "", ""], 16)
    with pytest.raises(ValueError, match="lane 2: block_length"):
        cc.lane_configs(["ar", "sdar-config-a", cc.OFF, cc.OFF], ["", "block_length=0", "", ""], 16)
    with pytest.raises(ValueError, match="KEY=VALUE"):
        cc.parse_overrides("policy")
    assert cc.parse_overrides("a=1, b=x\nc=true") == {"a": 1, "b": "x", "c": True}
    status, st = cc.run_compare(PROMPT, "tiny", 0, 8, "ar", cc.OFF, cc.OFF, cc.OFF, "", "", "", "")
    assert st is None and status.startswith("⚠")
    assert cc.compare_views(None, 0)["cmp_lanes_html"].startswith("<p>No comparison yet")
    assert cc.run_compare(PROMPT, "tiny", -1, 8, "ar", "ar", cc.OFF, cc.OFF, "", "", "", "")[0].startswith("⚠ seed")


def test_whatif_view_marks_flips_and_greys_the_rest(state):
    lanes = wv.s2d2_lanes(state)
    assert lanes == ["3·sdar-config-a", "4·sdar-config-b*"]
    values = wv.knob_values(state, lanes[0])
    out = wv.whatif_view(state, lanes[0], *values)
    summary, table = out["wi_summary"], out["wi_table"]
    assert summary.startswith("No decision flips") and "unknown" not in table
    assert "Knobs applied to `score_threshold`: score_threshold = 0, penalty_coef = 1, negexp_beta = 1" in summary
    changed = list(values)
    changed[0] = -5.0  # τ_score: every span verifies now
    summary, table = wv.whatif_view(state, lanes[0], *changed).values()
    assert "flip" in summary and 'class="flip"' in table
    assert table.count("trajectory unknown: re-run") == table.count('class="unknown"') > 0
    summary, table = wv.whatif_view(state, lanes[1], *wv.knob_values(state, lanes[1])).values()
    assert summary.startswith("No decision flips")  # policy "always": no knob applies
    assert wv.whatif_view(state, "1·ar", *values)["wi_summary"].startswith("⚠ what-if needs an S2D2 trace")
    assert wv.whatif_view(state, "no such lane", *values)["wi_summary"].startswith("Run a comparison")


def test_rerun_shows_old_and_new_side_by_side(state, model):
    import s2d2

    lane = "3·sdar-config-a"
    values = list(wv.knob_values(state, lane))
    values[0] = -5.0
    out = wv.rerun_whatif(state, lane, *values, load=lambda n: model, generate=s2d2.generate)
    status, table, side = out["wi_status"], out["wi_metrics"].value, out["wi_side"]
    assert out["wi_metrics"].visible is True  # the table appears only once there is a re-run to show
    assert "Re-ran" in status and "score_threshold" in status
    assert table["headers"] == ["metric", "recorded", "re-run"]
    rows = table["data"]
    assert rows[0][0] == "NFE" and len(rows[0]) == 3
    verify_rate = next(r for r in rows if r[0] == "verify rate")
    assert float(verify_rate[2]) == pytest.approx(1.0)
    assert side.count('class="s2d2-lane"') == 2 and "re-run" in side


def _results(tmp_path):
    cells = [
        {"name": "ar", "method": "ar", "accuracy": 0.8, "nfe_per_token": 1.0, "wall_per_token": 0.1},
        {"name": "b", "method": "dynamic", "accuracy": 0.7, "nfe_per_token": 0.5, "wall_per_token": 0.06},
        {"name": "b2", "method": "dynamic", "accuracy": 0.5, "nfe_per_token": 0.3, "wall_per_token": 0.05},
        {"name": "s", "method": "s2d2", "accuracy": 0.75, "nfe_per_token": 0.6, "wall_per_token": 0.07},
    ]
    from s2d2.sweep import COLUMNS, add_speedups

    full = [{k: c.get(k) for k in COLUMNS} | c for c in add_speedups(cells)]
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"version": 1, "meta": {"model": "tiny", "task": "arithmetic", "n": 3},
                                "cells": full}))
    return path


def test_sweep_views_from_a_results_file(tmp_path):
    status, nfe, wall, rows = sw.sweep_views(_results(tmp_path), "test")
    assert "4 cells" in status and "cell by wall time: s," in status
    names = [t.name for t in nfe.data]
    assert "AR (B = 1)" in names and "dynamic-threshold baseline Pareto frontier" in names
    front = next(t for t in nfe.data if t.name == "dynamic-threshold baseline Pareto frontier")
    assert list(front.x) == [0.3, 0.5] and list(front.y) == [0.5, 0.7]
    assert len(rows) == 4 and rows[0][0] == "ar"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"version": 1, "cells": [{"name": "x"}]}))
    assert sw.sweep_views(bad)[0].startswith("⚠ Not a results file: results.cells\\[0\\].method: missing")
    bad.write_text("{not json")
    assert sw.sweep_views(bad)[0].startswith("⚠ Not a results file")
    assert sw.sweep_views(None)[0] == sw.NO_RESULTS


def test_tabs_structure_and_private_handlers():
    import gradio as gr

    with gr.Blocks() as demo:
        with gr.Tabs():
            with gr.Tab("Compare"):
                ct.build_compare_tab()
            with gr.Tab("Sweep"):
                sw.build_sweep_tab()
    config = demo.get_config_file()
    ids = {c.get("props", {}).get("elem_id") for c in config["components"]}
    assert {"cmp-run", "cmp-block", "cmp-lanes", "cmp-nfe", "cmp-wall", "wi-table", "sweep-nfe", "sweep-table"} <= ids
    public = {d.get("api_name") for d in config["dependencies"] if d.get("api_visibility") == "public"}
    assert {"compare", "load_sweep"} <= public
    assert sum(d.get("api_visibility") == "public" for d in config["dependencies"]) == 2


def test_tabs_through_gradio_client(model, tmp_path, monkeypatch):
    """The two public endpoints, driven like a user would through a launched app."""
    import socket

    import gradio as gr
    from gradio_client import Client, handle_file

    from components import run_panel

    monkeypatch.setenv("GRADIO_TEMP_DIR", str(tmp_path / "gradio"))
    run_panel.register_model("test-compare-model", model)
    with gr.Blocks() as demo:
        with gr.Tab("Compare"):
            ct.build_compare_tab(model_name="test-compare-model")
        with gr.Tab("Sweep"):
            sw.build_sweep_tab()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    demo.launch(prevent_thread_lock=True, server_port=port, quiet=True)
    try:
        client = Client(f"http://127.0.0.1:{port}/", verbose=False)
        out = client.predict(PROMPT, 0, 8, "ar", "sdar-config-a", cc.OFF, cc.OFF, "", "", "", "", api_name="/compare")
        assert out.startswith("Ran 2 lanes")
        out = client.predict(PROMPT, 0, 8, "ar", cc.OFF, cc.OFF, cc.OFF, "", "", "", "", api_name="/compare")
        assert out.startswith("⚠ turn on 2 to 4 lanes")
        status, nfe, wall, table = client.predict(handle_file(str(_results(tmp_path))), api_name="/load_sweep")
        assert "4 cells" in status and nfe["type"] == "plotly" and len(table["data"]) == 4
        client.close()
    finally:
        demo.close()
        run_panel.forget_model("test-compare-model")
