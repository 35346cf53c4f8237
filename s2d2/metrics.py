"""Metrics computed from a trace alone, with vLLM's names for the speculative-decoding ones (docs/app-design.md,
'Metrics').

One pass over the forwards and one over the steps, with plain dicts for the counts: every finished decode builds
its metrics (a batch of 128 builds 128), so this runs once per sequence in every engine and shows in a batch's host
time per sequence (issue 37)."""
from __future__ import annotations

from bisect import bisect_right
from typing import Any

from .trace import FORWARD_KINDS, Trace


def trace_metrics(trace: Trace) -> dict[str, Any]:
    forwards, footer = trace.forwards, trace.footer
    nfe = len(forwards)
    by_kind: dict[str, int] = {}
    queries, fwd_wall = 0, 0.0
    for f in forwards:
        by_kind[f.kind] = by_kind.get(f.kind, 0) + 1
        queries += f.query_tokens
        fwd_wall += f.wall_s
    s = _step_counts(trace)
    generated = footer.generated_length if footer else 0
    wall = footer.wall_s if footer else fwd_wall
    n_drafts, spans, accepted, k_err = len(s.spans), s.spans, s.accepted, s.k_err
    draft_tokens, n_accepted = sum(spans), sum(accepted)
    longest = max(spans, default=0)
    accepted_past = _above(accepted, longest)  # per position i: the drafts that accepted more than i tokens
    histogram: dict[int, int] = {}
    for a in accepted:
        histogram[a] = histogram.get(a, 0) + 1
    return {
        "nfe": nfe,
        "nfe_by_kind": {k: by_kind[k] for k in FORWARD_KINDS if by_kind.get(k, 0)},
        "query_tokens": queries,
        "generated_tokens": generated,
        "tokens_per_forward": generated / nfe if nfe else 0.0,
        "nfe_per_token": nfe / generated if generated else None,
        "edits": s.edits,  # LLaDA2.x self-corrections (decoded tokens replaced)
        "edits_per_token": s.edits / generated if generated else 0.0,
        "steps": s.block_steps,
        "steps_per_block": s.block_steps / len(s.blocks) if s.blocks else 0.0,
        "verify_rate": n_drafts / s.decided if s.decided else 0.0,
        "num_drafts": n_drafts,
        "num_draft_tokens": draft_tokens,
        "num_accepted_tokens": n_accepted,
        "mean_acceptance_length": 1 + n_accepted / n_drafts if n_drafts else None,
        "tokens_per_verify": (n_accepted + s.rejections) / n_drafts if n_drafts else None,
        "draft_acceptance_rate": n_accepted / draft_tokens if draft_tokens else None,
        "acceptance_per_position": [n / n_drafts for n in accepted_past],
        "conditional_acceptance_per_position": [n / max(1, m) for n, m in zip(accepted_past, _above(spans, longest))],
        "acceptance_histogram": {str(k): histogram[k] for k in sorted(histogram)},
        "estimator_bias": sum(k_err) / len(k_err) if k_err else None,
        "estimator_mae": sum(abs(e) for e in k_err) / len(k_err) if k_err else None,
        "wall_seconds": wall,
        "forward_seconds": fwd_wall,
        "tokens_per_second": generated / wall if wall > 0 else None,
        "finish_reason": footer.finish_reason if footer else "",
    }


class _StepCounts:
    """What the metrics count over a trace's steps, gathered in one pass."""

    __slots__ = ("decided", "spans", "accepted", "rejections", "k_err", "blocks", "block_steps", "edits")

    def __init__(self) -> None:
        self.decided = self.rejections = self.block_steps = self.edits = 0
        self.spans: list[int] = []  # per verified step: its span length
        self.accepted: list[int] = []  # ... and its accepted length
        self.k_err: list[float] = []  # per verified step with policy inputs: K̂ minus what was accepted
        self.blocks: set[int] = set()  # blocks with a numbered step (step >= 0)


def _step_counts(trace: Trace) -> _StepCounts:
    out = _StepCounts()
    for s in trace.steps:
        if s.decision is not None:
            out.decided += 1
        v = s.verification
        if v is not None:
            out.spans.append(s.span[1])
            out.accepted.append(v.accepted_len)
            if v.first_reject is not None:
                out.rejections += 1
            if s.policy_inputs:
                out.k_err.append(s.policy_inputs.k_hat - v.accepted_len)
        if s.step >= 0:
            out.blocks.add(s.block)
            out.block_steps += 1
        if s.edits:
            out.edits += len(s.edits)
    return out


def _above(values: list[int], n: int) -> list[int]:
    """For i in 0..n-1, how many of `values` exceed i (one sort, not a pass per position: a batch finishes a
    trace per sequence)."""
    ordered = sorted(values)
    return [len(ordered) - bisect_right(ordered, i) for i in range(n)]
