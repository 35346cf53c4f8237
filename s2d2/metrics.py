"""Metrics computed from a trace alone, with vLLM's names for the speculative-decoding ones (docs/app-design.md,
'Metrics')."""
from __future__ import annotations

from bisect import bisect_right
from collections import Counter
from typing import Any

from .trace import FORWARD_KINDS, Trace


def trace_metrics(trace: Trace) -> dict[str, Any]:
    forwards, steps = trace.forwards, trace.steps
    nfe = len(forwards)
    by_kind = Counter(f.kind for f in forwards)
    generated = trace.footer.generated_length if trace.footer else 0
    decided = [s for s in steps if s.decision is not None]
    verified = [s for s in steps if s.verification is not None]
    spans = [s.span[1] for s in verified]
    accepted = [s.verification.accepted_len for s in verified]
    rejections = sum(1 for s in verified if s.verification.first_reject is not None)
    n_drafts, draft_tokens, n_accepted = len(verified), sum(spans), sum(accepted)
    steps_per_block = Counter(s.block for s in steps if s.step >= 0)
    wall = trace.footer.wall_s if trace.footer else sum(f.wall_s for f in forwards)
    fwd_wall = sum(f.wall_s for f in forwards)
    longest = max(spans, default=0)
    accepted_past = _above(accepted, longest)  # per position i: the drafts that accepted more than i tokens
    k_err = [s.policy_inputs.k_hat - s.verification.accepted_len for s in verified if s.policy_inputs]
    edits = sum(len(s.edits) for s in steps)
    return {
        "nfe": nfe,
        "nfe_by_kind": {k: by_kind.get(k, 0) for k in FORWARD_KINDS if by_kind.get(k, 0)},
        "query_tokens": sum(f.query_tokens for f in forwards),
        "generated_tokens": generated,
        "tokens_per_forward": generated / nfe if nfe else 0.0,
        "nfe_per_token": nfe / generated if generated else None,
        "edits": edits,  # LLaDA2.x self-corrections (decoded tokens replaced)
        "edits_per_token": edits / generated if generated else 0.0,
        "steps": sum(steps_per_block.values()),
        "steps_per_block": sum(steps_per_block.values()) / len(steps_per_block) if steps_per_block else 0.0,
        "verify_rate": len(verified) / len(decided) if decided else 0.0,
        "num_drafts": n_drafts,
        "num_draft_tokens": draft_tokens,
        "num_accepted_tokens": n_accepted,
        "mean_acceptance_length": 1 + n_accepted / n_drafts if n_drafts else None,
        "tokens_per_verify": (n_accepted + rejections) / n_drafts if n_drafts else None,
        "draft_acceptance_rate": n_accepted / draft_tokens if draft_tokens else None,
        "acceptance_per_position": [n / n_drafts for n in accepted_past],
        "conditional_acceptance_per_position": [n / max(1, m) for n, m in zip(accepted_past, _above(spans, longest))],
        "acceptance_histogram": {str(k): v for k, v in sorted(Counter(accepted).items())},
        "estimator_bias": sum(k_err) / len(k_err) if k_err else None,
        "estimator_mae": sum(abs(e) for e in k_err) / len(k_err) if k_err else None,
        "wall_seconds": wall,
        "forward_seconds": fwd_wall,
        "tokens_per_second": generated / wall if wall > 0 else None,
        "finish_reason": trace.footer.finish_reason if trace.footer else "",
    }


def _above(values: list[int], n: int) -> list[int]:
    """For i in 0..n-1, how many of `values` exceed i (one sort, not a pass per position: a batch finishes a
    trace per sequence)."""
    ordered = sorted(values)
    return [len(ordered) - bisect_right(ordered, i) for i in range(n)]
