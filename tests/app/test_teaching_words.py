"""Issue 28 row 7 (words): the start of a trace without a prefill forward says so instead of "0 forwards so far
(the prefill…)"; the what-if re-run names the thresholds it changed in the panel's words (never a raw dict) and
its sentences start with a capital; the shaded canvas picks its ink by contrast."""
from __future__ import annotations

import dataclasses

import pytest

from fixtures import trace_factory as tf
from components.views import canvas, step_views
from s2d2.whatif import what_if


def test_a_trace_without_a_prefill_forward_never_says_0_forwards_of_prefill():
    t = tf.mixed()
    assert step_views.step_summary(t, 0).startswith("Start: a prompt of 6 tokens, 1 forward so far (the prefill")
    t.forwards[:] = [dataclasses.replace(f, kind="draft") if f.kind == "prefill" else f for f in t.forwards]
    text = step_views.step_summary(t, 0)
    assert "0 forwards" not in text and "prefill, which reads" not in text
    assert text.startswith("Start: a prompt of 6 tokens, no forward yet")


def test_the_whatif_summary_starts_each_sentence_with_a_capital():
    t = tf.mixed()
    w = what_if(t, score_threshold=50.0)  # nothing verifies: the first verified step flips
    assert w.first_flip is not None
    sentences = [x.strip() for x in w.summary.split(". ") if x.strip()]
    assert all(x[0].isupper() or x[0].isdigit() for x in sentences), sentences
    assert "decision(s)" not in w.summary


def test_the_rerun_names_the_changed_thresholds_in_words():
    from components.compare.whatif_panel import changes_words

    t = tf.mixed()
    recorded = t.header.config["score_threshold"]
    said = changes_words(t, {"score_threshold": -5.0, "penalty_coef": float(t.header.config["penalty_coef"])})
    assert said == f"τ_score = −5 (recorded: {recorded:g})".replace("-", "−")
    assert "{" not in said and "penalty" not in said  # unchanged knobs are not listed
    assert changes_words(t, {"score_threshold": float(recorded)}) == "the recorded thresholds"


def test_the_shade_ink_contrasts_at_least_four_and_a_half_to_one():
    for v in [i / 100 for i in range(101)]:
        a = 0.08 + 0.87 * v
        lin = [(a * c + (1 - a) * 255) / 255 for c in (79, 70, 229)]
        lum = sum(w * (x / 12.92 if x <= 0.03928 else ((x + 0.055) / 1.055) ** 2.4)
                  for w, x in zip((0.2126, 0.7152, 0.0722), lin))
        ratio = 1.05 / (lum + 0.05) if canvas.shade_is_dark(v) else (lum + 0.05) / 0.05
        assert ratio >= 4.5, (v, ratio)


def test_the_metrics_panels_say_in_words_when_a_run_has_no_verify():
    """Issue 28 row 7: an AR or diffusion-only trace gets one sentence in the acceptance panels, not bare axes."""
    from components.views import figures

    for trace, why in ((tf.ar_trace(), "autoregressive decoding never drafts ahead"),
                       (tf.diffusion_only(), "diffusion alone never verifies")):
        assert not figures.verify_steps(trace)
        for fig in (figures.acceptance_histogram(trace), figures.per_position_figure(trace)):
            assert not fig.data and not fig.layout.xaxis.visible and not fig.layout.yaxis.visible
            words = fig.layout.annotations[0].text.replace("<br>", " ")
            assert "this run has no verify call" in words and why in words
    assert figures.acceptance_histogram(tf.mixed()).data  # a run with verify calls still draws its bars


@pytest.mark.parametrize("make", [tf.all_accepted, tf.ar_trace])
def test_after_a_run_the_picker_says_what_replay_shows_and_replay_opens_on_the_answer(make):
    """Issue 28 row 7: a run with no rejected draft and no edit opens on its last step (the finished answer), not
    on an empty step 0, and the blank Example picker's label says Replay shows the run."""
    from components.files.traces import make_state
    from components.replay import handlers

    trace = make()
    shown = handlers.show_state(make_state(trace, "run"), True)
    assert shown["slider"].value == len(trace.steps) > 0
    assert shown["example"]["value"] is None
    assert shown["example"]["label"] == "Example (none: Replay shows the run you recorded; pick one to open it)"
    opened = handlers.open_example(next(iter(handlers.list_examples(handlers.examples_dir()))))
    assert opened["example"]["label"] == "Example"  # an example puts the plain label back
