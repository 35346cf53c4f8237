"""The LLaDA2 editing loop on the batch-first engine (s2d2/decoding/lockstep_editing.py): each sequence's trace is
still its batch-1 trace.

The golden editing cases (both bundled LLaDA2 presets among them) run batch-first in tests/lib/test_batch_first.py;
here: every LLaDA2 preset on the bundled model, editing rows beside block-loop and AR rows in one batch, a
sequence's own StopDecoding at each kind of forward (it rolls back to its last block, alone). The step's shared work
does not grow with the batch: tests/lib/test_batch_first.py.
"""
from __future__ import annotations

from typing import Any

import pytest

import s2d2
from s2d2.decoding import batch as thread_engine
from s2d2.decoding import lockstep_editing
from s2d2.decoding.lockstep import covers, loop_for
from tests.support.batch_cases import StopsOne, assert_batch_equals_single, batch_prompts, model64
from tests.support.golden_cases import PROMPTS, bundled_available
from tests.support.tiny_models import tiny_qwen3
from tests.support.trace_compare import trace_mismatch

EDIT_S2D2 = s2d2.DecodeConfig(loop="editing", method="s2d2", policy="always", block_length=4, gen_length=16,
                              temperature=1.0, confidence_threshold=0.7, editing_threshold=0.5)


def _no_threads(monkeypatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the thread engine ran")

    monkeypatch.setattr(thread_engine.Scheduler, "run", refuse)


def test_the_editing_loop_is_batch_first_on_position_aligned_models_only():
    assert covers(EDIT_S2D2, model64("aligned")) and loop_for(EDIT_S2D2, model64("aligned")) is lockstep_editing
    assert not covers(EDIT_S2D2, model64("shifted"))  # the loop refuses right-shifted models (threads say so)


@pytest.mark.slow
@pytest.mark.parametrize("preset", ["llada2-static", "llada2-dynamic", "llada2-dynamic-edit", "llada2-quality-noedit"])
def test_every_llada2_preset_decodes_batch_first_on_the_bundled_model_as_alone(preset, monkeypatch):
    if not bundled_available("llada2"):
        pytest.skip("the bundled LLaDA2 model is not trained yet")
    _no_threads(monkeypatch)
    cfg = s2d2.preset(preset).replace(gen_length=32)
    assert_batch_equals_single(model64("llada2"), batch_prompts("llada2", "q"), cfg, [0, 1, 2, 3, 4], batch_size=3,
                               detailed=False)


def test_editing_rows_share_the_step_with_block_loop_and_ar_rows(monkeypatch):
    """Four loops' rows in one batch-first decode (editing S2D2, editing baseline, the block loop, AR), each
    sequence as alone; fewer slots than prompts, so rows of every loop leave and join."""
    _no_threads(monkeypatch)
    cfgs = [EDIT_S2D2, EDIT_S2D2.replace(method="diffusion", remasking="low_confidence_dynamic"),
            s2d2.preset("sdar-config-a", gen_length=16, block_length=4), s2d2.DecodeConfig(method="ar", gen_length=12),
            EDIT_S2D2.replace(policy="score_threshold", score_threshold=1.0, temperature=0.0)]
    prompts = [PROMPTS["a"], PROMPTS["b"], [7, 8, 9], PROMPTS["c"], PROMPTS["a"]]
    assert_batch_equals_single(model64("aligned"), prompts, cfgs, [3, 1, 4, 1, 5], batch_size=3)


@pytest.mark.parametrize("rule", ["low_confidence_static", "low_confidence_dynamic", "sequential", "entropy_bounded"])
def test_every_remasking_rule_with_edits_and_post_steps_decodes_batch_first_as_alone(rule, monkeypatch):
    """The fallback's rule over all non-verifying rows at once (its batch form; entropy-bounded per row), with
    edits and mask-free post steps, greedy and sampled rows, S2D2 and baseline rows of the same rule."""
    _no_threads(monkeypatch)
    # an unsharpened random model: its sampled drafts differ from decoded tokens, each with p > 0 (τ_edit 0)
    base = EDIT_S2D2.replace(remasking=rule, max_post_steps=2, editing_threshold=0.0, eb_gamma=0.5)
    cfgs = [base.replace(method="diffusion"), base.replace(policy="score_threshold", score_threshold=2.0),
            base.replace(method="diffusion", temperature=0.0), base, base.replace(method="diffusion")]
    prompts = [PROMPTS["a"], PROMPTS["b"], [7, 8, 9], PROMPTS["c"], PROMPTS["a"]]
    results = assert_batch_equals_single(tiny_qwen3(seed=2), prompts, cfgs, [0, 1, 2, 3, 4], batch_size=4)
    steps = [s for r in results for s in r.trace.steps]
    assert any(s.edits for s in steps) and any(not s.masks_before for s in steps)  # edits and post steps ran


@pytest.mark.parametrize("kind", ["draft", "verify_2l", "commit"])
def test_an_editing_sequences_own_stop_rolls_back_as_generate_does(kind):
    """A sequence's own StopDecoding at its draft, its 2L verifier or its commit ends it alone ("cancelled"), back
    to its last complete block, as `generate` ends it; the others decode as alone."""
    base = model64("aligned")
    prompts = [[5, 6, 7], PROMPTS["b"], [8, 9]]
    kinds = [f.kind for f in s2d2.generate(base, prompts[0], EDIT_S2D2, seed=0).trace.forwards]
    n = kinds.index(kind, 2) + 1  # (past the first block's start: a later block's forward of that kind)
    got = s2d2.generate_batch(StopsOne(base, 5, n), prompts, EDIT_S2D2, [0, 1, 2], batch_size=3,
                              engine="batch-first")
    want = s2d2.generate(StopsOne(base, 5, n), prompts[0], EDIT_S2D2, seed=0)
    assert got[0].trace.footer.finish_reason == "cancelled" == want.trace.footer.finish_reason
    assert got[0].token_ids == want.token_ids and got[0].metrics["nfe"] == want.metrics["nfe"] < len(kinds)
    assert trace_mismatch(got[0].trace, want.trace) is None
    for i in (1, 2):
        assert got[i].token_ids == s2d2.generate(base, prompts[i], EDIT_S2D2, seed=i).token_ids
