"""Compare and Sweep tab handlers on recorded traces (tiny random model), and the tabs' structure."""
from __future__ import annotations

import json
import re
from html import escape

import pytest

from components.escape import md_text

from tests.support.lanes import PROMPT, tiny_with_tokenizer
from components.compare import lanes as cc
from components.compare import layout as ct
from components.compare import whatif_panel as wv
from components.sweep import panel as sw


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
    titles = ["Lane 1 · One token per forward (autoregressive)",
              "Lane 2 · Diffusion alone (commit drafts with p > 0.85), block 4",
              "Lane 3 · Verify when it expects a gain (K̂ ≥ 1), block 4",
              "Lane 4 · Always verify, block 4, greedy-exact acceptance (custom settings)"]
    assert table["headers"] == ["metric", *titles]  # the page's words, never "1·ar" (newcomer walk, item 3)
    rows = table["data"]
    for title, name in zip(titles, ["ar", "dynamic-baseline", "sdar-config-a", "sdar-config-b"]):
        assert f"<h4>{escape(title)}</h4>" in html and f">preset {name}" in html  # the preset: a detail under it
    assert "·ar" not in html + diff and "·sdar" not in html + diff
    assert [t.y[0] for t in nfe_fig.data if t.y] and {y for t in nfe_fig.data for y in t.y} <= {
        "Lane 1", "Lane 2", "Lane 3", "Lane 4"}  # the axis names lanes as the titles do
    assert "answer block 1 (positions" in html and "s2d2-canvas" in html
    traces = cc.traces_of(state)  # the lanes' traces live in the state store; the state keeps their headers
    assert list(traces) == list(state["lanes"]) and set(state["lanes"]["1·ar"]) == {"header"}
    nfe = traces["3·sdar-config-a"]
    total = sum(len(t.x) for t in nfe_fig.data)
    assert total == sum(len(t.forwards) for t in traces.values())
    assert max(max(t.x) for t in nfe_fig.data) == max(len(t.forwards) for t in traces.values())
    assert len(nfe.forwards) > 0 and all(isinstance(t.x, tuple) for t in wall_fig.data)
    labels = [r[0] for r in rows]
    assert "speedup vs AR (forwards per token)" in labels and rows[-1][0] == "output equals AR"
    assert rows[-1][1].startswith("✓") and rows[-1][4].startswith("✓")  # AR itself, and greedy_exact always-verify
    assert "fused accounting" in diff
    lo, hi = cc.block_range(state)
    assert lo == 0 and hi >= 2  # 0 = the prompt prefill, answer blocks from 1


def test_block_control_clamps_and_ignores_blank(state):
    lo, hi = cc.block_range(state)
    top = cc.compare_views(state, hi)["cmp_lanes_html"]
    drawn, legend = top.split('<div class="s2d2-legend">')  # the lanes' glyphs keyed, exactly those drawn (walk)
    assert set(re.findall(r'class="tok st-([a-z_]+)', drawn)) == set(re.findall(r'class="tok st-([a-z_]+)"', legend))
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
        cc.parse_custom_settings("policy")
    assert cc.parse_custom_settings("a=1, b=x\nc=true") == {"a": 1, "b": "x", "c": True}
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
    assert "<th>note</th>" not in table and "<td></td></tr>" not in table  # no empty column when nothing is noted
    assert "Thresholds used: τ_score = 0, penalty c = 1, entropy weight β = 1." in summary  # the page's symbols
    assert "score_threshold" not in summary and "negexp" not in summary
    assert wv.s2d2_choices(state) == [("Lane 3 · Verify when it expects a gain (K̂ ≥ 1), block 4", lanes[0]),
                                      ("Lane 4 · Always verify, block 4, greedy-exact acceptance (custom settings)",
                                       lanes[1])]
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
    said = "Re-ran Lane 3 · Verify when it expects a gain (K̂ ≥ 1), block 4 with τ_score = −5 (recorded: "
    assert said in status and "{" not in status  # issue 28 row 7; the lane by its title (newcomer walk, item 3)
    # the comparison's AR lane is in the table: "output equals AR" is about lanes on screen (issue 17 row 7)
    assert table["headers"] == ["metric", "recorded", "re-run", "Lane 1 · One token per forward (autoregressive)"]
    rows = {r[0]: r[1:] for r in table["data"]}
    assert rows["forwards (NFE: model calls)"][0] == str(len(cc.traces_of(state)[lane].forwards))
    assert rows["verify rate"][1] == "100 %"
    assert "no AR lane" not in str(rows["output equals AR"]) and rows["output equals AR"][2].startswith("✓")
    assert "wall time" not in rows and "not timed together" in status  # walls of lanes not timed together
    assert side.count('class="s2d2-lane"') == 2 and "re-run" in side
    assert 'class="s2d2-legend"' in side  # the glyphs of both canvases keyed under them (walk)


def _results(tmp_path):
    cells = [
        {"name": "ar", "method": "ar", "accuracy": 0.8, "nfe_per_token": 1.0, "wall_per_token": 0.1},
        {"name": "b", "method": "dynamic", "accuracy": 0.7, "nfe_per_token": 0.5, "wall_per_token": 0.06},
        {"name": "b2", "method": "dynamic", "accuracy": 0.5, "nfe_per_token": 0.3, "wall_per_token": 0.05},
        {"name": "s", "method": "s2d2", "accuracy": 0.75, "nfe_per_token": 0.6, "wall_per_token": 0.07},
    ]
    from s2d2.sweeps.grid import COLUMNS, add_speedups

    full = [{k: c.get(k) for k in COLUMNS} | c for c in add_speedups(cells)]
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"version": 1, "meta": {"model": "tiny", "task": "arithmetic", "n": 3},
                                "cells": full}))
    return path


def test_sweep_views_from_a_results_file(tmp_path):
    status, nfe, wall, rows = sw.sweep_views(_results(tmp_path), "test")
    assert "4 cells" in status and "**s** (0.600 forwards/token" in status
    assert "is more accurate than every baseline (by the point estimates only" in status
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


@pytest.mark.slow
def test_tabs_through_gradio_client(model, tmp_path, monkeypatch):
    """The two public endpoints, driven like a user would through a launched app."""
    import socket

    import gradio as gr
    from gradio_client import Client, handle_file

    from components.serve import model_pool

    monkeypatch.setenv("GRADIO_TEMP_DIR", str(tmp_path / "gradio"))
    model_pool.register_model("test-compare-model", model)
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
        assert out.endswith("Nothing new was compared: the lanes below are still the last comparison's (seed 0).")
        status, nfe, wall, table = client.predict(handle_file(str(_results(tmp_path))), api_name="/load_sweep")
        assert "4 cells" in status and nfe["type"] == "plotly" and len(table["data"]) == 4
        client.close()
    finally:
        demo.close()
        model_pool.forget_model("test-compare-model")


# -- issue 17: wall figures that can be trusted (row 3), texts true for the data on screen (row 7), messages (row 11)

def test_lanes_are_timed_in_interleaved_rounds_after_a_warmup(state):
    from components.run.lane_rounds import TIMED_ROUNDS

    walls = state["walls"]
    assert set(walls) == set(state["lanes"]) and all(len(w) == TIMED_ROUNDS for w in walls.values())
    for name, trace in cc.traces_of(state).items():  # each lane keeps its median timed run
        assert trace.footer.wall_s in walls[name]
    table = cc.compare_views(state, 1)["cmp_metrics"]
    rows = {r[0]: r[1:] for r in table["data"]}
    assert all(f"median of {TIMED_ROUNDS} runs, ±" in c for c in rows["wall time"])
    assert all(c.endswith("×") or c == "–" for c in rows["speedup vs AR (forwards per token)"])
    import re

    cells = [c for r in table["data"] for c in r[1:]]
    assert not any(re.search(r"\d\.\d{3}", c) for c in cells), cells  # no 3-decimal noise
    assert "interleaved rounds after one warm-up round" in cc.compare_views(state, 1)["cmp_diff"]


def test_lane_rounds_exclude_the_warmup_and_interleave():
    from components.run.lane_rounds import lane_rounds

    order, seconds = [], iter([9.0, 1.0, 1.0, 2.0, 1.1, 2.2])  # lane a's warm-up run is slow

    def run(name, config, left):
        order.append(name)
        yield {"kind": "done", "trace": {"name": name, "footer": {"wall_s": next(seconds),
                                                                  "finish_reason": "length"}}}

    out = list(lane_rounds({"a": {}, "b": {}}, run, float("inf"), timed_rounds=2))[-1]
    assert order == ["a", "b", "a", "b", "a", "b"]
    assert out["walls"] == {"a": [1.0, 1.1], "b": [2.0, 2.2]}  # 9 s of warm-up is not a run
    assert out["traces"]["a"]["footer"]["wall_s"] == 1.0  # the lower median run
    clock = iter([0.0, 0.0, 5.0, 10.0, 10.0, 10.0])  # round 0 takes 10 s of a 15 s budget: no timed round fits
    order.clear()
    seconds = iter([4.0, 6.0])
    out = list(lane_rounds({"a": {}, "b": {}}, run, 15.0, timed_rounds=2, clock=lambda: next(clock)))[-1]
    assert order == ["a", "b"] and out["walls"] == {"a": [], "b": []}


def test_wall_speedups_say_when_they_are_noise():
    from s2d2.compare import compare_traces
    from s2d2.timing import WallStats, ratio_noise
    from components.compare.lane_metrics import wall_speedup_cell
    from fixtures import trace_factory as tf

    assert WallStats((1.0, 1.2)).noise == pytest.approx(0.1 / 1.1) and WallStats((1.0,)).noise is None
    assert ratio_noise(WallStats((1.0, 1.2)), WallStats((2.0, 2.0))) == pytest.approx(0.1 / 1.1)
    ar, lane = tf.ar_trace(), tf.mixed()
    lane.header.prompt_ids = ar.header.prompt_ids
    quiet = compare_traces({"ar": ar, "s": lane}, {"ar": [2.0, 2.1], "s": [1.0, 1.05]}).lane("s")
    assert quiet.speedup_wall_trusted and wall_speedup_cell(quiet).endswith("%)") and "×" in wall_speedup_cell(quiet)
    noisy = compare_traces({"ar": ar, "s": lane}, {"ar": [2.0, 6.0], "s": [1.0, 1.1]}).lane("s")
    assert not noisy.speedup_wall_trusted and wall_speedup_cell(noisy).startswith("– (too noisy: ±")
    once = compare_traces({"ar": ar, "s": lane}).lane("s")
    assert wall_speedup_cell(once) == "– (timed once: too noisy to compare)"


def test_routing_is_compared_step_by_step_only_between_lanes_with_the_same_blocks(model):
    import s2d2
    from s2d2.config import preset

    traces = {"a": s2d2.generate(model, PROMPT, preset("sdar-config-a", gen_length=8), seed=0).trace,
              "b": s2d2.generate(model, PROMPT, preset("sdar-config-b", gen_length=8, block_length=8), seed=0).trace}
    comp = cc.compare_traces(traces)
    assert comp.divergences == []  # B = 4 vs B = 8: their k-th steps are about different positions
    text = cc.diff_markdown(comp, traces)
    assert "different block lengths, so their steps do not correspond" in text and "answer block" not in text


def test_whatif_summary_numbers_blocks_as_its_table(state):
    lane = "3·sdar-config-a"
    values = list(wv.knob_values(state, lane))
    values[0] = -5.0
    out = wv.whatif_view(state, lane, *values)
    import re

    said = int(re.search(r"the first at step \d+ \(answer block (\d+)\)", out["wi_summary"]).group(1))
    flip = re.search(r'<tr class="flip"><td>\d+</td><td>(\d+)</td>', out["wi_table"]).group(1)
    assert said == int(flip)


def test_a_cleared_seed_box_gets_a_plain_message():
    lanes = ["ar", "sdar-config-a", cc.OFF, cc.OFF, "", "", "", ""]
    status, state = cc.run_compare(PROMPT, "tiny", None, 8, *lanes)
    assert state is None and status == ("⚠ Seed (all lanes): the box is empty. Type a whole number, e.g. 0 (every "
                                        "lane uses the same seed).")
    assert cc.run_compare(PROMPT, "tiny", "abc", 8, *lanes)[0].startswith("⚠ Seed (all lanes): 'abc' is not a number")


def test_lane_figure_titles_have_room():
    from fixtures import trace_factory as tf

    traces = {"a": tf.mixed(), "b": tf.mixed()}
    comp = cc.compare_traces(traces)
    fig = cc.lanes_figure(comp, traces, 1, "wall")
    assert fig.layout.title.yref == "container" and fig.layout.margin.t >= 100
    assert "one run each: wall times are noise here" in fig.layout.title.text


def test_compare_says_each_lanes_progress_while_the_lanes_run(model):
    """Issue 28 row 9: while the lanes run the status line has one line per lane (waiting, decoding with its steps,
    or its runs done), from the lane_rounds events; the last item is the finished comparison."""
    from components.compare.lane_progress import LaneBoard
    from components.run.lane_rounds import TIMED_ROUNDS

    import s2d2

    lanes = ["ar", "dynamic-baseline", cc.OFF, cc.OFF, "", "", "", ""]
    steps = list(cc.run_compare_steps(PROMPT, "tiny", 0, 8, *lanes, load=lambda name: model, generate=s2d2.generate))
    texts = [t for t, st in steps[:-1]]
    assert all(st is None for _, st in steps[:-1]) and steps[-1][1] is not None
    ar = md_text("Lane 1 · One token per forward (autoregressive)")
    assert texts[0].startswith("Running the warm-up round") and f"- **{ar}**: waiting" in texts[0]
    assert f"- **{ar}**: 1 of up to {1 + TIMED_ROUNDS} runs done" in texts[1] and "Lane 2 · Diffusion" in texts[1]
    assert any(f"Running timed round {TIMED_ROUNDS} of up to {TIMED_ROUNDS}" in t for t in texts)
    assert "runs done" in texts[-1] and steps[-1][0].startswith("Ran 2 lanes")
    board = LaneBoard(["a", "b"], 3)
    board.update({"kind": "progress", "lane": "b", "round": 1, "steps": 4, "elapsed": 1.25})
    assert "- **b**: decoding run 1 of up to 3, 4 steps so far (1.2 s)" in board.markdown()
    board.update({"kind": "lane_done", "lane": "b", "round": 1, "wall_s": 1.3})
    board.update({"kind": "progress", "lane": "nobody", "round": 1})  # a stray event changes nothing
    assert "- **b**: 1 of up to 3 runs done" in board.markdown() and "- **a**: waiting" in board.markdown()
