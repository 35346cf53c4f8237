"""components.views.plain_words: what a step did, in words, before any formula (issue 28 row 1)."""
from __future__ import annotations

import re

import pytest

from fixtures import trace_factory as tf
from components.files.examples import list_examples, load_pair
from components.views.plain_words import evidence_words, likelihood, step_words
from components.views.plural import plural
from components.views.token_state import visible_text

FORMULA = re.compile(r"[=≥≤τ]|\b[pqru] =|K̂|min\(")  # what the words must never show: the numbers are a tap away
QUOTED = re.compile(r"“[^”]*”")  # a quoted token is the model's text ("=" may be one), not a formula


def formula_in(words: str):
    return FORMULA.search(QUOTED.sub("", words))


def test_a_checked_step_names_the_guess_it_rejected_and_the_token_it_picked():
    t = tf.reject_at_zero()
    v = t.steps[0].verification
    r = v.positions[v.first_reject]
    words = step_words(t, 1)
    assert words.startswith("Step 1 of 2: the model guessed 4 tokens at once, then checked its own guesses")
    assert f"“{visible_text(r.draft_text, 16)}”" in words and f"picked “{visible_text(v.resampled_text, 16)}” instead" \
        in words
    assert "it kept none" in words and "threw away the 3 guesses after it" in words
    assert evidence_words(t, 1).startswith(f"The model first guessed “{visible_text(r.draft_text, 16)}” here.")


def test_every_outcome_has_its_sentence():
    assert step_words(tf.all_accepted(), 1).endswith("it kept all 4: every guess held up.")
    assert step_words(tf.all_accepted(), 0) == ("Before the first step: the model has read the prompt (4 tokens). "
                                               "Move the scrubber to watch it write the answer, 1 step in all.")
    mixed = tf.mixed()
    assert step_words(mixed, 1).endswith("threw away the guess after it (made assuming “ sat”).")
    assert step_words(mixed, 2).endswith("the model guessed one token and skipped the check (not worth an extra "
                                         "pass here); it kept it.")
    assert step_words(mixed, 3).endswith("it kept the 2 it was surest of.")
    assert "did not check them (diffusion alone never checks)" in step_words(tf.diffusion_only(), 1)
    assert "would not have written “ sat” itself" in step_words(tf.greedy_exact(), 1)
    assert step_words(tf.ar_trace(), 3) == "Step 3 of 6: the model wrote one token, reading the text left to right."


@pytest.mark.parametrize("name", sorted(set(tf.SCENARIOS) - {"hostile"}))
def test_words_come_before_formulas_and_evidence_only_where_a_guess_was_rejected(name):
    t = tf.SCENARIOS[name]()
    for s in range(len(t.steps) + 1):
        words = step_words(t, s)
        assert not formula_in(words), (s, words)
        rec = t.steps[s - 1] if s else None
        v = rec.verification if rec is not None else None
        rejected = v is not None and v.first_reject is not None and v.first_reject < len(v.positions)
        assert (evidence_words(t, s) is not None) == rejected, s


def test_likelihood_words_and_counts():
    assert [likelihood(q) for q in (None, 0.001, 0.1, 0.5)] == [
        "unlikely", "very unlikely", "unlikely", "less likely than the first guess assumed"]
    assert (plural(1, "step"), plural(7, "step")) == ("1 step", "7 steps")


def test_the_opening_example_says_what_the_model_guessed_and_picked():
    listed = list_examples()
    opening = listed.get("Verifier catches a wrong digit")
    if opening is None:
        pytest.skip("no shipped example pair")
    trace, _ = load_pair(opening)
    step = next(i + 1 for i, s in enumerate(trace.steps)
                if s.verification is not None and s.verification.first_reject is not None)
    v = trace.steps[step - 1].verification
    words = evidence_words(trace, step)
    guessed = visible_text(v.positions[v.first_reject].draft_text, 16)
    assert f"first guessed “{guessed}”" in words and f"picked “{visible_text(v.resampled_text, 16)}”" in words
    assert not formula_in(words)


def test_a_step_says_how_many_of_its_tokens_lie_past_the_end_of_the_answer():
    """A block is decoded whole, so "it kept all 4" counts tokens after the end mark too; the sentence says which
    of them the answer leaves out (a newcomer read "kept all 16" where 10 followed <|im_end|>)."""
    t = tf.all_accepted()  # prompt 4, one block of 4: positions 4-7
    assert "past the end" not in step_words(t, 1)
    t.footer.stop_position = 1  # the end mark at position 5: positions 5, 6 and 7 are left out
    words = step_words(t, 1)
    assert words.endswith("it kept all 4: every guess held up. 3 of them lie past the end of the answer, which "
                          "leaves them out."), words
    t.footer.stop_position = 0
    assert step_words(t, 1).endswith("All 4 lie past the end of the answer, which leaves them out.")
    t.footer.stop_position = 3
    assert step_words(t, 1).endswith("1 of them lies past the end of the answer, which leaves it out.")
    assert not formula_in(step_words(t, 1))
