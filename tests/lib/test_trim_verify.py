"""`trim_verify` (issue 21, beyond the paper): the verifier queries only the rows its span reads. Same tokens and
decisions as the full verifier (float64: the read logits agree to rounding), fewer query tokens."""
from __future__ import annotations

import pytest
import torch

import s2d2
from components.views import attention_mask
from tests.support.tiny_models import tiny_qwen2, tiny_qwen3
from s2d2 import DecodeConfig
from s2d2.models import masks
from tests.support.tiny_models import sharpen

PROMPTS = [list(range(5, 15)), [3, 1, 4, 1, 5, 9, 2, 6], list(range(40, 72))]
CONFIGS = {
    "always-sampled": dict(policy="always", temperature=1.0),
    "threshold": dict(policy="score_threshold", score_threshold=0.5, score_type="difference_static",
                      penalty_coef=1.0, temperature=0.8),
    "sub-blocks": dict(policy="always", sub_block_length=4, temperature=1.0),
    "reuse-fused": dict(policy="always", kv_reuse=True, fused_commit=True, cache_ver=True, draft_ver=True,
                        temperature=1.0),
    "cost-aware": dict(policy="cost_aware", cache_ver=True, draft_ver=True, temperature=1.0),
}


@pytest.fixture(scope="module")
def models():
    return {"aligned": sharpen(tiny_qwen3(seed=0)), "shifted": sharpen(tiny_qwen2(seed=1))}


def test_trimmed_2l_pattern():
    for n in (1, 3, 8):
        assert torch.equal(masks.verify_2l_span_pattern(n, n), masks.verify_2l_pattern(n))
    p = masks.verify_2l_span_pattern(5, 2)  # first half 5 positions, the span is its last 2
    assert p[:5, 5:].sum() == 0 and torch.equal(p[:5, :5], masks.causal_pattern(5))
    assert p[5].tolist() == [True, True, True, False, False, True, False]  # span row 0 sees x~ before it, itself
    assert p[6].tolist() == [True, True, True, True, False, False, True]
    assert attention_mask.query_mask("verify_2l", 7, 8, True, span=2) == [[int(v) for v in r] for r in p]


@pytest.mark.parametrize("name", sorted(CONFIGS))
@pytest.mark.parametrize("family", ["aligned", "shifted"])
def test_same_tokens_decisions_and_q_with_fewer_queries(models, family, name):
    model, kw = models[family], CONFIGS[name]
    table = s2d2.trace.CostTable.nominal()  # cost_aware: the same costs both ways (its queries differ)
    saved = 0
    for prompt in PROMPTS:
        for seed in (0, 1):
            runs = [s2d2.generate(model, prompt, DecodeConfig(method="s2d2", block_length=8, gen_length=24,
                                                              trim_verify=trim, **kw), seed=seed, costs=table)
                    for trim in (False, True)]
            full, trim = (r.trace for r in runs)
            assert runs[0].token_ids == runs[1].token_ids
            assert [s.decision.verify for s in full.steps if s.decision] == [
                s.decision.verify for s in trim.steps if s.decision]
            for a, b in zip(full.steps, trim.steps):
                if a.verification is not None:
                    assert max(abs(x.q - y.q) for x, y in zip(a.verification.positions,
                                                               b.verification.positions)) < 1e-9
                    fa = [full.forwards[i] for i in a.forwards if full.forwards[i].kind.startswith("verify")][0]
                    fb = [trim.forwards[i] for i in b.forwards if trim.forwards[i].kind.startswith("verify")][0]
                    span_end = b.span[0] + b.span[1]  # absolute; the cache holds [0, cache_len)
                    if family == "aligned":  # first half [cached, span end), then the span's MASKs
                        assert fb.query_tokens == span_end - fb.cache_len + b.span[1]
                    else:  # causal pass up to the span's last position
                        assert fb.query_tokens == span_end - 1 - fb.cache_len
                    assert fb.query_tokens <= fa.query_tokens
            saved += runs[0].metrics["query_tokens"] - runs[1].metrics["query_tokens"]
    # always verifying with kv_reuse already queries just the span on an aligned model: the cached prefix is the
    # decoded one and the span runs to the block's end; everywhere else the trimmed verifier saves queries
    assert saved > 0 or (family, name) == ("aligned", "reuse-fused")


@pytest.mark.parametrize("family", ["aligned", "shifted"])
@pytest.mark.parametrize("options", [dict(), dict(kv_reuse=True, fused_commit=True)])
def test_greedy_exact_theorem_holds_trimmed(family, options):
    model = tiny_qwen3(seed=1) if family == "aligned" else tiny_qwen2(seed=1)
    for prompt in PROMPTS[:2]:
        ar = s2d2.generate(model, prompt, DecodeConfig(method="ar", gen_length=24)).token_ids
        sp = s2d2.generate(model, prompt, DecodeConfig(method="s2d2", policy="always", acceptance="greedy_exact",
                                                       cache_ver=True, draft_ver=True, block_length=8,
                                                       gen_length=24, trim_verify=True, **options)).token_ids
        assert sp == ar[: len(sp)] and len(sp) >= 16


def test_mask_viewer_draws_the_trimmed_verifier(models):
    res = s2d2.generate(models["aligned"], PROMPTS[0], DecodeConfig(method="s2d2", policy="always", block_length=8,
                                                                    gen_length=24, trim_verify=True))
    trace = res.trace
    step = next(s for s in trace.steps if s.verification is not None and s.span[1] < 8)
    f = next(trace.forwards[i] for i in step.forwards if trace.forwards[i].kind == "verify_2l")
    fig = attention_mask.mask_figure(trace, step.index + 1, "verify")  # the scrubber shows steps[value - 1]
    assert len(fig.data[0].z) == f.input_len and "span only" in fig.layout.title.text
    rows = attention_mask.row_positions(f, 0, step.span[1])
    assert rows[-step.span[1]:] == list(range(step.span[0], step.span[0] + step.span[1]))
    last = step.span[0] + step.span[1] - 1  # the span's last position: its MASK copy sees the drafts before it
    note = attention_mask.mask_figure(trace, step.index + 1, "verify", selected=last, copy_only=True).layout.title.text
    assert f"the MASK copy of position {last}" in note and f"drafts {rows[0]}–{last - 1}" in note
