"""Unit tests of the app's pure views (canvas, strip, figures, mask viewer, replay) on synthetic traces."""
from __future__ import annotations

from dataclasses import replace
import html
import json

import pytest

from fixtures import trace_factory as tf
from fixtures.trace_factory import V

from components.escape import md_text
from components.views import canvas
from components.views import describe
from components.views import figures
from components.views import attention_mask
from components.views import step_views
from components.views import verify_strip
from components.views import token_detail
from components.views import trace_index
import s2d2
from s2d2.config import preset  # noqa: E402
from s2d2.trace import PolicyDecision, Trace  # noqa: E402
from tests.support.batch_cases import model64


def _no_bdata(fig) -> bool:
    return "bdata" not in json.dumps(fig.to_plotly_json(), default=str)


# -- factory -----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(tf.SCENARIOS))
def test_factory_traces_are_valid_and_replay(name):
    t = tf.SCENARIOS[name]()
    back = Trace.from_json(t.to_json())
    assert back.replay() == t.footer.output_ids
    for s in range(len(t.steps) + 1):  # every view renders at every step
        out = step_views.render_step(t, s)
        assert list(out) == list(step_views.STEP_VIEWS) and isinstance(out["canvas"], str)
        assert isinstance(out["summary"], str) and _no_bdata(out["routing"]) and _no_bdata(out["mask"])
    assert all(_no_bdata(f) for f in step_views.render_timelines(t, 1))


# -- canvas ------------------------------------------------------------------------------------------------------

def test_canvas_states_and_glyphs():
    t = tf.reject_at_zero()  # prompt 0..3; step 1: reject at span 0 (pos 4 resampled); step 2 accepts 5..7
    idx = canvas.index_of(t)
    assert canvas.position_state(idx, 0, 2) == ("prompt", False)
    assert canvas.position_state(idx, 0, 4) == ("masked", False)
    assert canvas.position_state(idx, 1, 4) == ("resampled", True)
    assert canvas.position_state(idx, 1, 5) == ("discarded", False)  # verified after the first rejection
    assert canvas.position_state(idx, 1, 5, before_commit=True) == ("drafted", False)
    assert canvas.position_state(idx, 2, 4) == ("resampled", False)
    assert canvas.position_state(idx, 2, 6) == ("accepted", True)
    html = canvas.render_canvas(t, 1)
    assert 'class="tok st-resampled new"' in html and "↻" in html
    assert "<s>" in html  # the rejected draft is shown struck through
    assert 'class="blk cur"' in html
    assert html.count('data-pos="') == 8
    assert "p=" in canvas.tooltip(idx, 1, 5) and "-> rejected" in canvas.tooltip(idx, 1, 4)
    assert "-> discarded (after the first rejection: it was checked with" in canvas.tooltip(idx, 1, 5)
    # the tour's draft moment (before the step checks and commits) tells nothing that moment does not know yet
    for pos in (4, 5):
        early = canvas.tooltip(idx, 1, pos, before_commit=True)
        assert "drafted: the model's guess, not checked or written yet" in early and "p=" in early
        assert not any(word in early for word in ("discard", "reject", "verify", "q=", "committed"))
    early_html = canvas.render_canvas(t, 1, before_commit=True)
    assert "discard" not in early_html and "reject" not in early_html


def test_canvas_collapses_later_blocks_and_outlines_current():
    t = tf.mixed()
    html = canvas.render_canvas(t, 1)
    assert "positions in later blocks" in html
    cur = html.split('class="blk cur"')[1].split("</span></span>")[0]
    assert 'data-pos="4"' in cur and 'data-pos="7"' in cur and 'data-pos="8"' not in cur
    full = canvas.render_canvas(t, len(t.steps))
    assert "later blocks" not in full
    assert full.count("st-accepted") == 4 and full.count("st-threshold") == 3 and full.count("st-fallback") == 1


def test_canvas_escapes_hostile_text():
    t = tf.hostile()
    for s in range(len(t.steps) + 1):
        html = canvas.render_canvas(t, s) + verify_strip.render_strip(t, s)
        assert "<script" not in html and "<b>bold" not in html and 'onmouseover="x' not in html
        assert "\u202e" not in html
    assert "&lt;script&gt;" in canvas.render_canvas(t, len(t.steps), show_future=True)
    assert canvas.visible_text("a\nb\tc\u202e") == "a⏎b⇥c\\u202e"
    assert canvas.visible_text("  ") == "␣␣" and canvas.visible_text(" a") == " a" and canvas.visible_text("") == "∅"


def test_live_preview_orders_by_position_and_escapes():
    html = canvas.render_live([[5, "<i>", "accepted"], [4, "x", "resampled"]], prompt="Q?")
    assert html.index('data-pos="4"') < html.index('data-pos="5"')
    assert "&lt;i&gt;" in html and "<i>" not in html


# -- verification strip ------------------------------------------------------------------------------------------

def test_strip_rows_reject_at_zero():
    t = tf.reject_at_zero()
    rows = verify_strip.strip_rows(t.steps[0])
    assert len(rows) == 4 and rows[0]["outcome"] == "reject" and rows[0]["first_reject"]
    assert rows[0]["u"] >= rows[0]["ratio"]
    assert rows[0]["resampled"] == t.steps[0].verification.resampled_text
    # later positions passed their own test (u < r) but come after the first rejection: discarded
    assert [r["outcome"] for r in rows[1:]] == ["after"] * 3 and all(r["passed"] for r in rows[1:])
    html = verify_strip.render_strip(t, 1)
    assert "first rejection at i = 0 (the 1st draft checked)" in html
    assert "✗ reject (first)" in html and "(q − p)+" in html
    assert html.count('<td class="discarded">discarded</td>') == 3 and html.count("after ✗ (u &lt; r)") == 3 and "✓ accept" not in html


def test_strip_all_accepted_and_modes():
    t = tf.all_accepted()
    rows = verify_strip.strip_rows(t.steps[0])
    assert [r["outcome"] for r in rows] == ["accept"] * 4 and all(r["u"] < r["ratio"] for r in rows)
    assert "whole span passed" in verify_strip.render_strip(t, 1)
    assert "drawn from q" in verify_strip.render_strip(tf.residual_fallback_to_q(), 1)
    assert "x₀ == argmax q" in verify_strip.render_strip(tf.greedy_exact(), 1)
    assert "No verification at this step" in verify_strip.render_strip(tf.diffusion_only(), 1)
    assert "Start of the run" in verify_strip.render_strip(t, 0)


# -- figures -----------------------------------------------------------------------------------------------------

def test_commit_map_points():
    t = tf.reject_at_zero()
    fig = figures.commit_map(t, 1)
    by_name = {tr.name: tr for tr in fig.data}
    assert list(by_name["resampled"].y) == [4] and list(by_name["resampled"].x) == [3]
    assert list(by_name["accepted"].y) == [5, 6, 7] and list(by_name["accepted"].x) == [5, 5, 5]
    assert any(sh["x0"] == 3 for sh in fig.layout.shapes)  # the current step line


def test_nfe_by_block_counts_and_tpf():
    t = tf.all_accepted()
    fig = figures.nfe_by_block(t)
    bars = {tr.name: list(tr.y) for tr in fig.data if tr.type == "bar"}
    assert bars == {"draft": [1], "verify (2L)": [1], "commit (cache the block)": [1]}  # in words, not kind ids
    tpf = next(tr for tr in fig.data if tr.type == "scatter")
    assert list(tpf.y) == [pytest.approx(4 / 3, abs=1e-3)]
    assert "prefill: 1" in fig.layout.title.text
    # tokens written past the answer's end are not the answer's: 2 of the 4 here, as the metrics table counts
    short = replace(t, footer=replace(t.footer, generated_length=2))
    line = next(tr for tr in figures.nfe_by_block(short).data if tr.type == "scatter")
    assert list(line.y) == [pytest.approx(2 / 3, abs=1e-3)] and line.name == "answer tokens / forward"


def test_acceptance_histogram_and_per_position():
    t = tf.mixed()  # verify calls: K=0 (span 2), K=2 (span 2), K=0 (span 4), K=2 (span 2)
    assert figures.acceptance_lengths(t) == [0, 2, 0, 2]
    hist = figures.acceptance_histogram(t)
    assert list(hist.data[0].x) == [0, 1, 2] and list(hist.data[0].y) == [2, 0, 2]
    pp = figures.per_position_acceptance(t)
    assert pp["rate"][:2] == [0.5, 0.5]
    assert pp["conditional"][2] == 0.0 and pp["index"] == [0, 1, 2, 3]


def test_routing_hysteresis_band_and_markers():
    t = tf.hysteresis_flip()
    data = figures.routing_series(t)
    assert data["verify"] == [False, True, True, False, False]
    assert data["score"] == [0.5, 1.5, 0.2, -0.8, 0.9]
    fig = figures.routing_figure(t, 2)
    band = [s for s in fig.layout.shapes if s.type == "rect" and s.xref == "paper"]
    assert len(band) == 1 and (band[0].y0, band[0].y1) == (-0.5, 1.0)
    on = [s for s in fig.layout.shapes if s.type == "rect" and s.xref == "x"]
    assert sorted(s.x0 for s in on) == [1.5, 2.5]
    verify = next(tr for tr in fig.data if tr.name == "verify")
    assert list(verify.x) == [2, 3]
    assert any(s.type == "line" and s.x0 == 2 and s.line.width == 2 for s in fig.layout.shapes)


def test_routing_scores_for_span_and_ucb_policies():
    ucb = figures.routing_series(tf.ucb_first_visit())
    assert ucb["score"] == [None, None, pytest.approx(0.4)] and ucb["verify"] == [True, False, True]
    cfg = preset("sdar-config-b", block_length=4, policy="mask_span_length", min_span_length=2)
    span = figures.routing_series(tf.build_trace([[V("0"), V("111")]], config=cfg, prompt_len=4))
    assert span["score"] == [4.0, 3.0] and span["verify"] == [True, True]
    assert "UCB verify − UCB skip" in figures.routing_figure(tf.ucb_first_visit(), 1).layout.annotations[0].text


def test_routing_threshold_line_and_no_policy():
    t = tf.mixed()
    fig = figures.routing_figure(t, 0)
    lines = [s for s in fig.layout.shapes if s.type == "line" and s.xref == "paper"]
    assert lines and lines[0].y0 == 0.0
    diff = figures.routing_series(tf.diffusion_only())
    assert diff["score"] == [None] * 4 and diff["verify"] == [False] * 4


# -- attention masks ---------------------------------------------------------------------------------------------

def _torch_rows(mask, cache_len):
    return [[int(v) for v in row[cache_len:]] for row in mask.tolist()]


@pytest.mark.parametrize("n", [1, 3, 4])
def test_query_masks_match_library_builders(n):
    torch_masks = pytest.importorskip("s2d2.models.masks")
    assert attention_mask.query_mask("verify_2l", 2 * n, n, False) == _torch_rows(torch_masks.verify_2l_mask(5, n), 5)
    assert attention_mask.query_mask("verify_causal", n, n, False) == _torch_rows(torch_masks.causal_mask(5, n), 5)
    assert attention_mask.query_mask("draft", n, n, False, causal_prefix=n - 1) == _torch_rows(
        torch_masks.draft_mask(5, n, n - 1), 5)
    assert attention_mask.query_mask("prefill", 8, 4, False) == [[int(v) for v in r] for r in
                                                            torch_masks.block_causal_mask(8, 4).tolist()]
    assert attention_mask.query_mask("commit", n, n, True) == _torch_rows(torch_masks.causal_mask(0, n), 0)


def test_mask_figure_picks_forwards():
    t = tf.mixed()  # step 1 verifies (2L), step 2 skips
    assert attention_mask.pick_forward(t, 1).kind == "verify_2l"
    assert attention_mask.pick_forward(t, 1, "draft").kind == "draft"
    assert attention_mask.pick_forward(t, 2, "verify") is None
    assert attention_mask.pick_forward(t, 2, "commit").kind == "commit"
    assert attention_mask.pick_forward(t, 0).kind == "prefill"
    fig = attention_mask.mask_figure(t, 1)
    z = fig.data[0].z
    assert len(z) == 8 and len(z[0]) == 9  # 2L rows; cache band + 8 query columns
    assert list(z[-1]) == [1, 1, 0, 0, 0, 0, 0, 0, 0]  # row 0 (drawn last-to-first): cache + itself
    assert "2L" in fig.layout.title.text and _no_bdata(fig)
    # the picture's key in words (walk: nothing said what a filled cell is), and no bare "queries" or "MASK copies"
    assert attention_mask.MASK_KEY in fig.layout.title.text and "■" in attention_mask.MASK_KEY
    assert "queries" not in fig.layout.title.text and "MASK copies" not in fig.layout.title.text
    draft = attention_mask.mask_figure(t, 1, "draft")  # sdar-config-a has draft_ver: prompt tail rows are causal
    assert "the first 2 rows (decoded already) read causally" in draft.layout.title.text
    assert "No verify forward" in attention_mask.mask_figure(t, 2, "verify").layout.title.text


# -- replay summary and metrics ----------------------------------------------------------------------------------

def test_step_summary_text():
    t = tf.mixed()
    assert step_views.step_summary(t, 1).startswith("Step 1 of 7 (answer block 1): verify ON — 2 drafted, 1 resampled; "
                                                "3 forwards so far.")
    assert "verify OFF" in step_views.step_summary(t, 2) and "1 confident (p > τ_conf = 0.85, the confidence threshold)" in step_views.step_summary(t, 2)
    assert step_views.step_summary(t, 0).startswith("Start: a prompt of 6 tokens, 1 forward so far")
    assert step_views.step_summary(t, 999) == step_views.step_summary(t, 7)
    assert step_views.step_summary(t, "junk") == step_views.step_summary(t, 0)


def test_numbers_on_screen_are_true_as_printed():
    t = tf.mixed()
    # answer blocks count from 1 whatever the engine's index of the first decoding block
    first = t.blocks[0].index
    assert step_views.step_summary(t, 1).startswith("Step 1 of 7 (answer block 1)")
    t.blocks = [type(b)(b.index + 2, b.start, b.length, b.prompt_tail) for b in t.blocks]
    for s in t.steps:
        s.block += 2
    assert step_views.step_summary(t, 1).startswith("Step 1 of 7 (answer block 1)") and first + 2 == t.blocks[0].index
    # comparisons are printed with the precision that decides them
    assert trace_index.decisive(1.9987, 2.0) == ("1.999", "2.000")  # the fewest decimals that tell them apart
    assert trace_index.decisive(-0.00001, 1.5) == ("−0.00001", "1.50000")
    assert trace_index.decisive(2.0, 2.0) == ("2.00", "2.00") and trace_index.decisive(3.0, 1.0) == ("3.00", "1.00")
    d = PolicyDecision("score_threshold", False, 1.9987, "s = 2.00 < τ 2.00 → skip",
                       {"k_hat": 1.9987, "score": 1.9987, "score_type": "difference_static", "penalty_coef": 0.0,
                        "n_hi": 0, "score_threshold": 2.0})
    assert describe.decision_line(d) == "s = K̂ − c = 1.999 − 0 = 1.999 < τ_score 2.000 → skip"
    hostile = PolicyDecision("score_threshold", False, 1.9987, "recorded reason", {**d.details, "penalty_coef": ""})
    assert describe.decision_line(hostile) == "recorded reason"  # an upload's free-form details: never a crash
    # the skipped step's line in "This step in numbers" reprints it the same way, never "-0.00 < τ 0.00"
    step = next(s for s in t.steps if s.verification is None)
    step.decision = PolicyDecision("score_threshold", False, -0.0001, "s = K̂ − c = 1.00 − 1 = -0.00 < τ 0.00 → skip",
                                   {**d.details, "k_hat": 0.9999, "score": -0.0001, "penalty_coef": 1.0,
                                    "score_threshold": 0.0})
    line = verify_strip.summary_line(step)
    assert line.startswith("No verification at this step (s = K̂ − c = 0.9999 − 1 = −0.0001 < τ_score 0.0000 → skip)")
    # integer ticks on the routing panel's step axis
    fig = figures.routing_figure(t, 1)
    assert fig.layout.xaxis.dtick == 1 and fig.layout.xaxis.tickformat == "d"
    # a one-line definition next to the metrics that need one
    rows = {r[0]: r for r in step_views.metrics_table(tf.mixed())}
    assert "bonus token" in rows["mean acceptance length (vLLM)"][2]
    assert "resampled" in rows["tokens per verify (S2D2)"][2]


def _with_stop_token(t: Trace, offset: int) -> Trace:
    """The trace with its output token `offset` replaced by the stop id (footer recomputed)."""
    from s2d2.output import trim_output

    pos = len(t.header.prompt_ids) + offset
    for s in t.steps:
        for c in s.commits:
            if c.position == pos:
                c.token, c.text = tf.STOP_ID, "<|im_end|>"
    ids = t.canvas_at()[len(t.header.prompt_ids):]
    out, stop = trim_output(ids, t.header.gen_length, tf.MASK_ID, [tf.STOP_ID])
    t.footer.output_ids, t.footer.stop_position, t.footer.generated_length = out, stop, len(out)
    return Trace.from_json(t.to_json())


def test_after_the_end_is_greyed():
    t = _with_stop_token(tf.mixed(), 3)
    idx = canvas.index_of(t)
    end = idx.end_position
    assert end is not None
    later = [c.position for s in t.steps for c in s.commits if c.position > end]
    stop_step = idx.commit_of[end][0] + 1
    full = canvas.render_canvas(t, len(t.steps), show_future=True)
    assert full.count("after-end") == len(later) > 0 and "end-tok" in full
    assert all(not idx.after_end(stop_step - 1, p) for p in later)  # not before the stop token is committed
    assert "after the end" in canvas.legend_html(t)
    live = canvas.render_live([[9, "a", "accepted", 5], [8, "<end>", "accepted", 297], [10, "b", "accepted", 6]],
                              stop_ids=[297, 298])
    assert live.count('class="tok st-accepted after-end"') == 2 and 'st-accepted end-tok" data-pos="8"' in live


def test_canvas_before_commit_and_colour_switch():
    t = tf.reject_at_zero()  # step 1 drafts 4..7, rejects 4 and resamples it
    draft = canvas.render_canvas(t, 1, before_commit=True, highlight=4)
    assert draft.count("st-drafted") == 4 and "st-resampled" not in draft and 'data-watch="1"' in draft
    after = canvas.render_canvas(t, 1)
    assert "st-resampled" in after
    shaded = canvas.render_canvas(t, 1, color_by="q")
    assert "rgba(79,70,229," in shaded  # q of every verified position
    assert "repeating-linear-gradient" in canvas.render_canvas(tf.diffusion_only(), 1, color_by="q")  # none: hatched
    assert "background = q" in canvas.legend_html(t, "q")
    legend = canvas.legend_html(t)
    assert "current block (outlined)" in legend and "autoregressive" not in legend  # only the states this trace uses
    # the │ between blocks is keyed too, and a tour picture keys it only where its canvas draws one
    assert ("│" in legend) == (sum(b.start >= len(t.header.prompt_ids) for b in t.blocks) >= 2)
    assert "where the next block starts" in canvas.legend_html(tf.large(48)) and "│" in canvas.legend_html()
    # a first block that starts inside the prompt (blocks count from the text's start) is said where the ring is keyed
    tail = "so the first holds the prompt's end"
    assert (tail in html.unescape(legend)) == (t.blocks[0].prompt_tail > 0)
    tailed = replace(t, blocks=[replace(t.blocks[0], prompt_tail=2), *t.blocks[1:]])
    assert tail in html.unescape(canvas.legend_html(tailed))
    assert "│" not in canvas.legend_html(t, only={"accepted"}) and "│" in canvas.legend_html(t, only={"sep"})


@pytest.mark.parametrize("which", ["auto", "draft", "verify", "commit"])
def test_the_unvalidated_mask_heatmap_is_what_plotly_validates(which):
    """attention_mask.mask_heatmap skips Plotly's per-cell checks: the figure's JSON must be exactly what the same
    figure gives when Plotly validates every value (a Plotly that changed what `_validate=False` keeps fails here)."""
    import plotly.graph_objects as go

    for trace in (tf.mixed(), tf.large(48)):
        for step in range(len(trace.steps) + 1):
            fig = attention_mask.mask_figure(trace, step, which)
            assert json.loads(fig.to_json()) == json.loads(go.Figure(fig.to_dict()).to_json()) and _no_bdata(fig)


def test_mask_viewer_outlines_the_selected_position():
    t = tf.mixed()
    f = attention_mask.pick_forward(t, 1)
    rows = attention_mask.row_positions(f)
    assert f.kind == "verify_2l" and rows[: len(rows) // 2] == rows[len(rows) // 2:]
    fig = attention_mask.mask_figure(t, 1, "auto", rows[1])
    assert len(fig.layout.shapes) == 2 and f"outlined: position {rows[1]}" in fig.layout.title.text
    assert not attention_mask.mask_figure(t, 1).layout.shapes


def test_markdown_from_files_is_inert():
    assert md_text("<img src=x onerror=alert(1)> [a](javascript:x) 'q'") == (
        "&lt;img src=x onerror=alert\\(1\\)&gt; \\[a\\]\\(javascript:x\\) &#x27;q&#x27;")
    t = tf.mixed()
    t.header.model.name = "**<b>x</b>**"
    assert step_views.trace_title(t).startswith("**\\*\\*&lt;b&gt;x&lt;/b&gt;\\*\\*** · s2d2")


def test_metrics_table_values():
    rows = {r[0]: r[1] for r in step_views.metrics_table(tf.all_accepted())}
    assert rows["forwards (NFE)"] == "4" and rows["generated tokens"] == "4"
    assert rows["verify rate"] == "1.000" and rows["forwards: verify_2l"] == "1"
    local = step_views.basic_metrics(tf.mixed())
    assert local["nfe"] == 15 and local["mean_acceptance_length"] == 2.0 and local["draft_acceptance_rate"] == 0.4


def test_candidates_cut_by_top_k_are_not_listed_as_top_candidates():
    """With top_k = 2 every recorded row has three candidates of probability exactly 0 (tokens the draw could never
    pick); the position's details and the strip's tooltips list only the two it could."""
    t = s2d2.generate(model64("aligned"), [5, 9, 17, 33], preset("sdar-config-b", temperature=1.0, top_k=2,
                                                                  gen_length=8), seed=0).trace
    step = next(i for i, s in enumerate(t.steps) if s.verification is not None)
    d, row = t.steps[step].drafts[0], t.steps[step].verification.positions[0]
    assert [c.prob == 0 for c in d.top] == [False, False, True, True, True]
    text = token_detail.tooltip(trace_index.index_of(t), step + 1, d.position)  # (scrubber value: after the step)
    listed = next(line for line in text.splitlines() if line.startswith("top p: "))
    assert listed.count("'") == 4 and " 0.00" not in listed  # two candidates, neither a zero
    strip = verify_strip.render_strip(t, step + 1)
    zero = next(c for c in d.top if c.prob == 0)
    shown = [html.escape(f"'{c.text}' {c.prob:.3f}", quote=True) for c in (d.top[0], zero)]  # (as the tooltip)
    assert shown[0] in strip and shown[1] not in strip
    assert sum(c.prob == 0 for c in row.top_q) >= 1


def test_a_finished_runs_last_step_says_its_tail_was_never_decoded():
    """The opening example ended on a stop token: at its last step the positions after that block are "never
    decoded", not "in later blocks" (a newcomer at "Step N of N" would wait for blocks that never come)."""
    from components.files.examples import first_example

    _, t = first_example()
    assert t is not None and t.footer.finish_reason == "stop_token"
    last = canvas.render_canvas(t, len(t.steps))
    assert "never decoded (the run had ended)" in last and "in later blocks" not in last
    assert "in later blocks" in canvas.render_canvas(t, 1)  # mid-run, later blocks do come


def test_tables_wider_than_a_phone_say_they_scroll_sideways():
    """The residual draw's table and the ledger's forward boxes carry the line a narrow screen shows (and the app's
    CSS shows it below NARROW_PX only)."""
    from components.files.examples import first_example, list_examples, load_pair
    from components.theme import CSS
    from components.views import ledger, residual
    from components.views.swipe_hint import NARROW_PX, SWIPE_CSS, swipe_hint

    label, t = first_example()
    _, base = load_pair(list_examples()[label])
    shown = [residual.residual_html(t, s) for s in range(len(t.steps) + 1)]
    assert any(swipe_hint() in h for h in shown if h) and all(swipe_hint() in h for h in shown if h)
    assert swipe_hint() in ledger.strips_html({"S2D2": t, "Diffusion alone": base})
    assert SWIPE_CSS in CSS and f"@media (max-width:{NARROW_PX}px){{.s2d2-swipe{{display:block}}}}" in SWIPE_CSS


def test_a_steps_cost_line_counts_the_answer_tokens_where_some_lie_past_its_end():
    """A verify step that accepted a whole block of 16 read "8.00 per forward" although 11 of the 16 followed the
    end mark: where tokens lie past the answer's end, the line says how many are in the answer and rates those."""
    from components.views.ledger import step_costs

    t = tf.all_accepted()  # prompt 4, one verified block: 4 tokens, draft + verify
    assert step_costs(t)[0].endswith("committed 4 tokens (4 accepted): 2.00 per forward.")
    t.footer.stop_position = 1  # the end mark at position 5: one token in the answer
    assert step_costs(t)[0].endswith("committed 4 tokens (4 accepted), 1 in the answer: 0.50 answer tokens per "
                                     "forward.")
