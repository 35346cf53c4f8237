"""The batch-first engine (issue 37, s2d2/decoding/lockstep.py): one step for every live sequence, each sequence's
trace still its batch-1 trace.

Every golden case the engine covers runs in float64 inside a batch with fewer slots than prompts (finished
sequences are replaced from the queue), with `engine="batch-first"` named, so a silent fall-back to the thread
engine cannot pass for it; each trace must equal `generate`'s apart from wall times (tests/support/trace_compare.py).
Then: the engine is what `auto` picks exactly for the configs it covers; a step's forward carries every live
sequence; the ledger keeps the machine's own forwards, a failed shared one included; a sequence's own StopDecoding
ends it alone, "cancelled", as `generate` ends it.
"""
from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import torch

import s2d2
from s2d2.decoding import batch as thread_engine
from s2d2.decoding.lockstep import covers
from s2d2.decoding.result import StopDecoding
from tests.support.batch_cases import StopsOne, assert_batch_equals_single, batch_prompts, model64
from tests.support.golden_cases import CASES, PROMPTS, bundled_available, config_for
from tests.support.tiny_models import tiny_qwen2, tiny_qwen3
from tests.support.trace_compare import trace_mismatch

COVERED = [c for c in CASES if covers(config_for(c[1], c[4]), model64(c[1]))]


def test_the_engine_covers_golden_cases_of_both_families():
    assert {c[1] for c in COVERED} >= {"aligned", "shifted"} and len(COVERED) >= 3


def test_the_engine_covers_the_s2d2_golden_cases_of_position_aligned_models():
    """Every routing policy, every acceptance mode, extras, the SDAR presets and the options beyond the paper (KV
    reuse, fused commits, adaptive blocks): batch-first."""
    names = {c[0] for c in COVERED}
    assert names >= {"always", "always-sampled-S2", "threshold", "hysteresis", "ucb", "ucb-masks", "no-resample",
                     "no-resample-eb-S2", "extras", "extras-skip", "greedy-exact", "topk-topp-margin", "tiny-sdar-a",
                     "tiny-sdar-b", "tiny-sdar-b-sampled", "reuse-fused", "reuse-greedy-exact", "adaptive"}


def test_the_engine_covers_the_block_loop_golden_cases_of_right_shifted_models():
    """Fast-dLLM v2's loop (AR seeds, the mid-block stop rule, the causal verifier, sub-blocks) and the options
    beyond the paper (KV reuse, fused commits): every right-shifted golden case runs batch-first."""
    shifted = {c[0] for c in CASES if c[1] == "shifted"}
    assert {c[0] for c in COVERED} & shifted == {"s-diff", "s-always", "s-hysteresis-sub", "s-ucb-extras", "s-ar",
                                                 "s-reuse-fused"} == shifted


def _no_threads(monkeypatch) -> None:
    """The thread engine raises if used: what passes below ran on the batch-first engine."""
    def refuse(*args, **kwargs):
        raise AssertionError("the thread engine ran")

    monkeypatch.setattr(thread_engine.Scheduler, "run", refuse)


@pytest.mark.parametrize("case", COVERED, ids=[c[0] for c in COVERED])
@pytest.mark.parametrize("detailed", [True, False], ids=["detailed", "lean"])
def test_every_covered_golden_case_decodes_batch_first_as_alone(case, detailed, monkeypatch):
    name, model_name, key, seed, settings = case
    if model_name in ("bundled", "llada2") and not bundled_available(model_name):
        pytest.skip("a bundled model is not trained yet")
    _no_threads(monkeypatch)
    prompts = batch_prompts(model_name, key)
    cfg = config_for(model_name, settings)
    seeds = [seed, 7, seed + 11, 3, 12345]
    got = s2d2.generate_batch(model64(model_name), prompts, cfg, seeds, batch_size=3, detailed=detailed,
                              engine="batch-first")
    for i, (g, prompt, s) in enumerate(zip(got, prompts, seeds)):
        want = s2d2.generate(model64(model_name), prompt, cfg, seed=s, detailed=detailed)
        assert g.token_ids == want.token_ids and g.metrics["nfe"] == want.metrics["nfe"], f"sequence {i}"
        assert trace_mismatch(g.trace, want.trace) is None, f"sequence {i}: {trace_mismatch(g.trace, want.trace)}"


@pytest.mark.parametrize("rng", ["torch", "counter"])
@pytest.mark.parametrize("family", ["aligned", "shifted"])
def test_sampled_draws_are_each_sequences_own_seed(family, rng, monkeypatch):
    """Mixed seeds (one prompt twice under two seeds), sampling with top-k/top-p, both random sources."""
    _no_threads(monkeypatch)
    model = tiny_qwen3(seed=2) if family == "aligned" else tiny_qwen2(seed=2)  # unsharpened: draws really vary
    cfg = s2d2.DecodeConfig(method="ar", gen_length=16, temperature=0.9, top_k=20, top_p=0.95, rng=rng)
    prompts = [PROMPTS["a"], PROMPTS["b"], PROMPTS["a"], [7, 8, 9]]
    batch = assert_batch_equals_single(model, prompts, cfg, [4, 1, 9, 2], batch_size=4)
    assert batch[0].token_ids != batch[2].token_ids  # the same prompt under another seed really drew otherwise


def test_auto_picks_batch_first_for_every_config_that_decodes_and_threads_only_when_asked(monkeypatch):
    model = model64("aligned")
    ar = s2d2.DecodeConfig(method="ar", gen_length=8)
    s2d2_cfg = s2d2.DecodeConfig(method="s2d2", gen_length=8, block_length=4)
    pipeline = s2d2.preset("d2f", gen_length=8, block_length=4)
    sub_blocks = s2d2.DecodeConfig(method="diffusion", gen_length=8, block_length=4, sub_block_length=2)
    runs: list[str] = []
    real = thread_engine.Scheduler.run
    monkeypatch.setattr(thread_engine.Scheduler, "run", lambda self, *a, **k: runs.append("threads") or
                        real(self, *a, **k))
    s2d2.generate_batch(model, [[1, 2], [3]], ar, batch_size=2)
    s2d2.generate_batch(model, [[1, 2], [3]], [ar, s2d2_cfg], batch_size=2)
    s2d2.generate_batch(model, [[1, 2], [3]], [ar, pipeline], batch_size=2)
    s2d2.generate_batch(model, [[1, 2], [3]], [ar, sub_blocks], batch_size=2)
    assert runs == []
    s2d2.generate_batch(model, [[1, 2], [3]], ar, batch_size=2, engine="threads")
    assert runs == ["threads"]


def test_engine_refusals_are_one_readable_message():
    model = model64("aligned")
    with pytest.raises(ValueError, match="engine: one of auto, threads, batch-first"):
        s2d2.generate_batch(model, [[1, 2]], s2d2.DecodeConfig(method="ar", gen_length=4), engine="fast")
    with pytest.raises(ValueError, match="does not decode the LLaDA2 editing loop on a right-shifted model"):
        s2d2.generate_batch(model64("shifted"), [[1, 2]], s2d2.preset("llada2-dynamic", gen_length=4),
                            engine="batch-first")


def test_a_step_is_one_forward_carrying_every_live_sequence():
    """Equal prompt lengths: after the shared prefill, every step's one forward serves all four sequences, and the
    ledger accounts for every sequence-forward exactly once."""
    model = model64("shifted")
    prompts = [[1, 2, 3], [4, 5, 6], [7, 8, 9], [10, 11, 12]]
    cfg = s2d2.DecodeConfig(method="ar", gen_length=12)
    results = s2d2.generate_batch(model, prompts, cfg, batch_size=4, engine="batch-first")
    ledger = results[0].batch
    assert [len(f.sequences) for f in ledger.forwards] == [4] * 12
    assert ledger.live_rows() == [4] * 12
    assert ledger.summary()["mean_live"] == 4 and ledger.summary()["live_share"] == 1.0
    served = {(s, f) for bf in ledger.forwards for s, f in zip(bf.sequences, bf.seq_forwards)}
    assert served == {(i, f.index) for i, r in enumerate(results) for f in r.trace.forwards}
    for bf in ledger.forwards:
        for s, f in zip(bf.sequences, bf.seq_forwards):
            assert results[s].trace.forwards[f].wall_s == bf.wall_s


class FailingShared:
    """The model, but every shared (batched) forward raises: each member must be served by its lone retry."""

    def __init__(self, model: Any) -> None:
        self._model = model

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)

    def forward(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        return self._model.forward(*args, **kwargs)

    def forward_batch(self, requests: list[Any]) -> list[torch.Tensor]:
        raise RuntimeError("the shared forward is refused")


def test_a_failed_shared_forward_is_retried_alone_and_kept_in_the_ledger():
    model = FailingShared(model64("aligned"))
    prompts = [PROMPTS["a"], PROMPTS["b"], [7, 8, 9]]
    cfg = s2d2.DecodeConfig(method="ar", gen_length=10)
    results = assert_batch_equals_single(model, prompts, cfg, [0, 1, 2], batch_size=3)
    ledger = results[0].batch.summary()
    assert ledger["failed_forwards"] > 0
    assert ledger["sequence_forwards"] == sum(r.metrics["nfe"] for r in results)


def test_a_sequences_own_stop_ends_it_alone_as_generate_does():
    base = model64("aligned")
    prompts = [[5, 6, 7], PROMPTS["b"], [8, 9]]
    cfg = s2d2.DecodeConfig(method="ar", gen_length=12)
    got = s2d2.generate_batch(StopsOne(base, 5, 6), prompts, cfg, [0, 1, 2], batch_size=3, engine="batch-first")
    want = s2d2.generate(StopsOne(base, 5, 6), prompts[0], cfg, seed=0)
    assert got[0].trace.footer.finish_reason == "cancelled" == want.trace.footer.finish_reason
    assert got[0].token_ids == want.token_ids and got[0].metrics["nfe"] == want.metrics["nfe"] == 5
    assert trace_mismatch(got[0].trace, want.trace) is None
    for i in (1, 2):  # the others decode to their length
        assert got[i].trace.footer.finish_reason != "cancelled"
        assert got[i].token_ids == s2d2.generate(base, prompts[i], cfg, seed=i).token_ids


@pytest.mark.parametrize("settings", [
    dict(block_length=8, cache_ver=True, draft_ver=True, confidence_threshold=0.5, temperature=0.7, top_k=5),
    dict(block_length=4, remasking="sequential", temperature=1.0, rng="counter"),
    dict(block_length=8, remasking="low_confidence_static", denoising_steps=3),
], ids=["causal-cache-sampled", "sequential-counter", "static-S3"])
def test_the_diffusion_baselines_decode_batch_first_as_alone(settings, monkeypatch):
    _no_threads(monkeypatch)
    cfg = s2d2.DecodeConfig(method="diffusion", gen_length=20, **settings)
    prompts = [PROMPTS["a"], PROMPTS["b"], PROMPTS["a"], [7, 8, 9], PROMPTS["c"]]
    assert_batch_equals_single(model64("aligned"), prompts, cfg, [0, 1, 2, 3, 4], batch_size=3)


def test_one_forward_carries_sequences_in_different_phases():
    """AR and a diffusion baseline in one batch-first batch: a forward serves AR tokens with drafts, and a draft of
    one sequence with the commit or prefill of another."""
    model = model64("aligned")
    cfgs = [s2d2.DecodeConfig(method="diffusion", gen_length=16, block_length=4),
            s2d2.DecodeConfig(method="ar", gen_length=16),
            s2d2.DecodeConfig(method="diffusion", gen_length=16, block_length=4, confidence_threshold=0.5)]
    prompts = [PROMPTS["a"], PROMPTS["b"], [7, 8, 9, 10, 11]]
    results = assert_batch_equals_single(model, prompts, cfgs, [0, 1, 2], batch_size=3, detailed=False)
    ledger = results[0].batch
    phases = [{results[s].trace.forwards[f].kind for s, f in zip(bf.sequences, bf.seq_forwards)}
              for bf in ledger.forwards]
    assert any({"draft", "ar"} <= p for p in phases)
    assert any("draft" in p and p & {"commit", "prefill"} for p in phases)


class WithStops:
    """A model whose stop ids are `stop_ids` (the tiny random models have none that they emit)."""

    def __init__(self, model: Any, stop_ids: list[int]) -> None:
        self._model = model
        self.spec = dataclasses.replace(model.spec, stop_ids=list(stop_ids))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)


@pytest.mark.parametrize("cfg", [
    s2d2.DecodeConfig(method="diffusion", gen_length=24, block_length=4),
    s2d2.preset("fastdllm-config-a", gen_length=24, block_length=8, sub_block_length=4),
    s2d2.DecodeConfig(method="s2d2", gen_length=24, block_length=4, policy="always", temperature=1.0, kv_reuse=True,
                      fused_commit=True, cache_ver=True, draft_ver=True),
], ids=["diffusion", "s2d2-sub-blocks", "s2d2-fused-reuse"])
def test_right_shifted_sequences_seed_their_blocks_and_stop_where_generate_does(cfg, monkeypatch):
    """The right-shifted family's own rules in the batch-first loop: every block after the first opened by the
    previous forward's last logit (an AR seed), and a stop id ending a sequence before its next step or before its
    block's commit, which is then never run; each sequence's trace is its lone decode's."""
    _no_threads(monkeypatch)
    model = WithStops(model64("shifted"), [36, 9])  # 36 comes mid-output of the first prompt, 9 at once in the third
    prompts = [PROMPTS["a"], PROMPTS["b"], [7, 8, 9], PROMPTS["c"], [5, 6, 7, 8]]
    results = assert_batch_equals_single(model, prompts, cfg, [0, 1, 2, 3, 4], batch_size=3)
    reasons = [r.trace.footer.finish_reason for r in results]
    assert reasons[2] == "stop_token" and "length" in reasons
    assert not any(f.kind == "commit" for f in results[2].trace.forwards)  # stopped before its block's commit
    seeds = [c for r in results for s in r.trace.steps for c in s.commits if c.how == "ar_seed"]
    assert len(seeds) >= len(prompts)  # the blocks after the first open with a seed


def test_a_diffusion_sequences_own_stop_rolls_back_to_its_last_block_as_generate_does():
    base = model64("aligned")
    prompts = [[5, 6, 7], PROMPTS["b"], [8, 9]]
    cfg = s2d2.DecodeConfig(method="diffusion", gen_length=16, block_length=4)
    got = s2d2.generate_batch(StopsOne(base, 5, 7), prompts, cfg, [0, 1, 2], batch_size=3, engine="batch-first")
    want = s2d2.generate(StopsOne(base, 5, 7), prompts[0], cfg, seed=0)
    assert got[0].trace.footer.finish_reason == "cancelled" == want.trace.footer.finish_reason
    assert got[0].token_ids == want.token_ids and got[0].metrics["nfe"] == want.metrics["nfe"]
    assert trace_mismatch(got[0].trace, want.trace) is None
    assert len(want.trace.blocks) >= 1 and want.metrics["nfe"] < 7  # it rolled back past forwards it had run
    for i in (1, 2):
        assert got[i].token_ids == s2d2.generate(base, prompts[i], cfg, seed=i).token_ids


@pytest.mark.parametrize("cfg", [s2d2.DecodeConfig(method="ar", gen_length=12),
                                 s2d2.DecodeConfig(method="diffusion", gen_length=12, block_length=4),
                                 s2d2.preset("sdar-config-a", gen_length=12),
                                 s2d2.DecodeConfig(loop="editing", method="diffusion", gen_length=12, block_length=4,
                                                   remasking="low_confidence_dynamic", confidence_threshold=0.7)],
                         ids=["ar", "diffusion", "s2d2", "editing"])
def test_the_shared_work_of_a_step_does_not_grow_with_the_batch(cfg, monkeypatch):
    """The distribution, the greedy draw, the remasking rule and the read run once per step for the whole batch:
    a batch of 6 copies of a prompt makes as many calls of each as a batch of 2 (S2D2: the drafts' distribution
    and the one read of every row's routing inputs and acceptance tests; the editing loop: the drafts'
    distribution and its fallback rule's one read)."""
    from s2d2.decoding import lockstep_ar, lockstep_block, lockstep_editing, lockstep_verify

    calls: dict[str, int] = {}

    def counted(module: Any, name: str) -> None:
        real = getattr(module, name)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            calls[name] = calls.get(name, 0) + 1
            return real(*args, **kwargs)

        monkeypatch.setattr(module, name, wrapper)

    spied = {"ar": [(lockstep_ar, "token_distribution"), (lockstep_ar, "read_rows")],
             "diffusion": [(lockstep_verify, "token_distribution"), (lockstep_block, "read_rows"),
                           (lockstep_block, "skip_inputs")],
             "s2d2": [(lockstep_verify, "token_distribution"), (lockstep_verify, "fetch_many")],
             "editing": [(lockstep_verify, "token_distribution"), (lockstep_editing, "rule_inputs"),
                         (lockstep_editing, "read_rows")]}["editing" if cfg.loop == "editing" else cfg.method]
    names = [name for _, name in spied]
    for module, name in spied:
        counted(module, name)
    per_size = []
    for n in (2, 6):
        calls.clear()
        s2d2.generate_batch(model64("aligned"), [PROMPTS["a"]] * n, cfg, [0] * n, batch_size=n, detailed=False,
                            engine="batch-first")
        per_size.append(dict(calls))
    assert per_size[0] == per_size[1] and per_size[0]["token_distribution"] >= 4
    assert all(per_size[0][name] >= 4 for name in names)


class NoBatch:
    """The model without `forward_batch` (a test stub's shape): each request runs alone; one that raises fails
    only its own sequence."""

    def __init__(self, model: Any, refuse_len: int) -> None:
        self._model, self.refuse_len = model, refuse_len

    def __getattr__(self, name: str) -> Any:
        if name == "forward_batch":
            raise AttributeError(name)
        return getattr(self._model, name)

    def forward(self, *req: Any) -> torch.Tensor:
        if int(req[1].shape[0]) == self.refuse_len and int(req[0].get_seq_length()) == 0:
            raise StopDecoding()
        return self._model.forward(*req)


def test_without_forward_batch_each_request_runs_alone_and_fails_alone():
    model = NoBatch(model64("aligned"), refuse_len=8)  # the prefill of a 7-token prompt ([prompt | MASK])
    prompts = [PROMPTS["a"], [1, 2, 3, 4, 5, 6, 7], [7, 8, 9]]
    cfg = s2d2.DecodeConfig(method="ar", gen_length=6)
    got = s2d2.generate_batch(model, prompts, cfg, [0, 1, 2], batch_size=3, engine="batch-first")
    assert [r.trace.footer.finish_reason for r in got] == ["length", "cancelled", "length"]
    for i in (0, 2):
        assert got[i].token_ids == s2d2.generate(model64("aligned"), prompts[i], cfg, seed=i).token_ids
    assert all(len(f.sequences) == 1 for f in got[0].batch.forwards)


def test_one_forward_carries_draft_verify_and_commit_rows_of_different_sequences():
    """S2D2 in a batch: a row that routes to verify sends its 2L verifier with the next step's shared forward, so
    one forward serves one sequence's draft, another's 2L verify and a third's commit (or prefill)."""
    model = model64("aligned")
    cfgs = [s2d2.DecodeConfig(method="s2d2", policy="always", gen_length=16, block_length=4),
            s2d2.DecodeConfig(method="diffusion", gen_length=16, block_length=4),
            s2d2.DecodeConfig(method="s2d2", policy="score_threshold", score_threshold=0.5, gen_length=16,
                              block_length=8, temperature=1.0)]
    prompts = [PROMPTS["a"], PROMPTS["b"], [7, 8, 9, 10, 11]]
    got = s2d2.generate_batch(model, prompts, cfgs, [0, 1, 2], batch_size=3, detailed=False, engine="batch-first")
    for i, (g, prompt, cfg) in enumerate(zip(got, prompts, cfgs)):
        want = s2d2.generate(model, prompt, cfg, seed=i, detailed=False)
        assert g.token_ids == want.token_ids and g.metrics["nfe"] == want.metrics["nfe"], f"sequence {i}"
        assert trace_mismatch(g.trace, want.trace) is None, f"sequence {i}: {trace_mismatch(g.trace, want.trace)}"
    phases = [{got[s].trace.forwards[f].kind for s, f in zip(bf.sequences, bf.seq_forwards)}
              for bf in got[0].batch.forwards]
    assert any({"draft", "verify_2l"} <= p for p in phases)
    assert any("verify_2l" in p and p & {"commit", "prefill"} for p in phases)
    assert max(len(bf.sequences) for bf in got[0].batch.forwards) == 3


class Grouped:
    """The model, its shared forwards grouped at a stated fixed cost per forward (batch.py `fixed_tokens_for`):
    4096 query tokens as on an accelerator, 0 where every padded row costs more than a second forward."""

    def __init__(self, model: Any, fixed_tokens: int) -> None:
        self._model, self.batch_fixed_tokens = model, fixed_tokens

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)

    def forward(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        return self._model.forward(*args, **kwargs)

    def forward_batch(self, requests: list[Any]) -> list[torch.Tensor]:
        return self._model.forward_batch(requests)


def test_grouped_as_on_an_accelerator_every_forward_carries_every_live_sequence():
    """Issue 37's aim on a GPU: whatever the rows' phases (prefill, draft, 2L verify, commit) and however the
    sequences come and go (six prompts through three slots, of different lengths), each step is one forward that
    carries every live sequence; the ledger says so (`live_share` 1.0), and each sequence keeps its batch-1 answer."""
    model = model64("aligned")
    cfg = s2d2.DecodeConfig(method="s2d2", policy="score_threshold", score_threshold=0.5, gen_length=12,
                            block_length=4, temperature=1.0)
    prompts = [PROMPTS["a"], PROMPTS["b"], [7, 8, 9, 10, 11], [3, 4], PROMPTS["a"][:5], [9, 9, 9]]
    got = s2d2.generate_batch(Grouped(model, 4096), prompts, cfg, list(range(6)), batch_size=3,
                              detailed=False, engine="batch-first")
    for i, (g, prompt) in enumerate(zip(got, prompts)):
        want = s2d2.generate(model, prompt, cfg, seed=i, detailed=False)
        assert g.token_ids == want.token_ids and g.metrics["nfe"] == want.metrics["nfe"], f"sequence {i}"
    ledger = got[0].batch
    phases = {got[s].trace.forwards[f].kind for bf in ledger.forwards for s, f in zip(bf.sequences, bf.seq_forwards)}
    assert phases >= {"prefill", "draft", "verify_2l", "commit"}
    assert [len(f.sequences) for f in ledger.forwards] == ledger.live_rows()
    assert ledger.summary()["live_share"] == 1.0 and 2 < ledger.summary()["mean_live"] <= 3
    # where padding costs more than a forward, a step's phases go to separate forwards: fewer than are live
    cpu = s2d2.generate_batch(Grouped(model, 0), prompts, cfg, list(range(6)), batch_size=3, detailed=False,
                              engine="batch-first")[0].batch.summary()
    assert cpu["live_share"] < 1.0 and cpu["forwards"] > ledger.summary()["forwards"]


@pytest.mark.parametrize("settings", [
    dict(block_length=8, sub_block_length=4, policy="score_hysteresis", hysteresis_on=0.0, hysteresis_off=-5.0,
         confidence_threshold=0.9, penalty_coef=1.0),
    dict(block_length=8, sub_block_length=4, policy="mask_span_length", min_span_length=3, temperature=1.0,
         rng="counter"),
    dict(block_length=8, policy="contextual_bandit_ucb", acceptance="sampled", temperature=0.9, top_p=0.9),
], ids=["hysteresis-sub-blocks", "span-length-sub-blocks-counter", "ucb-sampled"])
def test_s2d2_policies_with_sub_blocks_decode_batch_first_as_alone(settings, monkeypatch):
    """Sub-blocks (the windows of the Fast-dLLM v2 presets) and stateful policies, each row with its own policy."""
    _no_threads(monkeypatch)
    cfg = s2d2.DecodeConfig(method="s2d2", gen_length=20, **settings)
    prompts = [PROMPTS["a"], PROMPTS["b"], PROMPTS["a"], [7, 8, 9], PROMPTS["c"]]
    batch = s2d2.generate_batch(model64("aligned"), prompts, cfg, [0, 1, 2, 3, 4], batch_size=3,
                                engine="batch-first")
    for i, (g, prompt) in enumerate(zip(batch, prompts)):
        want = s2d2.generate(model64("aligned"), prompt, cfg, seed=i)
        assert g.token_ids == want.token_ids and g.metrics["nfe"] == want.metrics["nfe"], f"sequence {i}"
        assert trace_mismatch(g.trace, want.trace) is None, f"sequence {i}: {trace_mismatch(g.trace, want.trace)}"
    assert any(s.verification is not None for r in batch for s in r.trace.steps)


@pytest.mark.parametrize("preset", ["sdar-config-a", "sdar-config-b", "fastdllm-config-a", "fastdllm-config-b",
                                    "fastdllm-config-c"])
def test_every_paper_preset_decodes_batch_first_on_the_bundled_model_as_alone(preset, monkeypatch):
    if not bundled_available("bundled"):
        pytest.skip("the bundled model is not trained yet")
    _no_threads(monkeypatch)
    model = model64("bundled")
    cfg = s2d2.preset(preset).replace(gen_length=32)
    prompts = batch_prompts("bundled", "q")
    assert_batch_equals_single(model, prompts, cfg, [0, 1, 2, 3, 4], batch_size=3, detailed=False)


@pytest.mark.parametrize("n", [5, 6], ids=["stop-at-verify", "stop-at-draft"])
def test_an_s2d2_sequences_own_stop_rolls_back_as_generate_does(n):
    """A sequence's own StopDecoding at a draft or at its 2L verifier ends it alone, back to its last block."""
    base = model64("aligned")
    prompts = [[5, 6, 7], PROMPTS["b"], [8, 9]]
    cfg = s2d2.DecodeConfig(method="s2d2", policy="always", gen_length=16, block_length=4, temperature=1.0)
    got = s2d2.generate_batch(StopsOne(base, 5, n), prompts, cfg, [0, 1, 2], batch_size=3, engine="batch-first")
    want = s2d2.generate(StopsOne(base, 5, n), prompts[0], cfg, seed=0)
    assert got[0].trace.footer.finish_reason == "cancelled" == want.trace.footer.finish_reason
    assert got[0].token_ids == want.token_ids and got[0].metrics["nfe"] == want.metrics["nfe"]
    assert trace_mismatch(got[0].trace, want.trace) is None
    kinds = [f.kind for f in s2d2.generate(base, prompts[0], cfg, seed=0).trace.forwards]
    assert kinds[n - 1] == ("verify_2l" if n == 5 else "draft")  # the forward that stops is of that kind
    for i in (1, 2):
        assert got[i].token_ids == s2d2.generate(base, prompts[i], cfg, seed=i).token_ids
