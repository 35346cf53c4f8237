"""The options beyond the paper on the batch-first step (issue 37, s2d2/decoding/lockstep_block.py, block_state.py):
S2D2's trimmed verifier, cost-aware routing and adaptive block sizes, and KV reuse and fused commits (S2D2 and the
diffusion baselines).

Each runs in float64 inside a batch with fewer slots than prompts (finished sequences are replaced from the queue),
with `engine="batch-first"` named and the thread engine refusing to run, so a silent fall-back cannot pass; each
sequence's tokens, NFE and trace must equal its lone `generate` decode's (tests/support/trace_compare.py). Each test
also checks that its option really acted (a trimmed query, both routes, a changed block length, a cached row, a
fused forward).
"""
from __future__ import annotations

from typing import Any

import pytest

import s2d2
from s2d2 import DecodeConfig
from s2d2.decoding import batch as thread_engine
from s2d2.decoding.lockstep import covers
from s2d2.trace import CostTable, ForwardCost
from s2d2.trace.records import FORWARD_KINDS
from tests.support.batch_cases import StopsOne, assert_batch_equals_single, batch_prompts, model64
from tests.support.golden_cases import bundled_available
from tests.support.scripted_model import STOP, PositionScripted
from tests.support.trace_compare import trace_mismatch

PROMPTS = [list(range(5, 15)), [3, 1, 4, 1, 5, 9, 2, 6], list(range(40, 72)), [7, 8, 9], list(range(5, 15)),
           list(range(16))]
CACHED = dict(method="s2d2", cache_ver=True, draft_ver=True, block_length=8, gen_length=40)
ADAPTIVE = dict(adaptive_block=True, adaptive_min_block=2, adaptive_max_block=16)


@pytest.fixture(autouse=True)
def no_threads(monkeypatch) -> None:
    """The thread engine raises if used: what passes ran on the batch-first engine."""
    def refuse(*args, **kwargs):
        raise AssertionError("the thread engine ran")

    monkeypatch.setattr(thread_engine.Scheduler, "run", refuse)


def batch_equals_alone(family: str, cfgs: Any, costs: Any = None) -> list[Any]:
    """Decode PROMPTS batch-first (3 slots; `cfgs`: one config, or one per prompt) and each prompt alone; assert
    each sequence's tokens, NFE and trace are its lone decode's; return the batch's results."""
    model = model64(family)
    batch = s2d2.generate_batch(model, PROMPTS, cfgs, list(range(len(PROMPTS))), batch_size=3, costs=costs,
                                engine="batch-first")
    for i, (got, prompt) in enumerate(zip(batch, PROMPTS)):
        cfg = cfgs[i] if isinstance(cfgs, list) else cfgs
        want = s2d2.generate(model, prompt, cfg, seed=i, costs=costs)
        assert got.token_ids == want.token_ids and got.metrics["nfe"] == want.metrics["nfe"], f"sequence {i}"
        assert got.metrics["nfe_by_kind"] == want.metrics["nfe_by_kind"], f"sequence {i}"
        assert trace_mismatch(got.trace, want.trace) is None, f"sequence {i}: {trace_mismatch(got.trace, want.trace)}"
    return batch


@pytest.mark.parametrize("name", ["always-sampled", "threshold", "sub-blocks"])
@pytest.mark.parametrize("family", ["aligned", "shifted"])
def test_trimmed_and_full_verifiers_share_a_batch(family, name):
    """Trimmed verifiers (built per row, batch 1's `trimmed_verify_request`) beside full ones in one batch."""
    settings = {"always-sampled": dict(policy="always", temperature=1.0),
                "threshold": dict(policy="score_threshold", score_threshold=0.5, score_type="difference_static",
                                  penalty_coef=1.0, temperature=0.8),
                "sub-blocks": dict(policy="always", sub_block_length=4, temperature=1.0)}[name]
    cfgs = [DecodeConfig(method="s2d2", block_length=8, gen_length=24, trim_verify=k % 3 != 1, **settings)
            for k in range(len(PROMPTS))]
    batch = batch_equals_alone(family, cfgs)
    trimmed = [f for r, c in zip(batch, cfgs) if c.trim_verify for f in r.trace.forwards if f.kind.startswith("verify")]
    assert any(f.query_tokens < (16 if family == "aligned" else 8) for f in trimmed)


@pytest.mark.parametrize("family", ["aligned", "shifted"])
def test_cost_aware_routing_reads_the_batchs_frozen_table(family):
    """A made-up table whose verify is dear, so the routing has decisions to make: both routes are taken, and every
    trace records that table."""
    costs = CostTable("measured", 0, [ForwardCost(k, 0.0022 if k.startswith("verify") else 0.002, 1e-4, 10)
                                      for k in FORWARD_KINDS])
    base = dict(method="s2d2", policy="cost_aware", block_length=8, gen_length=24, cache_ver=True, draft_ver=True)
    cfgs = [DecodeConfig(**base, temperature=1.0, cost_skip_value="all"),
            DecodeConfig(**base, sub_block_length=4, cost_skip_value="all"),
            DecodeConfig(**base, trim_verify=True, cost_threshold=-0.5)]
    batch = batch_equals_alone(family, [cfgs[k % 3] for k in range(len(PROMPTS))], costs)
    assert all(r.trace.header.costs == costs for r in batch)
    assert {s.decision.verify for r in batch for s in r.trace.steps if s.decision is not None} == {True, False}


@pytest.mark.parametrize("policy", [dict(policy="always"), dict(policy="score_threshold", temperature=1.0),
                                    dict(policy="mask_span_length", trim_verify=True)],
                         ids=["always", "sampled", "trimmed"])
@pytest.mark.parametrize("family", ["aligned", "shifted"])
def test_adaptive_blocks_each_rows_own_rule(family, policy):
    batch = batch_equals_alone(family, DecodeConfig(**CACHED, **ADAPTIVE, **policy))
    assert len({b.length for r in batch for b in r.trace.blocks}) > 1  # the rule changed some block's length


@pytest.mark.parametrize("policy", [dict(policy="always"), dict(policy="score_threshold", temperature=1.0),
                                    dict(policy="mask_span_length", trim_verify=True),
                                    dict(policy="score_hysteresis", sub_block_length=4, temperature=0.8)],
                         ids=["always", "sampled", "trimmed", "sub-blocks"])
@pytest.mark.parametrize("family", ["aligned", "shifted"])
def test_kv_reuse(family, policy):
    """A draft queries only its block's uncached positions and keeps its decoded prefix, a verifier keeps its rows
    until the test settles them, a commit stores only the uncached tail, a block cached whole ends with no commit
    forward."""
    batch = batch_equals_alone(family, DecodeConfig(**CACHED, kv_reuse=True, **policy))
    blocks = [{b.index: b.start for b in r.trace.blocks} for r in batch]
    assert any(f.cache_len > starts[f.block] for r, starts in zip(batch, blocks) for f in r.trace.forwards
               if f.kind == "draft")  # some draft read rows of its own block from the cache


@pytest.mark.parametrize("options", [
    dict(policy="always"), dict(policy="score_threshold", temperature=1.0, kv_reuse=True),
    dict(policy="always", acceptance="greedy_exact", kv_reuse=True, trim_verify=True),
    dict(policy="score_hysteresis", sub_block_length=4, temperature=0.8, kv_reuse=True),
    dict(policy="mask_span_length", kv_reuse=True, **ADAPTIVE)],
                         ids=["fused", "sampled-reuse", "greedy-trimmed-reuse", "sub-blocks-reuse", "adaptive-reuse"])
@pytest.mark.parametrize("family", ["aligned", "shifted"])
def test_fused_commits(family, options):
    """A block's first forward stores the last block's tail and drafts the block, whose first draft step drafts from
    it (right-shifted: after the tail's last logit seeds the block); the last block is never committed."""
    batch = batch_equals_alone(family, DecodeConfig(**CACHED, fused_commit=True, **options))
    kinds = [r.metrics["nfe_by_kind"] for r in batch]
    assert any("commit+draft" in k for k in kinds) and not any("commit" in k for k in kinds)


@pytest.mark.parametrize("options", [dict(kv_reuse=True), dict(fused_commit=True),
                                     dict(kv_reuse=True, fused_commit=True, remasking="sequential", temperature=1.0),
                                     dict(kv_reuse=True, remasking="low_confidence_static")],
                         ids=["reuse", "fused", "both-sampled", "reuse-static"])
@pytest.mark.parametrize("family", ["aligned", "shifted"])
def test_the_diffusion_baselines_with_kv_reuse_and_fused_commits(family, options):
    batch = batch_equals_alone(family, DecodeConfig(**{**CACHED, "method": "diffusion"}, **options))
    kinds = [r.metrics["nfe_by_kind"] for r in batch]
    assert any("commit+draft" in k for k in kinds) == bool(options.get("fused_commit"))


@pytest.mark.parametrize("preset", ["sdar-config-b+trim", "sdar-config-b+adaptive", "sdar-config-b+all",
                                    "sdar-config-b+reuse+fused+trim", "sdar-config-b+cost-aware", "lossless"])
def test_every_beyond_the_paper_preset_on_the_bundled_model(preset):
    if not bundled_available("bundled"):
        pytest.skip("the bundled model is not trained yet")
    cfg = s2d2.preset(preset).replace(gen_length=32)
    assert covers(cfg, model64("bundled"))
    table = CostTable.nominal()  # (cost-aware: the same frozen table alone and in the batch)
    assert_batch_equals_single(model64("bundled"), batch_prompts("bundled", "q"), cfg, [0, 1, 2, 3, 4], batch_size=3,
                               detailed=False, costs=table)


def test_a_fused_seed_that_is_a_stop_id_ends_a_right_shifted_sequence_before_its_draft():
    """Right-shifted fused commits: a block's first forward seeds it from the tail's last logit, and the stop rule
    reads that seed before the block's first draft step (one shared read): a stop id there ends the sequence with
    the seed as its last step and the fused forward as its last forward, as alone."""
    model = PositionScripted("shifted", {12: STOP})
    cfg = DecodeConfig(method="s2d2", policy="always", block_length=4, gen_length=24, kv_reuse=True,
                       fused_commit=True, cache_ver=True, draft_ver=True)
    prompts = [[1, 2, 3, 4, 5, 6], [1, 2, 3], list(range(1, 11)), [1], list(range(1, 14))]
    batch = s2d2.generate_batch(model, prompts, cfg, list(range(5)), batch_size=3, engine="batch-first")
    stopped = 0
    for i, (got, prompt) in enumerate(zip(batch, prompts)):
        want = s2d2.generate(model, prompt, cfg, seed=i)
        assert got.token_ids == want.token_ids and got.metrics["nfe"] == want.metrics["nfe"], f"sequence {i}"
        assert trace_mismatch(got.trace, want.trace) is None, f"sequence {i}: {trace_mismatch(got.trace, want.trace)}"
        if got.trace.footer.finish_reason == "stop_token":
            assert [c.how for c in got.trace.steps[-1].commits] == ["ar_seed"]
            assert got.trace.forwards[-1].kind == "commit+draft"
            stopped += 1
    assert stopped == 4  # the prompts whose output reaches position 12


@pytest.mark.parametrize("family", ["aligned", "shifted"])
def test_a_stop_at_a_fused_forward_rolls_back_as_alone(family):
    """A sequence's own StopDecoding raised by its first commit+draft forward (KV reuse and fused commits) ends it
    "cancelled" at its last complete block, as alone; the others decode on untouched."""
    base = model64(family)
    prompts = [[5, 6, 7], [3, 1, 4, 1, 5, 9, 2, 6], [8, 9]]
    cfg = DecodeConfig(method="s2d2", policy="always", gen_length=16, block_length=4, temperature=1.0, kv_reuse=True,
                       fused_commit=True, cache_ver=True, draft_ver=True)
    kinds = [f.kind for f in s2d2.generate(base, prompts[0], cfg, seed=0).trace.forwards]
    n = kinds.index("commit+draft") + 1
    got = s2d2.generate_batch(StopsOne(base, 5, n), prompts, cfg, [0, 1, 2], batch_size=3, engine="batch-first")
    want = s2d2.generate(StopsOne(base, 5, n), prompts[0], cfg, seed=0)
    assert got[0].trace.footer.finish_reason == "cancelled" == want.trace.footer.finish_reason
    assert got[0].token_ids == want.token_ids and trace_mismatch(got[0].trace, want.trace) is None
    for i in (1, 2):
        assert got[i].token_ids == s2d2.generate(base, prompts[i], cfg, seed=i).token_ids
