"""Issue 17 ("Teaching v2"), the Replay rows: every picture and sentence a newcomer meets on the first screen says
the same thing as the trace. Pure handlers on synthetic traces (fixtures/trace_factory.py) and the shipped examples."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from fixtures import trace_factory as tf

from components.views import canvas
from components.files import examples
from components.replay import handlers
from components.views import step_views
from components.views import verify_strip
from components.views import token_detail
from components.views.trace_index import index_of


def _tok(html: str, pos: int) -> str:
    return re.search(rf'<span class="([^"]*)" data-pos="{pos}"', html).group(1)


# -- row 1: discarded drafts look discarded wherever they are drawn ------------------------------------------------

def test_drafts_after_the_first_rejection_are_drawn_discarded():
    t = tf.reject_at_zero()  # step 1 verifies positions 4..7 and rejects at 4: 5..7 are thrown away
    html = canvas.render_canvas(t, 1)
    assert [_tok(html, p) for p in (5, 6, 7)] == ["tok st-discarded"] * 3
    assert "st-drafted" not in html.split('class="s2d2-legend"')[0]
    assert "discarded" in canvas.legend_html(t) and "discarded" not in canvas.legend_html(tf.all_accepted())
    # the moment before the step commits (the tour's draft picture), they are still just drafts
    assert _tok(canvas.render_canvas(t, 1, before_commit=True), 5) == "tok st-drafted"
    # the strip strikes the same drafts; the tooltip says why
    table = verify_strip.render_strip(t, 1)
    assert table.count("<s><code>") == 3 and table.count('class="discarded"') >= 3
    tip = canvas.tooltip(index_of(t), 1, 6)
    assert "checked with" in tip and "discarded draft" in tip


# -- row 13: the rejected column cuts the rest ----------------------------------------------------------------------

def test_the_first_rejection_cuts_the_rest_of_the_span():
    t = tf.reject_at_zero()
    table = verify_strip.render_strip(t, 1)
    band = re.search(r'<tr class="cut"><th></th><td colspan="(\d)"></td><td colspan="(\d)" class="cut-band">', table)
    assert band and band.groups() == ("1", "3")  # from the rejected column i = 0 to the end of the span
    assert "Everything after the first rejection (i = 1–3) is discarded" in table and "context of" in table
    assert "Everything after" not in verify_strip.render_strip(tf.all_accepted(), 1)
    one_after = tf.build_trace([[V("10"), V("11")]], prompt_len=4)  # reject at i = 1: nothing after it but i = 2..3
    assert "cut at i = 1" in verify_strip.render_strip(one_after, 1)


V = tf.V


# -- row 14: colour by q paints the token on screen ------------------------------------------------------------------

def test_colour_by_q_uses_the_probability_of_the_token_shown():
    t = tf.reject_at_zero()
    idx = index_of(t)
    v = t.steps[0].verification
    resampled = v.resampled
    expected_q = next(c.prob for c in v.positions[0].top_q if c.token == resampled)
    assert v.positions[0].q != expected_q  # the rejected draft's q is something else
    assert canvas.shade_value(idx, 1, 4, "q") == expected_q
    assert canvas.shade_value(idx, 1, 4, "r") is None  # a resampled token is never tested against r
    assert canvas.shade_value(idx, 1, 4, "p") is None  # not among the drafter's recorded candidates
    accepted = t.steps[1].verification.positions[0]
    assert canvas.shade_value(idx, 2, accepted.position, "q") == accepted.q


# -- row 4: the detail box follows the run and the step ----------------------------------------------------------------

def test_pinned_detail_follows_the_step_and_the_run():
    t = tf.reject_at_zero()
    at1 = token_detail.detail_html(t, 1, 4)
    assert "data-pinned=\"4\"" in at1 and "resampled" in at1
    assert "masked" in token_detail.detail_html(t, 0, 4)  # scrubbed back: the same position, as it was then
    views = step_views.render_step(t, 0, step_views.StepOptions(selected=4))
    assert "masked" in views["detail"]
    pair = next((e for e in examples.list_examples().values() if e.baseline is not None), None)
    if pair is None:
        pytest.skip("no shipped example pair")
    s2d2, base = examples.load_pair(pair)
    first = handlers.open_example(pair.label)
    v = s2d2.steps[first["slider"].value - 1].verification
    pos = v.positions[v.first_reject].position
    assert "resampled" in handlers.select_position(first["state"], first["slider"].value, "auto",
                                                   _Evt(pos))["detail"]
    other = handlers.open_example(pair.label, handlers.RUNS["baseline"], selected=pos)
    assert other["selected"] == pos and "resampled" not in other["detail"] and "rejected" not in other["detail"]
    assert base.steps[index_of(base).commit_of[pos][0]].commits and "confident diffusion pick" in other["detail"]


class _Evt:
    def __init__(self, pos: int) -> None:
        self._data = {"position": pos}


# -- row 2: the evidence at the rejection, zero taps away --------------------------------------------------------------

def test_the_detail_box_shows_the_evidence_at_the_rejected_token():
    t = tf.reject_at_zero()
    r = t.steps[0].verification.positions[0]
    box = token_detail.detail_html(t, 1, None)
    assert "The verifier rejected" in box and f"position {r.position}" in box
    assert all(x in box for x in ("p = ", "q = ", "r = min(1, q/p)", "u = ", "≥ r"))
    assert "the 3 drafts after it are discarded" in box
    assert token_detail.detail_html(t, 2, None) == token_detail.DETAIL_HINT  # no rejection at step 2


def test_the_strip_names_its_focus_column():
    t = tf.reject_at_zero()
    table = verify_strip.render_strip(t, 1)
    assert 'data-focus="4"' in table and 'data-col="4"' in table
    assert 'data-focus="6"' in verify_strip.render_strip(t, 1, focus=6)  # another view (the tour) picks its own
    assert "data-focus" not in verify_strip.render_strip(tf.all_accepted(), 1)
    assert 'data-focus="5"' in canvas.render_canvas(t, 1, focus=5)  # the canvas takes a focus the same way


# -- row 10: a run or an upload opens at the moment its headline names ------------------------------------------------

def test_an_upload_opens_at_the_step_its_headline_names(tmp_path):
    t = tf.mixed()
    path = tmp_path / "t.json"
    path.write_text(t.to_json())
    out = handlers.upload_trace(str(path))
    first = next(s for s in t.steps if s.verification and s.verification.first_reject is not None)
    assert out["slider"].value == first.index + 1 and "The verifier rejected" in out["detail"]
    shown = handlers.show_state(out["state"])
    assert shown["slider"].value == first.index + 1


# -- row 5: one name per quantity, defined where it first appears; one step numbering ---------------------------------

def _opening_pair():
    pair = next((e for e in examples.list_examples().values() if e.baseline is not None), None)
    if pair is None:
        pytest.skip("no shipped example pair")
    return examples.load_pair(pair)


def test_the_step_summary_names_every_quantity_once_with_one_step_numbering():
    t, _ = _opening_pair()  # a recorded score-threshold run: s = K̂ − c
    n = len(t.steps)
    text = step_views.step_summary(t, 2)
    assert text.startswith(f"Step 2 of {n} (answer block 2):") and "step 1" not in text.lower()
    assert "NFE" not in text and "forwards so far" in text
    assert "τ_score" in text and "τ_score = the score threshold" in text and " τ " not in text
    assert "c = penalty for the cost" in text and "K̂ = drafts the estimator expects" in text
    legend = canvas.legend_html(t)
    tau = t.header.config["confidence_threshold"]
    assert f"τ_conf = {tau:g}, the confidence threshold" in legend and "(p > τ)" not in legend
    tip = canvas.tooltip(index_of(t), 2, t.steps[1].commits[0].position)
    assert "of that block" not in tip  # one step numbering in the tooltip too
    routing = step_views.render_step(t, 2)["routing"]
    assert "τ_score" in routing.layout.annotations[-1].text and "K̂ − c" in routing.layout.annotations[0].text


# -- row 6: a method that never verifies gets a sentence, not empty axes ----------------------------------------------

def test_the_baseline_routing_panel_says_it_never_verifies():
    fig = step_views.render_step(tf.diffusion_only(), 1)["routing"]
    assert len(fig.data) == 0 and not fig.layout.xaxis.visible
    assert fig.layout.annotations[0].text.startswith("No routing: diffusion alone never verifies")
    assert len(step_views.render_step(tf.mixed(), 1)["routing"].data) > 0


# -- row 12: a generation length inside one block says it was rounded up to the block --------------------------------

def test_a_length_shorter_than_a_block_says_whole_blocks_were_decoded():
    from tests.support import tiny_models
    import s2d2
    from components.views import story
    from s2d2.config import preset

    model = tiny_models.tiny_qwen3(block_size=8)
    t = s2d2.generate(model, [10, 11, 12], preset("sdar-config-b", block_length=8, gen_length=1), seed=0).trace
    decoded = sum(b.length - b.prompt_tail for b in t.blocks)
    assert decoded > 1 and t.footer.generated_length <= 1
    line = story.single_story(t).text
    assert f"for {t.footer.generated_length} token" in line and "tokens (" not in line.replace("1 tokens", "")
    assert (f"generation length 1 was rounded up to the end of its block of 8, so {decoded} positions were decoded "
            "and the answer keeps at most the first 1") in line
    full = s2d2.generate(model, list(range(10, 17)), preset("sdar-config-b", block_length=8, gen_length=9), seed=0)
    assert "rounded up" not in story.single_story(full.trace).text  # 7 + 9 = 16 positions: two whole blocks


# -- row 11: messages that name the box and the fix; probabilities outside [0, 1] refused ------------------------------

def test_upload_messages_name_the_file_and_the_box_that_takes_it(tmp_path):
    import json

    from components.sweep import offered_files

    results = tmp_path / "results.json"
    results.write_text(json.dumps({"version": 1, "meta": {}, "cells": []}))
    out = handlers.upload_trace(str(results))["load_status"]
    assert out.startswith("⚠ results.json: This is a sweep results file") and "Sweep tab" in out
    assert "schema_version" not in out
    png = tmp_path / "picture.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)))
    out = handlers.upload_trace(str(png))["load_status"]  # its own message: the last file's error is gone
    assert out.startswith("⚠ picture.png: Not a trace: this is not a text file") and "results.json" not in out
    trace = tmp_path / "trace.json"
    trace.write_text(tf.mixed().to_json())
    with pytest.raises(ValueError, match="This is a trace, not a sweep results file: open it with the Replay tab"):
        offered_files.load_results_file(trace)


def test_probabilities_outside_zero_one_are_refused(tmp_path):
    import json

    from components.files import traces as traces_io

    data = tf.reject_at_zero().to_dict()
    data["steps"][0]["verification"]["positions"][0]["q"] = 5.0
    with pytest.raises(traces_io.TraceError, match=r"verification\.positions\[0\]\.q: must be <= 1\.0 \(got 5\.0\)"):
        traces_io.parse_text(json.dumps(data))
    data = tf.reject_at_zero().to_dict()
    data["steps"][0]["drafts"][0]["top"][0]["prob"] = -0.5
    with pytest.raises(traces_io.TraceError, match=r"prob"):
        traces_io.parse_text(json.dumps(data))


def test_a_pinned_token_is_told_in_words_before_its_numbers():
    """A newcomer who taps a token reads what stands there and how it got there in a sentence, then the numbers."""
    t = tf.reject_at_zero()  # prompt 4; step 1 rejects its first guess at position 4 and resamples it
    idx = index_of(t)
    v = t.steps[0].verification
    rejected = v.positions[v.first_reject]
    assert token_detail.pinned_words(idx, 1, 4) == (
        f"“{t.steps[0].commits[0].text}” was written at step 1: the check rejected the first guess here, "
        f"“{rejected.draft_text}”, and drew this token in its place.")
    assert token_detail.pinned_words(idx, 1, 5).endswith("then threw the guess away: it was checked after an "
                                                         "earlier guess that the check rejected.")
    assert token_detail.pinned_words(idx, 0, 4) == ("Still blank at this step: the model has not written this "
                                                    "position yet.")
    assert token_detail.pinned_words(idx, 2, 3).endswith("is part of the prompt: the model reads it and never "
                                                        "changes it.")
    box = token_detail.detail_html(t, 1, 4)
    words = box.index('class="words"')
    assert words < box.index("◉ position 4") and "resampled at first rejection" in box  # words, then the numbers
