"""What a step costs in seconds, for policies that route with measured forward costs (`cost_aware`).

The run's cost table (frozen when the decode began, `Recorder.costs`, recorded in the trace header) is evaluated at
this step's query counts: a draft of the block's uncached rest (what a skip step costs) and this step's verifier
(`verifier_extent`: the same count the verifier then runs). The result rides in `PolicyInputs.costs`, so the
decision is a pure function of recorded values.
"""
from __future__ import annotations

from ..config import DecodeConfig
from ..trace import StepCosts
from .context import StepContext
from .verify_branch import verifier_extent


def step_costs(ctx: StepContext, masks: list[int], span_len: int, window_end: int, skip_tokens: int,
               min_k: int, sure_prefix: int) -> StepCosts:
    """The StepCosts of a step over `masks` (block-relative; `window_end` block-relative too); `sure_prefix`: the
    span's leading drafts above τ."""
    table = ctx.rec.costs
    assert table is not None
    draft_q = ctx.B - ctx.cached
    _, verify_q = verifier_extent(ctx, masks, span_len, window_end)
    kind = "verify_2l" if ctx.aligned else "verify_causal"
    return StepCosts(draft_q, table.cost("draft", draft_q), verify_q, table.cost(kind, verify_q), skip_tokens, min_k,
                     min(sure_prefix, skip_tokens))


def skip_token_count(cfg: DecodeConfig, n_hi: int, min_k: int) -> int:
    """Tokens a baseline step decodes, from the count of masks above τ (loops that pick after routing): the dynamic
    rule takes every mask above τ when there are at least k_s of them, else the top k_s; the others take k_s (a
    lower bound for entropy_bounded)."""
    return max(min_k, n_hi) if cfg.remasking == "low_confidence_dynamic" else min_k
