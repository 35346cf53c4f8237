"""AR-mode log-likelihoods (s2d2/harness/loglik.py) against a direct causal forward per token."""
from __future__ import annotations

import math

import pytest
import torch

from tests.support.tiny_models import MASK_ID, tiny_qwen2, tiny_qwen3
from s2d2.harness.loglik import log_probs, score_continuations


@torch.no_grad()
def direct_logprobs(model, context: list[int], cont: list[int]) -> tuple[float, bool]:
    """One fresh causal forward per token: aligned, a MASK at the token's position after the tokens before it (the
    model's block-size-1 mode); shifted, the plain next-token logit."""
    aligned = model.spec.alignment == "aligned"
    total, greedy = 0.0, True
    for i, token in enumerate(cont):
        ids = context + cont[:i] + ([MASK_ID] if aligned else [])
        x = torch.tensor(ids)
        logits = model.model(input_ids=x[None], position_ids=torch.arange(len(ids))[None]).logits[0, -1:]
        lp = log_probs(logits, MASK_ID)[0]
        total += float(lp[token])
        greedy = greedy and int(lp.argmax()) == token
    return total, greedy


@torch.no_grad()
def greedy_continuation(model, context: list[int], n: int) -> list[int]:
    out: list[int] = []
    for _ in range(n):
        aligned = model.spec.alignment == "aligned"
        ids = torch.tensor(context + out + ([MASK_ID] if aligned else []))
        logits = model.model(input_ids=ids[None], position_ids=torch.arange(len(ids))[None]).logits[0, -1:]
        out.append(int(log_probs(logits, MASK_ID)[0].argmax()))
    return out


@pytest.mark.parametrize("build", [tiny_qwen3, tiny_qwen2], ids=["aligned", "shifted"])
@pytest.mark.parametrize("max_rows", [256, 6], ids=["grouped", "chunked"])
def test_loglikelihood_equals_direct_causal_forward(build, max_rows: int) -> None:
    model = build()
    context = [5, 17, 42, 8, 99, 3 + 100]
    conts = [[7], [11, 12], [250, 3, 77, 19, 4], greedy_continuation(model, context, 4), [60] * 9]
    scores, forwards = score_continuations(model, context, conts, max_rows=max_rows)
    assert len(scores) == len(conts)
    for cont, got in zip(conts, scores):
        want, want_greedy = direct_logprobs(model, context, cont)
        assert got.logprob == pytest.approx(want, rel=1e-6, abs=1e-6), cont  # forward() returns float32 logits
        assert got.greedy == want_greedy
        assert got.logprob < 0 and math.isfinite(got.logprob)
    assert scores[3].greedy  # the model's own greedy continuation
    assert forwards >= 2


def test_shared_context_is_one_prefill_and_one_forward() -> None:
    model = tiny_qwen3()
    calls = []
    forward = model.forward

    def counting(*args, **kwargs):
        calls.append(int(args[1].shape[0]))
        return forward(*args, **kwargs)

    model.forward = counting
    _, forwards = score_continuations(model, [1, 2, 3], [[4], [5, 6], [7, 8, 9]])
    assert forwards == 2 and calls == [3, 2 * (1 + 2 + 3)]


def test_empty_inputs_are_refused() -> None:
    with pytest.raises(ValueError, match="at least one token"):
        score_continuations(tiny_qwen3(), [], [[1]])
