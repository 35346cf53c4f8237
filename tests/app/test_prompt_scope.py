"""components.views.prompt_scope: the bundled models' scope said, and a prompt outside it noticed (issue 28 row 2)."""
from __future__ import annotations

import pytest

from components.views.prompt_scope import (BUNDLED, close_to_taught, fits, fitting_prompts, is_bundled,
                                           real_checkpoints, scope_note)
from s2d2.tasks.arithmetic import heldout

OUTSIDE = ["Write a haiku about the sea", "It is a truth universally acknowledged, that", "What is 2 + 2?",
           "How many apples does Tom have now?"]


@pytest.mark.parametrize("model", ["tiny", "tiny-llada2"])
def test_a_prompt_outside_the_taught_kind_gets_one_line_and_a_held_out_question_none(model):
    for prompt in OUTSIDE:
        note = scope_note(prompt, model)
        assert note.startswith(f"⚠ **{model}** only knows two things: short arithmetic word problems")
        assert "Jane Austen's novels" in note and "\n" not in note
        assert note.endswith("Pick one of the example prompts under the box.")
    for problem in heldout(50):
        assert fits(problem.question) and scope_note(problem.question, model) == "", problem.question
        assert scope_note(f"  {problem.question}\n", model) == ""  # the box's stray whitespace does not matter


def test_a_word_problem_in_its_own_words_is_told_how_the_model_learned_them_not_warned_off():
    own = "Tom has 5 apples and buys 3 more. How many apples does he have now?"  # answered right in the walk
    assert not fits(own) and close_to_taught(own)
    note = scope_note(own, "tiny")
    assert note.startswith("ℹ **tiny** learned word problems worded exactly like the examples")
    assert "⚠" not in note and "muddle" not in note and "not a word problem" not in note
    assert not any(close_to_taught(p) for p in OUTSIDE)  # the prose and the bare questions are still warned


def test_other_models_and_empty_prompts_get_no_note():
    assert scope_note("Write a haiku about the sea", "JetLM/SDAR-1.7B-Chat") == ""
    assert scope_note("", "tiny") == "" and scope_note("   ", "tiny") == "" and scope_note(None, "tiny") == ""
    assert not fits(None) and not fits(42)
    assert is_bundled(" tiny ") and not is_bundled("tiny-x") and not is_bundled(None)


def test_the_offered_prompts_fit_and_real_checkpoints_are_offered_only_with_a_gpu():
    offered = fitting_prompts(3)
    assert len(offered) == 3 and len(set(offered)) == 3 and all(fits(p) for p in offered)
    allowed = ["tiny", "tiny-llada2", "JetLM/SDAR-1.7B-Chat", "Efficient-Large-Model/Fast_dLLM_v2_1.5B"]
    assert real_checkpoints(allowed, gpu=False) == ()
    real = real_checkpoints(allowed, gpu=True)
    assert real == ("JetLM/SDAR-1.7B-Chat", "Efficient-Large-Model/Fast_dLLM_v2_1.5B") and not set(real) & set(BUNDLED)
    note = scope_note("Write a haiku", "tiny", real)
    assert "or a real checkpoint in Model (JetLM/SDAR-1.7B-Chat, Efficient-Large-Model/Fast_dLLM_v2_1.5B)" in note


def test_a_prompt_too_long_to_run_gets_only_the_length_line():
    """The box's own line says it must be shortened (config_check.py); a content warning beside it is noise."""
    from s2d2.limits import limits

    top = limits().max_prompt_chars
    text = ("Write a haiku about the sea. " * top)[:top]
    assert scope_note(text, "tiny").startswith("⚠ **tiny**")  # at the limit: it can run, so its content is judged
    assert scope_note(text + "x", "tiny") == "" and scope_note("x" * 50_000, "tiny") == ""
