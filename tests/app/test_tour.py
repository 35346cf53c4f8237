"""The Learn tour's pictures and texts (issue 17 items 3-6), on the shipped example traces and synthetic ones: the
residual-resample picture, the cost ledger, the lockstep replay, the live τ_score control, calibration, exactness,
self-correction, and the stops revealing only what they have explained. Every number asserted is recomputed from
the traces here, never copied from the screen."""
from __future__ import annotations

import dataclasses
import json
import re
from collections import Counter
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent.parent
from fixtures import trace_factory as tf

from components.views import calibration
from components.views import exactness
from components.replay import handlers
from components.views import ledger
from components.views import lockstep
from components.views import attention_mask
from components.views import residual
from components.tour import tau_control
from components.tour import layout
from components.tour import material as tour
from components.tour import stops as tour_stops
from components.tour import pictures as tour_views
from s2d2.compare import first_difference
from s2d2.whatif import what_if  # noqa: E402

from tests.support.tour_material import OPENING
EDIT_AND_VERIFY = "Self correction meets verification · LLaDA2"


def _text(html_text: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html_text))


# -- item 3: the residual-resample picture -------------------------------------------------------------------------

def test_residual_bars_are_the_recorded_candidates(material):
    t = material.trace
    rec = residual.rejected_step(t, 2)
    v = rec.verification
    row = v.positions[v.first_reject]
    draft = next(d for d in rec.drafts if d.position == row.position)
    data = residual.residual_data(t, rec)
    top_p = {c.token: c.prob for c in draft.top}
    top_q = {c.token: c.prob for c in row.top_q}
    assert {b.token for b in data.bars} == set(top_p) | set(top_q)  # the union of the kept candidates
    for b in data.bars:
        assert b.p == top_p.get(b.token) and b.q == top_q.get(b.token)
        if b.p is not None and b.q is not None:  # both known: the exact renormalised residual
            assert b.residual_lo == b.residual_hi == pytest.approx(max(0.0, b.q - b.p) / v.residual_mass)
        else:  # one side only bounded by the smallest kept probability
            assert b.residual_lo <= b.residual_hi
    drawn = next(b for b in data.bars if b.is_drawn)
    assert drawn.token == v.resampled and next(b for b in data.bars if b.is_draft).token == row.draft
    assert next(b for b in data.bars if b.is_draft).residual_hi == 0.0  # (q − p)+ is 0 where p > q
    assert data.p_outside == pytest.approx(1 - sum(top_p.values()))
    assert data.q_outside == pytest.approx(1 - sum(top_q.values()))
    # the identity the picture teaches, at the drawn token: min(p, q) + (q − p)+ = q
    assert min(drawn.p, drawn.q) + max(0.0, drawn.q - drawn.p) == pytest.approx(drawn.q)
    page = _text(residual.residual_html(t, 2))
    assert f"u = {row.u:.3f} ≥ r = min(1, q/p)" in page and f"Z = {v.residual_mass:.3f}" in page
    assert f"top {len(draft.top)} and the verifier's top {len(row.top_q)}" in page
    assert "drafts greedily" in page  # T = 0: the exact-sample claim is made conditional, not claimed for this run


def test_residual_modes_and_where_replay_shows_it():
    sampled = tf.mixed()
    sampled.header.config["temperature"] = 0.7
    step = tour_stops.focus_step(sampled).index + 1
    assert "exact sample of q" in residual.residual_html(sampled, step) and "drafts greedily" not in \
        residual.residual_html(sampled, step)
    assert "drawn from q itself" in residual.residual_html(tf.residual_fallback_to_q(), 1)
    greedy = tf.greedy_exact()
    g_step = tour_stops.focus_step(greedy).index + 1
    assert "greedy_exact" in residual.residual_html(greedy, g_step) and "u = " not in \
        _text(residual.residual_html(greedy, g_step))
    t = tf.mixed()
    rejects = [s.index + 1 for s in t.steps if s.verification and s.verification.resampled is not None]
    quiet = next(k for k in range(len(t.steps) + 1) if k not in rejects)
    assert residual.residual_html(t, quiet) == ""  # no rejection at this step: nothing drawn
    # Replay: the step views carry it; a click on a resampled token later shows the draw that made it
    state = handlers.make_state(t, "t")
    assert handlers.step_views(state, rejects[0])["residual"].startswith('<div class="s2d2-residual"')
    assert handlers.step_views(state, quiet)["residual"] == ""
    rec = t.steps[rejects[0] - 1]
    pos = rec.verification.positions[rec.verification.first_reject].position
    evt = type("E", (), {"_data": {"position": pos}})()
    later = len(t.steps)
    out = handlers.select_position(state, later, "auto", evt)
    assert f'data-position="{pos}"' in out["residual"] and out["selected"] == pos
    assert residual.residual_html(t, rejects[0] - 1, pos) == ""  # not yet drawn at the step before


# -- item 4: the cost ledger ---------------------------------------------------------------------------------------

def test_cost_ledger_counts_every_forward(material):
    t, b = material.trace, material.baseline
    lanes = {"S2D2": t, "Diffusion alone": b}
    ours, theirs = ledger.lane_ledger("S2D2", t), ledger.lane_ledger("Diffusion alone", b)
    assert (ours.forwards, theirs.forwards) == (len(t.forwards), len(b.forwards)) == (11, 12)  # the pair
    for lg, trace in ((ours, t), (theirs, b)):
        assert {r.kind: r.forwards for r in lg.rows} == dict(Counter(f.kind for f in trace.forwards))
        assert lg.query_total == sum(f.query_tokens for f in trace.forwards)
    verify = next(r for r in ours.rows if r.kind == "verify_2l")
    assert verify.queries == [2 * t.header.config["block_length"]]  # a 2L verify carries 2B queries
    numbers, by_lane = ledger.block_forwards(lanes)
    assert sum(len(v) for v in by_lane["S2D2"].values()) == 11 and by_lane["S2D2"][0][0].kind == "prefill"
    assert [f.kind for f in by_lane["S2D2"][2]] == ["draft", "verify_2l", "draft", "verify_2l", "commit"]
    assert [f.kind for f in by_lane["Diffusion alone"][2]] == ["draft", "draft", "commit"]
    page = ledger.ledger_html(lanes, focus="S2D2")
    assert page.count('class="lg-box"') == len(t.forwards) + len(b.forwards) + len({f.kind for f in t.forwards})
    assert page.count('data-kind="verify_2l"') == verify.forwards
    routed = [s for s in t.steps if s.decision is not None]
    assert page.count("<li>") == len(routed)
    rec = next(s for s in routed if s.verification and s.verification.resampled is not None)
    assert (f"Step {rec.index + 1} (answer block 2)" in page and
            f"committed {len(rec.commits)} tokens ({rec.verification.accepted_len} accepted + 1 resampled)" in page)
    prompt, read = len(t.header.prompt_ids), sum(f.query_tokens for f in t.forwards if f.kind == "prefill")
    assert read < prompt  # the prefill stores whole blocks; where the other prompt tokens went is said once
    assert page.count(f"The prompt has {prompt} tokens: the prefill stores the {read} that fill whole blocks; "
                      f"the other {prompt - read} share the first block") == 1
    assert ledger.prefill_note({"AR": material.ar}) == ""  # AR's prefill reads the whole prompt


# -- item 5: lockstep replay ---------------------------------------------------------------------------------------

def test_lockstep_moves_both_runs_by_block(material):
    lanes = tour_views.pair(material)
    ms = lockstep.moments(lanes)
    assert ms[0].at == {"S2D2": 0, "Diffusion alone": 0}
    assert ms[-1].at == {n: len(t.steps) for n, t in lanes.items()}
    for a, b in zip(ms, ms[1:]):  # both runs only move forward, and at each moment both are in one aligned block
        assert all(b.at[n] >= a.at[n] for n in lanes) and b.block >= a.block
    part = lockstep.parting(lanes)
    t, base = lanes["S2D2"], lanes["Diffusion alone"]
    assert part == len(t.header.prompt_ids) + first_difference(t.footer.output_ids, base.footer.output_ids)
    k = lockstep.parting_moment(lanes)
    assert tour_views.first_moment(material) == k
    before, at = lockstep.lockstep_html(lanes, k - 1), lockstep.lockstep_html(lanes, k)
    assert f'data-pos="{part}" data-watch="1"' not in before
    assert at.count(f'data-pos="{part}" data-watch="1"') == 2  # ringed in both canvases
    ours = tour_stops.index_of(t).commit_of[part][1]
    theirs = tour_stops.index_of(base).commit_of[part][1]
    assert f"S2D2 wrote {ours.text!r} ({ours.how}" in _text(at).replace("&#x27;", "'")
    assert f"Diffusion alone wrote {theirs.text!r} ({theirs.how}" in _text(at).replace("&#x27;", "'")
    assert lockstep.lockstep_html(lanes, "junk") == lockstep.lockstep_html(lanes, 0)
    # the glyphs both lanes draw are keyed under them, and nothing they do not draw (walk: the stop had no key)
    drawn, legend = at.split('<div class="s2d2-legend">')
    assert set(re.findall(r'class="tok st-([a-z_]+)', drawn)) == set(re.findall(r'class="tok st-([a-z_]+)"', legend))
    assert "step 1 within answer block" in _text(lockstep.lockstep_html(lanes, 1))  # not the lanes' run-wide steps
    rules = " ".join(lockstep.how_each_decides(lanes))  # the runs' τ_conf differ: the text says so
    assert f"p > {t.header.config['confidence_threshold']:g}" in rules
    assert f"p > {base.header.config['confidence_threshold']:g}" in rules


# -- item 6: the τ_score control, calibration, exactness, self-correction ------------------------------------------

def test_route_control_redecides_through_the_whatif_engine(material):
    t = material.trace
    tau0 = tau_control.recorded_tau(t)
    assert "every recorded decision stands" in tau_control.route_text(t, tau0)
    skip = next(s for s in t.steps if s.decision is not None and not s.decision.verify)
    low = skip.decision.score - 0.5  # below the skipped step's score: it flips to verify
    w = what_if(t, score_threshold=low)
    assert w.first_flip == skip.index
    text = tau_control.route_text(t, low)
    assert f"step {skip.index + 1}" in text and "would **verify** instead of skip" in text
    fig = tau_control.route_figure(t, low, 2)
    traces = {tr.name: tr for tr in fig.data}
    unknown = list(traces["unknown after the first flip"].x)
    assert unknown == [s.index + 1 for s, r in zip(t.steps, w.steps) if not r.exact and r.new_verify is not None]
    assert list(traces["first flip"].x) == [skip.index + 1]
    assert fig.layout.shapes[0].y0 == low  # the threshold line moved
    out = tour_views.route_views(material, low)
    assert out["tour_route_note"] == text and out["tour_routing"].layout.shapes[0].y0 == low
    lo, hi = tau_control.tau_range(t)
    assert tau_control.clamp_tau(t, "x") == tau0 and tau_control.clamp_tau(t, 1e9) == hi and lo < tau0 < hi


def test_a_stop_reached_by_next_leaves_its_live_views_to_the_control(material):
    """Next / Back select the stop they drew, which fires the stop's select event and its chained live-view event.
    That chained event must not draw: it would carry the τ the box held when it was sent and, finishing after the
    change event of a τ typed since, leave the plot and its sentence on the old τ (a flake of the tour's browser
    test under load). Pressed by its circle, the stop is drawn and its live views follow the control."""
    drawn = []
    assert layout.stop_picked(3, 3, lambda: drawn.append(1) or {"x": 1}) == {"tour_at": 3, "tour_drawn": False}
    assert drawn == []  # nothing drawn for a stop Next / Back drew already
    assert layout.stop_picked(3, 1, lambda: {"x": 1}) == {"x": 1, "tour_drawn": True}
    follow = layout.after_circle(lambda tau: tour_views.route_views(material, tau))
    assert follow(False, 0.5) == {}  # keyed() turns {} into gr.skip(): nothing drawn over the typed τ
    assert follow(True, 0.5) == tour_views.route_views(material, 0.5) != {}


def test_calibration_is_k_hat_against_k(material):
    t = material.trace
    calls = [s for s in t.steps if s.verification is not None and s.policy_inputs is not None]
    fig = calibration.calibration_figure(t)
    points = next(tr for tr in fig.data if tr.name == "verify calls")
    assert list(points.x) == [round(s.policy_inputs.k_hat, 4) for s in calls]
    assert list(points.y) == [s.verification.accepted_len for s in calls]
    mae = sum(abs(s.policy_inputs.k_hat - s.verification.accepted_len) for s in calls) / len(calls)
    assert f"mean |K̂ − K| is {mae:.2f}" in calibration.calibration_text(t)
    worst = max(calls, key=lambda s: abs(s.policy_inputs.k_hat - s.verification.accepted_len))
    assert f"largest miss is step {worst.index + 1}" in calibration.calibration_text(t)


def test_exactness_from_the_shipped_lossless_pair(material, tmp_path):
    s, a = material.lossless, material.ar
    assert s is not None and a is not None
    e = exactness.exactness(s, a)
    assert e.identical and s.footer.output_ids == a.footer.output_ids
    assert (e.s2d2_forwards, e.ar_forwards) == (len(s.forwards), len(a.forwards)) and e.s2d2_forwards < e.ar_forwards
    assert s.header.config["acceptance"] == "greedy_exact" and s.header.config["policy"] == "always"
    assert s.header.prompt_ids == material.trace.header.prompt_ids  # the opening question
    result = exactness.load_result()
    assert result is not None and result["identical"] <= result["n"]
    line = exactness.result_line(result)
    assert f"{result['identical']}/{result['n']}" in line and f"up to {result['gen_length']} tokens" in line
    assert "python" not in line and "/" not in line.replace(f"{result['identical']}/{result['n']}", "")  # no path
    assert f"{result['ar_nfe'] / result['s2d2_nfe']:.2f}× fewer" in line
    raw = json.loads(exactness.RESULT.read_text())
    for bad in ({**raw, "identical": raw["n"] + 1}, {**raw, "n": "40"}, {**raw, "s2d2_nfe": 0}, {"n": 1}):
        (tmp_path / "r.json").write_text(json.dumps(bad))
        assert exactness.load_result(tmp_path / "r.json") is None
    stop = next(x for x in tour.tour_stops(material) if x.key == "exact")
    assert f"{len(s.forwards)} forwards instead of AR's {len(a.forwards)}" in stop.text and line in stop.text


def test_exactness_benchmark_matches_ar_on_a_random_model():
    import importlib

    import torch

    from tests.support.tiny_models import tiny_qwen3

    bench = importlib.import_module("benchmarks.exactness")
    model = tiny_qwen3(dtype=torch.float64)
    rows = bench.measure(model, [[5, 6, 7, 8, 9], [40, 41, 42]], bench.lossless_config(4, 8), 8)
    total = bench.summary(rows)
    assert total["identical"] == total["n"] == 2 and total["ar_nfe"] == sum(r["ar_nfe"] for r in rows)


def test_self_correction_stop_where_an_edit_and_a_verification_meet(material):
    t = material.edit
    assert material.edit_label == EDIT_AND_VERIFY and t is not None
    edit = next(s for s in t.steps if s.edits)
    meet = [s for s in t.steps if s.block == edit.block and s.verification is not None
            and s.verification.resampled is not None]
    assert meet  # the shipped example: the same block verifies (with a resample) and edits
    stop = next(x for x in tour.tour_stops(material) if x.key == "edit")
    e, v = edit.edits[0], meet[0].verification
    assert stop.step == edit.index + 1 and stop.trace == "edit" and stop.example == EDIT_AND_VERIFY
    assert f"At step {edit.index + 1} it predicts `{e.new_text}` at position {e.position}" in stop.text
    assert f"at step {meet[0].index + 1}, the verifier rejected" in stop.text and f"`{v.resampled_text}`" in stop.text
    pic = tour_views.picture(material, stop, stop.pictures[0]).split('class="s2d2-legend"')[0]
    rejected = v.positions[v.first_reject].position
    assert f'data-pos="{e.position}" data-watch="1"' in pic and f'data-pos="{rejected}" data-watch="1"' in pic
    assert handlers.open_tour_step(*tour_views.target([stop], 0))["example"]["value"] == EDIT_AND_VERIFY


# -- item 6 / row 9: the stops reveal only what they have explained, highlight what they name ---------------------

def test_stops_reveal_in_order_and_pictures_change_in_place(material):
    stops = tour.tour_stops(material)
    keys = [s.key for s in stops]
    assert keys == ["draft", "route", "verify", "reject", "resample", "skip", "calibration", "cost", "exact", "edit",
                    "pipeline", "run"]
    views = [tour_views.stop_views(material, stops, i, tau_control.recorded_tau(material.trace), 0)
             for i in range(len(stops))]
    names = set(tour_views.VIEW.values())
    assert all(names <= set(v) for v in views)  # every stop sets every shared picture: shown or hidden
    shown = [{k for k in names if v[k]["visible"]} for v in views]
    assert shown[keys.index("verify")] == {"tour_mask", "tour_strip"}
    strip = {k: _text(views[keys.index(k)]["tour_strip"]["value"]) for k in ("verify", "reject", "resample")}
    assert "q(x₀)" in strip["verify"] and not any(w in strip["verify"] for w in ("reject", "↻", "discarded", "r = min"))
    assert "✗ reject" in strip["reject"] and "after ✗" in strip["reject"] and "↻" not in strip["reject"]
    assert "committed" not in strip["reject"] and "↻ 3" in strip["resample"] and "discarded" in strip["resample"]
    at = tour_stops.rejected_position(tour_stops.focus_step(material.trace))
    for key in ("verify", "reject", "resample"):  # the column the text names is outlined and marked for scrolling
        assert 'data-watch="1"' in views[keys.index(key)]["tour_strip"]["value"]
        assert f"pos {at}" in views[keys.index(key)]["tour_strip"]["value"]
    assert views[keys.index("resample")]["tour_residual"]["visible"]
    assert views[0]["tour_back"]["interactive"] is False and views[-1]["tour_next"]["interactive"] is False
    assert views[keys.index("exact")]["tour_show"]["visible"] is False  # the lossless runs are not an example


def test_verify_stop_outlines_the_mask_copy_row_with_one_numbering(material):
    t = material.trace
    stops = tour.tour_stops(material)
    stop = next(s for s in stops if s.key == "verify")
    mask = next(p for p in stop.pictures if p.kind == "mask")  # under the table the words start from
    at = mask.at
    fig = tour_views.picture(material, stop, mask)
    row = tour_stops.verify_row(t, stop.step, at)
    f = attention_mask.pick_forward(t, stop.step, "verify")
    n = f.input_len // 2
    assert row == n + at - f.cache_len and f"outlined row {row} of the mask is the MASK copy of position {at}" in \
        stop.text
    assert len(fig.layout.shapes) == 1  # only the MASK copy's row, not the draft's
    assert f"row {row}, the MASK copy of position {at}" in fig.layout.title.text
    xs, ys = list(fig.data[0].x), list(fig.data[0].y)
    label = f"{row}: [M] @{at}"
    assert label in xs and label in ys  # the same number for a query's row and its column
    assert xs[0].startswith("cache (")  # the cache band carries no number


def test_material_without_the_tour_runs_leaves_their_stops_out(tmp_path):
    t = tf.mixed()
    m = tour.load_material(t, "x", None, None, tmp_path)
    assert m.lossless is None and m.edit is None
    keys = [s.key for s in tour.tour_stops(m)]
    assert "exact" not in keys and "edit" not in keys and keys[-1] == "run"
    lean = dataclasses.replace(t, steps=[dataclasses.replace(s, verification=dataclasses.replace(
        s.verification, positions=[])) if s.verification else s for s in t.steps])
    assert tour.tour_stops(lean)[0].key == "draft"  # a lean trace (no verification rows) still tours


def test_route_hints_hold_at_the_printed_thresholds(material):
    """"Raise it to X" / "lower it to Y": at exactly the printed value the recorded decision flips."""
    t = material.trace
    stop = next(s for s in tour.tour_stops(material) if s.key == "route")
    up = float(re.search(r"raise it to (−?[\d.]+) or above", stop.text).group(1))
    down = float(re.search(r"lower it to (−?[\d.]+) or below", stop.text).group(1))
    assert what_if(t, score_threshold=up).first_flip is not None
    assert what_if(t, score_threshold=down).first_flip is not None
    assert what_if(t, score_threshold=tau_control.recorded_tau(t)).first_flip is None
    # each hint names the score it moves past to 4 decimals (0.9997, not a "1.00" a reader would try and see no flip)
    low = min(s.decision.score for s in t.steps if s.decision is not None and s.decision.verify)
    high = max(s.decision.score for s in t.steps if s.decision is not None and not s.decision.verify)
    assert f"(the lowest score that verified is {low:.4f})" in stop.text
    assert f"(the highest score that skipped is {high:.4f})" in stop.text
