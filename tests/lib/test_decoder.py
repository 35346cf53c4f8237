"""Decoder invariants (docs/algorithm.md, 'Invariants') on tiny random models (float64)."""
from __future__ import annotations

import math

import pytest
import torch

import s2d2
from tests.support.tiny_models import MASK_ID, StopAt, perfect_drafter, sharpen, tiny_qwen2, tiny_qwen3, tiny_qwen3_model
from s2d2 import DecodeConfig, Trace
from s2d2.models.loading import from_transformers
from s2d2.policies import redecide

PROMPTS = [list(range(5, 15)), [3, 1, 4, 1, 5, 9, 2, 6], list(range(40, 72))]


@pytest.fixture(scope="module")
def aligned():
    return sharpen(tiny_qwen3(seed=0))


@pytest.fixture(scope="module")
def shifted():
    return sharpen(tiny_qwen2(seed=1))


def run(model, prompt, seed=0, **kw):
    return s2d2.generate(model, prompt, DecodeConfig(**kw), seed=seed)


# -- 3. B = 1 is AR ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("family", ["aligned", "shifted"])
def test_b1_diffusion_equals_ar(family, request):
    model = request.getfixturevalue(family)
    for prompt in PROMPTS[:2]:
        ar = run(model, prompt, method="ar", gen_length=20)
        ref = run(model, prompt, method="ar", ar_accounting="reference", gen_length=20)
        b1 = run(model, prompt, method="diffusion", block_length=1, gen_length=20)
        assert ar.token_ids == b1.token_ids == ref.token_ids
        assert len(ar.token_ids) > 0
        # honest AR: one forward per token; the reference accounting pays a query and a commit per token
        assert ar.metrics["nfe"] == len(ar.trace.steps)
        kinds = ref.metrics["nfe_by_kind"]
        if family == "aligned":
            assert kinds["draft"] == kinds["commit"] == len(ref.token_ids)
        else:  # block size 1 and position 0 of a block is always AR-seeded: only commits remain
            assert "draft" not in kinds and kinds["commit"] >= len(ref.token_ids) - 1


# -- 7. the greedy_exact theorem ---------------------------------------------------------------------------------

@pytest.mark.parametrize("family", ["aligned", "shifted"])
@pytest.mark.parametrize("block", [4, 8])
@pytest.mark.parametrize("seed", [0, 1])
def test_greedy_exact_always_verify_reproduces_ar(family, block, seed):
    model = tiny_qwen3(seed=seed) if family == "aligned" else tiny_qwen2(seed=seed)
    for prompt in PROMPTS:
        ar = run(model, prompt, method="ar", gen_length=24)
        kw = dict(sub_block_length=block // 2) if family == "shifted" else dict(draft_ver=True)
        sp = run(model, prompt, method="s2d2", policy="always", acceptance="greedy_exact", cache_ver=True,
                 block_length=block, gen_length=24, **kw)
        # right-shifted: the reference budget is G // B blocks from the prompt-tail block (up to B - 1 fewer tokens)
        n = len(sp.token_ids)
        assert sp.token_ids == ar.token_ids[:n] and n >= min(len(ar.token_ids), 24 - block + 1)
        assert sp.metrics["verify_rate"] == 1.0


def test_greedy_exact_does_not_hold_without_cache_ver(aligned):
    """The verifier is AR only on a causal cache; a block-causal cache changes q (docs/algorithm.md,
    'AR-like caching')."""
    diffs = 0
    for prompt in PROMPTS:
        ar = run(aligned, prompt, method="ar", gen_length=24)
        sp = run(aligned, prompt, method="s2d2", policy="always", acceptance="greedy_exact", cache_ver=False,
                 block_length=8, gen_length=24)
        diffs += sp.token_ids != ar.token_ids
    assert diffs >= 1


# -- 5. never verify == baseline ---------------------------------------------------------------------------------

@pytest.mark.parametrize("family", ["aligned", "shifted"])
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_never_verify_equals_diffusion(family, temperature, request):
    model = request.getfixturevalue(family)
    for remasking in ["low_confidence_dynamic", "entropy_bounded", "sequential"]:
        common = dict(block_length=8, gen_length=24, temperature=temperature, remasking=remasking,
                      confidence_threshold=0.004)
        base = run(model, PROMPTS[0], seed=3, method="diffusion", **common)
        for never in (dict(policy="never"), dict(policy="mask_span_length", min_span_length=9),
                      dict(policy="score_threshold", score_threshold=math.inf)):
            sp = run(model, PROMPTS[0], seed=3, method="s2d2", **common, **never)
            assert sp.token_ids == base.token_ids
            assert sp.metrics["nfe_by_kind"] == base.metrics["nfe_by_kind"]
            assert sp.metrics["verify_rate"] == 0.0


# -- 6. perfect drafter ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["paper", "greedy_exact"])
def test_perfect_drafter_costs_three_forwards_per_block(mode):
    model = perfect_drafter()
    prompt = list(range(10, 18))  # two full blocks of 4: no prompt tail
    res = run(model, prompt, method="s2d2", policy="always", acceptance=mode, block_length=4, gen_length=16)
    blocks = len(res.trace.blocks)
    assert res.metrics["nfe_by_kind"] == {"prefill": 1, "draft": blocks, "verify_2l": blocks, "commit": blocks}
    for step in res.trace.steps:
        assert all(r.ratio == pytest.approx(1.0) for r in step.verification.positions)
        assert step.verification.accepted_len == step.span[1] == 4


@pytest.mark.parametrize("accepted, first", [([], 0), ([True] * 5, 5), ([False], 0), ([True, True, False, True], 2),
                                             ([1, 1, 0, 0], 2), ([True, False, False], 1)])
def test_first_rejected_is_the_accepted_prefix(accepted, first):
    """Both loops' accepted prefix (selection.py `verify_picks`, the pipeline's `verify_outcome`): the first failed
    test in the read-back results, or all of them; what the prefix writes and records depends on it."""
    from s2d2.decoding.acceptance import first_rejected

    assert first_rejected(accepted) == first == next((i for i, a in enumerate(accepted) if not a), len(accepted))


# -- 4. speculative law (Monte Carlo on the acceptance test) ------------------------------------------------------

def _law(mode: str, draft_greedy: bool, n: int = 6000) -> torch.Tensor:
    from s2d2.decoding.acceptance import accept_span

    p = torch.tensor([[0.5, 0.3, 0.15, 0.05]], dtype=torch.float64)
    q = torch.tensor([[0.2, 0.4, 0.1, 0.3]], dtype=torch.float64)
    g = torch.Generator().manual_seed(0)
    counts = torch.zeros(4, dtype=torch.float64)
    for _ in range(n):
        x0 = torch.argmax(p, -1) if draft_greedy else torch.multinomial(p, 1, generator=g).squeeze(-1)
        out = accept_span(mode, x0, p.gather(-1, x0[:, None]).squeeze(-1), p, q, 1.0, True, g)
        counts[int(x0) if out.accepted_len == 1 else out.resampled] += 1
    return counts / n


def test_sampled_draft_gives_verifier_law():
    law = _law("sampled", draft_greedy=False)
    assert torch.allclose(law, torch.tensor([0.2, 0.4, 0.1, 0.3], dtype=torch.float64), atol=0.025)


def test_argmax_draft_in_paper_mode_is_not_q():
    law = _law("paper", draft_greedy=True)
    r = 0.2 / 0.5  # accept token 0 with prob r; else residual (q - p)+ = [0, .1, 0, .25] / .35
    expected = torch.tensor([r, (1 - r) * 0.1 / 0.35, 0.0, (1 - r) * 0.25 / 0.35], dtype=torch.float64)
    assert torch.allclose(law, expected, atol=0.025)
    assert (law - torch.tensor([0.2, 0.4, 0.1, 0.3], dtype=torch.float64)).abs().max() > 0.1


# -- 8. bookkeeping ----------------------------------------------------------------------------------------------

CONFIGS = [
    dict(method="diffusion", block_length=8, denoising_steps=3, remasking="low_confidence_static"),
    dict(method="diffusion", block_length=8, remasking="entropy_bounded", eb_gamma=0.5),
    dict(method="s2d2", policy="always", block_length=8),
    dict(method="s2d2", policy="always", block_length=8, denoising_steps=2, temperature=1.0, acceptance="sampled"),
    dict(method="s2d2", policy="score_threshold", score_threshold=0.5, score_type="difference_static",
         penalty_coef=1.0, block_length=8, temperature=0.8),
    dict(method="s2d2", policy="score_hysteresis", hysteresis_on=0.6, hysteresis_off=0.2, block_length=8,
         confidence_threshold=0.005, temperature=0.7),
    dict(method="s2d2", policy="contextual_bandit_ucb", block_length=8, temperature=1.0),
    dict(method="s2d2", policy="always", block_length=8, allow_resample=False, temperature=1.0),
    dict(method="s2d2", policy="always", block_length=8, ratio_threshold=0.3, always_check_high_conf=True,
         confidence_threshold=0.004, temperature=1.0),
]


@pytest.mark.parametrize("kw", CONFIGS)
@pytest.mark.parametrize("family", ["aligned", "shifted"])
def test_bookkeeping(kw, family, request):
    model = request.getfixturevalue(family)
    cfg = DecodeConfig(gen_length=30, **kw)
    res = s2d2.generate(model, PROMPTS[1], cfg, seed=2)
    tr, sched = res.trace, cfg.transfer_schedule()
    m = res.metrics
    assert m["nfe"] == sum(m["nfe_by_kind"].values()) == len(tr.forwards)
    per_block: dict[int, int] = {}
    for s in tr.steps:
        if s.step < 0:
            continue  # AR seed of the shifted family
        decoded = len(s.commits)
        assert decoded >= min(sched[min(s.step, len(sched) - 1)], len(s.masks_before))
        assert {c.position for c in s.commits} <= set(s.masks_before)
        if s.verification is not None:
            v = s.verification
            base = v.accepted_len + (v.resampled is not None)
            extras = sum(c.how in ("ratio_extra", "hiconf_extra", "fallback", "threshold") for c in s.commits)
            assert decoded == base + extras
            if not cfg.allow_resample and v.first_reject is not None:
                assert v.positions[v.first_reject].position not in {c.position for c in s.commits} or any(
                    c.how != "resampled" for c in s.commits)
                assert all(c.how != "resampled" for c in s.commits)
        per_block[s.block] = per_block.get(s.block, 0) + 1
        assert s.step < cfg.steps
    # every block's decodes sum to its initial masks (all blocks but an early-stopped one are complete)
    for blk in tr.blocks:
        masks = blk.length - blk.prompt_tail
        decodes = sum(len(s.commits) for s in tr.steps if s.block == blk.index)
        assert decodes == masks


def test_always_verify_with_unit_transfer_decodes_left_to_right(aligned):
    res = run(aligned, PROMPTS[0], method="s2d2", policy="always", block_length=8, gen_length=24, temperature=1.0)
    for s in res.trace.steps:
        positions = [c.position for c in s.commits]
        assert positions == list(range(s.masks_before[0], s.masks_before[0] + len(positions)))


# -- trace: round trip, replay, determinism, re-deciding ----------------------------------------------------------

@pytest.mark.parametrize("kw", CONFIGS + [dict(method="ar")])
def test_trace_round_trip_and_replay(kw, aligned):
    res = s2d2.generate(aligned, PROMPTS[0], DecodeConfig(gen_length=20, **kw), seed=5)
    back = s2d2.Trace.from_json(res.trace.to_json())
    assert back.to_dict() == res.trace.to_dict()
    assert back.replay() == res.token_ids == back.footer.output_ids


def test_same_seed_same_trace_apart_from_timing(shifted):
    cfg = DecodeConfig(method="s2d2", policy="contextual_bandit_ucb", block_length=8, temperature=1.0, gen_length=24)

    def stripped(seed):
        d = s2d2.generate(shifted, PROMPTS[0], cfg, seed=seed).trace.to_dict()
        for f in d["forwards"]:
            f["wall_s"] = 0
        d["footer"]["wall_s"] = d["footer"]["forward_wall_s"] = 0
        d["header"]["created"] = ""
        return d

    assert stripped(7) == stripped(7)
    assert stripped(7) != stripped(8)


@pytest.mark.parametrize("kw", [c for c in CONFIGS if c["method"] == "s2d2"])
def test_recorded_policy_inputs_redecide_to_recorded_decisions(kw, aligned):
    cfg = DecodeConfig(gen_length=30, **kw)
    res = s2d2.generate(aligned, PROMPTS[2], cfg, seed=1)
    steps = [s for s in res.trace.steps if s.decision is not None]
    again = redecide(cfg, [(s.policy_inputs, s.reward) for s in steps])
    assert [d.verify for d in again] == [s.decision.verify for s in steps]
    assert [d.score for d in again] == [s.decision.score for s in steps]


# -- reference defects not copied (docs/algorithm.md, 'Where we deviate from the reference code') ---------------------

def test_mask_token_is_never_drafted():
    m = tiny_qwen3_model(seed=0)
    m.lm_head.weight.data[MASK_ID] *= 0
    m.lm_head.weight.data[MASK_ID] += 50.0 * m.model.embed_tokens.weight.data.mean(0)  # argmax would be MASK
    model = from_transformers(m, mask_token_id=MASK_ID, stop_token_ids=[], logits="aligned")
    res = run(model, PROMPTS[0], method="s2d2", policy="always", block_length=4, gen_length=12, temperature=1.0)
    assert MASK_ID not in res.token_ids and len(res.token_ids) == 12


def test_rejected_draft_is_left_masked_without_resample(aligned):
    res = run(aligned, PROMPTS[0], method="s2d2", policy="always", block_length=8, gen_length=24,
              allow_resample=False, temperature=1.0)
    rejected = [s for s in res.trace.steps if s.verification.first_reject is not None]
    assert rejected, "the run should contain at least one rejection"
    for s in rejected:
        pos = s.verification.positions[s.verification.first_reject]
        committed = {c.position: c for c in s.commits}
        assert pos.position not in committed or committed[pos.position].how == "fallback"


def test_entropy_bounded_uses_per_position_entropy():
    from s2d2.decoding.remasking import select

    p = torch.tensor([0.9, 0.5, 0.99])
    ent = torch.tensor([0.2, 1.0, 0.05])
    picks, _ = select("entropy_bounded", p, ent, 1, 0.85, 0.3)
    assert picks.tolist() == [2, 0]  # ascending entropy while the running sum < 0.3


def test_static_topk_is_clamped_to_the_masks():
    from s2d2.decoding.remasking import select

    picks, _ = select("low_confidence_static", torch.tensor([0.3, 0.6]), torch.zeros(2), 5, 0.9, 0.3)
    assert sorted(picks.tolist()) == [0, 1]


# -- input checks -------------------------------------------------------------------------------------------------

def test_bad_prompts_raise_value_errors(aligned):
    cfg = DecodeConfig(gen_length=8)
    with pytest.raises(ValueError, match="prompt"):
        s2d2.generate(aligned, [], cfg)
    with pytest.raises(ValueError, match="mask"):
        s2d2.generate(aligned, [1, MASK_ID], cfg)
    with pytest.raises(ValueError, match="vocabulary"):
        s2d2.generate(aligned, [1, 10_000], cfg)
    with pytest.raises(ValueError, match="context"):
        s2d2.generate(aligned, list(range(1, 200)), DecodeConfig(gen_length=400))
    with pytest.raises(ValueError, match="tokenizer"):
        s2d2.generate(aligned, "text but no tokenizer", cfg)


def test_stop_and_time_limit_end_early_with_partial_output(aligned):
    res = s2d2.generate(aligned, PROMPTS[0], DecodeConfig(method="s2d2", block_length=4, gen_length=64),
                        should_stop=lambda: True)
    assert res.trace.footer.finish_reason == "cancelled"
    assert len(res.trace.blocks) == 1
    seen = []
    res = s2d2.generate(aligned, PROMPTS[0], DecodeConfig(method="diffusion", block_length=4, gen_length=16),
                        on_block=lambda steps: seen.append(len(steps)))
    assert seen == sorted(seen) and len(seen) >= 3


def _shape(t):
    """A run's records without their timings."""
    return ([(f.kind, f.block, f.step, f.cache_len, f.query_tokens) for f in t.forwards], t.blocks, t.steps,
            t.footer.output_ids)


BEYOND = {"kv_reuse": True, "fused_commit": True, "adaptive_block": True, "cache_ver": True, "draft_ver": True}


@pytest.mark.parametrize("family,options", [("aligned", {}), ("shifted", {}), ("aligned", {"method": "ar"}),
                                            ("aligned", BEYOND), ("shifted", {"fused_commit": True})])
def test_a_stop_raised_by_a_forward_keeps_the_run_up_to_its_last_complete_block(aligned, shifted, family, options):
    """Stop within one forward, nothing lost: whichever forward raises, the run ends there, and its trace is the one
    `should_stop` gives at the end of the last complete block (AR: the full run up to the last token): a prefix of
    the full run, valid and replayable."""
    model = aligned if family == "aligned" else shifted
    cfg = DecodeConfig(**{"method": "s2d2", "block_length": 4, "gen_length": 16, **options})
    full = s2d2.generate(model, PROMPTS[1], cfg).trace
    forwards, blocks, steps, output = _shape(full)
    kept = set()
    for n in range(len(full.forwards)):
        stopped = StopAt(model, n)
        t = s2d2.generate(stopped, PROMPTS[1], cfg).trace
        assert stopped.calls == n and t.footer.finish_reason == "cancelled"
        f, b, s, out = _shape(t)
        assert (f, b, s, out) == (forwards[:len(f)], blocks[:len(b)], steps[:len(s)], output[:len(out)])
        assert out == t.replay() and Trace.from_json(t.to_json()).to_dict() == t.to_dict()  # valid, replayable
        if cfg.method != "ar" and t.blocks:  # exactly what should_stop gives after the same blocks
            checks = iter(range(1, len(full.blocks) + 1))
            same = s2d2.generate(model, PROMPTS[1], cfg, should_stop=lambda: next(checks) == len(t.blocks)).trace
            assert _shape(same) == (f, b, s, out)
        kept.add(len(t.blocks))
    assert kept == set(range(len(full.blocks)))  # every block boundary is reached by some stop
