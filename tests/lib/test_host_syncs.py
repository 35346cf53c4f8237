"""Host transfers of the decode loop, counted on the CPU (s2d2/host_syncs.py; a GPU sync per read or upload).

Budget, lean traces (issue 11): a step reads device values at most once before routing (drafts, policy inputs and
what a skip would decode) and, when it verifies, once after the verifier (the acceptance outcome, which decides
whether the block goes on and whether the residual draw consumes the generator); one read per block settles the
deferred record fields and the stop check; no step uploads host data. Detailed traces make exactly the same reads.
"""
from __future__ import annotations

import pytest
import torch

import s2d2
import s2d2.decoding.decoder as decoder
from tests.support.tiny_models import tiny_qwen2, tiny_qwen3
from s2d2 import DecodeConfig
from s2d2.decoding.transfers import HostReads
from s2d2.host_syncs import HostSyncCounter

PROMPT = list(range(5, 15))


@pytest.fixture(scope="module")
def aligned():
    model = tiny_qwen3(seed=0)
    model.model.model.norm.weight.data *= 25.0  # peaked: drafts and verifier often disagree (rejections, resamples)
    return model


@pytest.fixture(scope="module")
def shifted():
    model = tiny_qwen2(seed=1)
    model.model.model.norm.weight.data *= 25.0
    return model


def counted_run(model, cfg: DecodeConfig, monkeypatch, detailed: bool = False, packed_fetch: bool = True):
    """(counter, [(verified, reads, uploads) per step], result)."""
    per_step: list[tuple[bool, int, int]] = []
    counter = HostSyncCounter(model, packed_fetch=packed_fetch)
    run_step = decoder.run_step

    def step(*args, **kwargs):
        reads, uploads = counter.reads, counter.uploads
        record = run_step(*args, **kwargs)
        per_step.append((record.verification is not None, counter.reads - reads, counter.uploads - uploads))
        return record

    monkeypatch.setattr(decoder, "run_step", step)
    with counter:
        res = s2d2.generate(model, PROMPT, cfg, seed=0, detailed=detailed)
    return counter, per_step, res


ALIGNED = {
    "always-verify (sdar-config-b shape)": dict(policy="score_threshold", score_threshold=0.0, penalty_coef=0.0,
                                               score_type="difference_static", cache_ver=True, draft_ver=True,
                                               block_length=8),
    "selective (sdar-config-a shape)": dict(policy="score_threshold", score_threshold=0.0, penalty_coef=1.0,
                                           score_type="difference_static", cache_ver=True, draft_ver=True,
                                           block_length=4),
    "ucb sampled": dict(policy="contextual_bandit_ucb", temperature=1.0, acceptance="sampled", block_length=8),
    "greedy_exact": dict(policy="always", acceptance="greedy_exact", cache_ver=True, draft_ver=True, block_length=8),
    "hysteresis S<B": dict(policy="score_hysteresis", hysteresis_on=0.6, hysteresis_off=0.2, temperature=0.7,
                           confidence_threshold=0.3, block_length=8, denoising_steps=4),
    "extras": dict(policy="always", ratio_threshold=0.3, always_check_high_conf=True, confidence_threshold=0.004,
                   temperature=1.0, block_length=8),
    "baseline": dict(method="diffusion", block_length=4),
    "fused + adaptive": dict(policy="always", fused_commit=True, adaptive_block=True, adaptive_min_block=4,
                             adaptive_max_block=16, cache_ver=True, draft_ver=True, block_length=8),
}


@pytest.mark.parametrize("name", list(ALIGNED))
def test_lean_step_reads_once_before_routing_and_once_after_a_verifier(aligned, monkeypatch, name):
    cfg = DecodeConfig(method="s2d2", gen_length=24).replace(**ALIGNED[name])
    counter, steps, res = counted_run(aligned, cfg, monkeypatch)
    assert steps and any(v for v, _, _ in steps) == (cfg.method == "s2d2")
    for verified, reads, uploads in steps:
        assert reads <= (2 if verified else 1) and uploads == 0, counter.summary()
    outside = counter.reads - sum(r for _, r, _ in steps)
    assert outside <= len(res.trace.blocks) + 1, counter.summary()  # a read per block, the output once
    assert counter.uploads == 1, counter.summary()  # the prompt, once per run
    assert all(e.op == "HostReads.fetch" or "api.py" in e.where for e in counter.events), counter.summary()


@pytest.mark.parametrize("name", ["always-verify (sdar-config-b shape)", "selective (sdar-config-a shape)", "extras"])
def test_detailed_traces_make_the_same_reads(aligned, monkeypatch, name):
    cfg = DecodeConfig(method="s2d2", gen_length=24).replace(**ALIGNED[name])
    lean, _, _ = counted_run(aligned, cfg, monkeypatch, detailed=False)
    full, _, res = counted_run(aligned, cfg, monkeypatch, detailed=True)
    assert res.trace.steps[0].drafts  # really detailed
    assert [e.op for e in full.events] == [e.op for e in lean.events]


@pytest.mark.parametrize("method", ["ar", "ar-reference"])
def test_ar_reads_once_per_token(aligned, monkeypatch, method):
    cfg = DecodeConfig(method="ar", gen_length=16, ar_accounting="reference" if method == "ar-reference" else "fused")
    counter, _, res = counted_run(aligned, cfg, monkeypatch, detailed=True)
    assert counter.reads <= len(res.trace.steps) + 1 and counter.uploads == 1, counter.summary()


def test_shifted_family_reads_for_its_stop_rule_only_after_a_device_token(shifted, monkeypatch):
    """The right-shifted stop rule needs every token of the block: a step after a residual draw or an AR seed
    (tokens still on the device) reads once more before its draft."""
    cfg = DecodeConfig(method="s2d2", policy="always", temperature=1.0, block_length=8, gen_length=24)
    counter, steps, res = counted_run(shifted, cfg, monkeypatch)
    resamples = sum(1 for s in res.trace.steps if s.verification and s.verification.resampled is not None)
    seeds = sum(1 for s in res.trace.steps if s.commits and s.commits[0].how == "ar_seed")
    assert resamples and seeds
    assert sum(r for _, r, _ in steps) <= sum(2 if v else 1 for v, _, _ in steps)
    assert counter.reads <= sum(2 if v else 1 for v, _, _ in steps) + resamples + seeds + len(res.trace.blocks) + 1


def test_kv_reuse_reads_once_more_after_a_residual_draw(aligned, monkeypatch):
    """KV reuse crops the verifier's rows before the next forward: after a residual draw it must know whether the
    drawn token equals the draft (possible only when the draw fell back to q)."""
    cfg = DecodeConfig(method="s2d2", policy="always", kv_reuse=True, cache_ver=True, draft_ver=True,
                       temperature=1.0, block_length=8, gen_length=24)
    counter, steps, res = counted_run(aligned, cfg, monkeypatch)
    for (verified, reads, _), record in zip(steps, [s for s in res.trace.steps]):
        drew = record.verification is not None and record.verification.residual_mass is not None
        assert reads <= (2 if verified else 1) + drew, counter.summary()


def test_a_packed_fetch_is_one_tolist(aligned, monkeypatch):
    """The accelerator path (every part in one tensor, one `.tolist()`), run on the CPU and counted raw."""
    monkeypatch.setattr(HostReads, "pack_on_cpu", True)
    cfg = DecodeConfig(method="s2d2", gen_length=24).replace(**ALIGNED["ucb sampled"])
    counter, steps, _ = counted_run(aligned, cfg, monkeypatch, packed_fetch=False)
    for verified, reads, _ in steps:
        assert reads <= (2 if verified else 1), counter.summary()
    assert all(e.op == "Tensor.tolist" for e in counter.events if e.kind == "read"), counter.summary()


def test_packed_and_plain_fetch_read_the_same_values(monkeypatch):
    parts = {"f": torch.tensor([0.1, 2.5e-8], dtype=torch.float32), "i": torch.tensor([3, 151_000]),
             "b": torch.tensor([True, False]), "s": torch.tensor(0.3, dtype=torch.float32), "n": torch.tensor(7),
             "m": torch.arange(6).reshape(2, 3), "none": None}
    plain = HostReads(torch.device("cpu")).fetch(parts)
    monkeypatch.setattr(HostReads, "pack_on_cpu", True)
    reads = HostReads(torch.device("cpu"))
    settled = []
    reads.later(torch.tensor([5, 6]), settled.append)
    packed = reads.fetch(parts)
    assert packed == plain and "none" not in packed and settled == [[5, 6]] and not reads.pending
    assert packed["m"] == [0, 1, 2, 3, 4, 5] and packed["s"] == torch.tensor(0.3).item()


def test_the_counter_sees_every_kind_of_read(aligned):
    x = torch.arange(6)
    with HostSyncCounter(aligned) as counter:
        x.tolist(), x[0].item(), int(x[1]), float(x[2]), bool(x[3] > 1), x.nonzero(), x[x > 2]
        torch.tensor([1, 2])  # an upload
        cache = aligned.new_cache()
        aligned.forward(cache, torch.tensor([1, 2]), torch.arange(2), "causal", keep=2)  # inside: not counted
    ops = [e.op for e in counter.events]
    assert counter.reads == 7 and counter.uploads == 2, counter.summary()  # torch.tensor(list) twice
    assert "Tensor.tolist" in ops and "aten.nonzero.default" in ops and "aten.index.Tensor" in ops
    assert not any("hf.py" in e.where or "transformers" in e.where for e in counter.events)
