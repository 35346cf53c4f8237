"""The D2F pipeline on the batch-first engine (s2d2/decoding/lockstep_pipeline.py): each sequence's trace is its
`generate` trace, apart from wall times, with the thread engine refusing to run.

Both D2F families (LLaDA, position-aligned with the 2L verifier; Dream, right-shifted with the causal verifier), in
float64: D2F alone and S2D2 on it with every knob of its verify branch (sampled and greedy acceptance, the residual
and its gates, the reference fallback, a policy that declines), prompts of different lengths and mixed seeds, fewer
slots than prompts; pipeline rows beside block-loop and AR rows in one batch; a sequence's own stop; and the step's
shared work (the drafts' distribution, the one read) does not grow with the batch.
"""
from __future__ import annotations

from typing import Any

import pytest
import torch

from fixtures import tiny_d2f as M
import s2d2
from s2d2.decoding import batch as thread_engine
from s2d2.decoding import lockstep_pipeline, lockstep_verify
from s2d2.decoding.lockstep import covers, loop_for
from tests.support.batch_cases import StopsOne, assert_batch_equals_single
from tests.support.trace_compare import trace_mismatch

PROMPTS = [[5, 9, 17, 33, 2, 71, 3], [4, 8], list(range(10, 40)), [5, 9, 17, 33, 2, 71, 3], [60, 61, 62]]
SEEDS = [0, 1, 2, 3, 11]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("batch-first-d2f")
    return {"llada": s2d2.load_model(M.write_llada(tmp / "llada"), device="cpu", dtype=torch.float64),
            "dream": s2d2.load_model(M.write_dream(tmp / "dream"), device="cpu", dtype=torch.float64)}


@pytest.fixture
def no_threads(monkeypatch):
    """The thread engine raises if used: what passes ran on the batch-first engine."""
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the thread engine ran")

    monkeypatch.setattr(thread_engine.Scheduler, "run", refuse)


def cfg_of(preset: str, **changes: Any) -> s2d2.DecodeConfig:
    return s2d2.preset(preset, block_length=4, gen_length=24, confidence_threshold=0.5, block_add_threshold=0.25,
                       **changes)


def test_every_d2f_preset_runs_the_pipeline_rows(models):
    for fam, model in models.items():
        for name in ("d2f", "d2f-s2d2", "d2f-s2d2-dream"):
            assert covers(s2d2.preset(name), model), (fam, name)
            assert loop_for(s2d2.preset(name), model) is lockstep_pipeline


SETTINGS = {
    "d2f": ("d2f", {}),
    "d2f-sampled-counter": ("d2f", dict(temperature=0.9, top_k=20, rng="counter")),
    "s2d2-sampled": ("d2f-s2d2", dict(policy="always", temperature=1.0, acceptance="sampled")),
    "s2d2-greedy-exact": ("d2f-s2d2", dict(acceptance="greedy_exact")),
    "s2d2-ucb": ("d2f-s2d2", dict(policy="contextual_bandit_ucb")),
    "s2d2-gates": ("d2f-s2d2", dict(policy="always", temperature=1.0, acceptance="sampled",
                                    verify_confidence_threshold=0.3, draft_confidence_threshold=0.2)),
    "s2d2-no-resample": ("d2f-s2d2-dream", {}),
    "s2d2-reference-fallback": ("d2f-s2d2", dict(pipeline_fallback="reference", policy="score_threshold",
                                                 score_threshold=1.5)),
}


@pytest.mark.parametrize("fam", ["llada", "dream"])
@pytest.mark.parametrize("name", list(SETTINGS))
def test_the_pipeline_decodes_batch_first_as_alone(models, fam, name, no_threads):
    preset, changes = SETTINGS[name]
    cfg = cfg_of(preset, **changes)
    batch = assert_batch_equals_single(models[fam], PROMPTS, cfg, SEEDS, batch_size=3)
    assert all(r.trace.steps for r in batch)
    if cfg.method == "s2d2" and name != "s2d2-reference-fallback":  # the verify branch really ran
        assert any(s.verification is not None for r in batch for s in r.trace.steps)


@pytest.mark.parametrize("fam", ["llada", "dream"])
def test_lean_traces_decode_batch_first_as_alone(models, fam, no_threads):
    cfg = cfg_of("d2f-s2d2", policy="always", temperature=1.0, acceptance="sampled")
    assert_batch_equals_single(models[fam], PROMPTS, cfg, SEEDS, batch_size=5, detailed=False)


def test_pipeline_rows_share_a_batch_with_block_loop_and_ar_rows(models, no_threads):
    model = models["llada"]
    cfgs = [cfg_of("d2f-s2d2", policy="always", temperature=1.0, acceptance="sampled"),
            s2d2.DecodeConfig(method="ar", gen_length=12),
            s2d2.DecodeConfig(method="s2d2", gen_length=12, block_length=4, policy="always"),
            cfg_of("d2f"),
            s2d2.DecodeConfig(method="diffusion", gen_length=12, block_length=4)]
    batch = assert_batch_equals_single(model, PROMPTS, cfgs, SEEDS, batch_size=5)
    kinds = {f.kind for r in batch for f in r.trace.forwards}
    assert {"prefill+draft", "verify_2l", "draft"} <= kinds


@pytest.mark.parametrize("fam", ["llada", "dream"])
@pytest.mark.parametrize("n", [3, 6])
def test_a_pipeline_sequences_own_stop_rolls_back_as_generate_does(models, fam, n, no_threads):
    """StopsOne raises from the n-th forward of the sequence whose prompt starts with 5 (a step's forward or its
    verifier): it ends "cancelled" at its last complete step, as alone; the others decode on."""
    base = models[fam]
    prompts = [[5, 6, 7], [4, 8], [60, 61, 62]]
    cfg = cfg_of("d2f-s2d2", policy="always", temperature=1.0, acceptance="sampled")
    got = s2d2.generate_batch(StopsOne(base, 5, n), prompts, cfg, [0, 1, 2], batch_size=3, engine="batch-first")
    want = s2d2.generate(StopsOne(base, 5, n), prompts[0], cfg, seed=0)
    assert got[0].trace.footer.finish_reason == "cancelled" == want.trace.footer.finish_reason
    assert got[0].token_ids == want.token_ids and got[0].metrics["nfe"] == want.metrics["nfe"] < n
    assert trace_mismatch(got[0].trace, want.trace) is None
    for i in (1, 2):
        assert got[i].trace.footer.finish_reason != "cancelled"
        assert got[i].token_ids == s2d2.generate(base, prompts[i], cfg, seed=i).token_ids


@pytest.mark.parametrize("preset", ["d2f", "d2f-s2d2"])
def test_the_shared_work_of_a_pipeline_step_does_not_grow_with_the_batch(models, preset, monkeypatch):
    """The drafts' distribution and the one read run once per step for the whole batch: a batch of 6 copies of a
    prompt makes as many calls of each as a batch of 2 (S2D2: the verifiers' distribution too)."""
    calls: dict[str, int] = {}

    def counted(module: Any, name: str, key: str) -> None:
        real = getattr(module, name)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            calls[key] = calls.get(key, 0) + 1
            return real(*args, **kwargs)

        monkeypatch.setattr(module, name, wrapper)

    counted(lockstep_verify, "token_distribution", "drafts")
    counted(lockstep_verify, "fetch_many", "reads")
    counted(lockstep_pipeline, "token_distribution", "verifiers")
    cfg = cfg_of(preset, **(dict(policy="always") if preset != "d2f" else {}))
    per_size = []
    for n in (2, 6):
        calls.clear()
        s2d2.generate_batch(models["llada"], [PROMPTS[0]] * n, cfg, [0] * n, batch_size=n, detailed=False,
                            engine="batch-first")
        per_size.append(dict(calls))
    assert per_size[0] == per_size[1] and per_size[0]["drafts"] >= 4 and per_size[0]["reads"] >= 4
    assert (per_size[0].get("verifiers", 0) >= 2) == (preset != "d2f")


@pytest.mark.parametrize("fam", ["llada", "dream"])
def test_a_stop_right_after_a_residual_draw_keeps_the_drawn_token_in_the_trace(models, fam):
    """A Stop at the forward after a step whose residual token was still on the device: the kept step's record
    holds that token (its batch-1 loop used to return before reading it, leaving -1 in the trace; seen at the 7th
    and 11th forward of these decodes). Alone and in a batch."""
    cfg = cfg_of("d2f-s2d2", policy="always", temperature=1.0, acceptance="sampled")
    cancelled = 0
    for n in range(2, 14):
        alone = s2d2.generate(StopsOne(models[fam], 5, n), [5, 6, 7], cfg, seed=0)
        batch = s2d2.generate_batch(StopsOne(models[fam], 5, n), [[5, 6, 7], [4, 8]], cfg, [0, 1], batch_size=2)
        for trace in (alone.trace, batch[0].trace):
            assert all(c.token >= 0 for s in trace.steps for c in s.commits), n
            assert all(s.verification.resampled is not None for s in trace.steps
                       if any(c.how == "resampled" for c in s.commits)), n
        cancelled += alone.trace.footer.finish_reason == "cancelled"
    assert cancelled >= 6
