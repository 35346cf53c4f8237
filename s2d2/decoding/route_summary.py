"""What a routing policy reads, for many draft rows at once: α over each row's first mask span, K̂, N_hi, the mean
normalized entropy and (routing in seconds) the span's sure prefix (docs/algorithm.md, 'Acceptance estimators',
'Routing policies').

Why one function for many rows: the batch-first engine (lockstep_verify.py) routes every S2D2 draft row of a step
together, and batch 1 (step.py `policy_summary`) runs the same rule (`span_summary`, written over any leading
dims) on its one span, so there is one copy of the rule.
Rows are bucketed by the shape their reductions run over (span length; with `ucb_entropy_scope` "masks" also the mask
count), so every reduction runs over exactly the elements a lone row's does, with nothing padded: an inner-dimension
reduction of a stacked [R, s, V] gives each row the bits its own [s, V] gives (a sum over padding would not;
checked on the CPU kernels, tests/lib/test_batch_rows.py; a GPU kernel may pick its summation order by shape, so
there a row may differ from batch 1 by rounding, as the shared forward's logits already do). The tensor work is
a fixed number of operations per bucket, at most one bucket per span length, whatever the number of rows; what
is left per row is picking its own views out of the bucket's results.
"""
from __future__ import annotations

from typing import NamedTuple, Optional, Sequence

import torch

from ..config import DecodeConfig
from ..estimators import acceptance_alphas, expected_accepted_tokens, normalized_entropy


class SummaryParts(NamedTuple):
    """The routing summary of many rows as the tensors it was computed in: `n_hi` [R] (every row), and per bucket
    of rows sharing a span length its rows (indices into the caller's rows) and their parts ([len(rows), ...] each:
    "alphas", "k_hat", "mean_entropy", and "sure_prefix" when asked). Row j's values are those of its lone call."""

    n_hi: torch.Tensor
    buckets: list[tuple[list[int], dict[str, torch.Tensor]]]


def summary_parts(cfg: DecodeConfig, probs: torch.Tensor, p: torch.Tensor, sizes: Sequence[int],
                  span_lens: Sequence[int], sure_prefix: bool = False) -> SummaryParts:
    """`span_summary` over the rows of each span length at once, and N_hi (its masks' drafts above τ) from one
    running count; the batch-first engine reads these tensors once for all rows (transfers.py `Bulk`).

    `probs` [N, V] and `p` [N] hold the rows' masked positions one row after another (row j has `sizes[j]` of
    them, its first span the first `span_lens[j]`); all rows share `cfg`'s estimator and thresholds. Invariant: row
    j's values are those of this call with row j alone, bit for bit.
    """
    starts = [0]
    for n in sizes[:-1]:
        starts.append(starts[-1] + n)
    n_hi = _counts(p > cfg.confidence_threshold, starts, sizes)
    grouped: dict[tuple[int, int], list[int]] = {}
    for j, (n, s) in enumerate(zip(sizes, span_lens)):
        grouped.setdefault((s, n if cfg.ucb_entropy_scope != "span" else 0), []).append(j)
    buckets = []
    for (s, n), rows in grouped.items():
        span, p_span = _rows(probs, starts, rows, s), _rows(p, starts, rows, s)
        every = _rows(probs, starts, rows, n) if cfg.ucb_entropy_scope != "span" else None
        buckets.append((rows, span_summary(cfg, span, p_span, every, sure_prefix)))
    return SummaryParts(n_hi, buckets)


def span_summary(cfg: DecodeConfig, span: torch.Tensor, p_span: torch.Tensor, every: Optional[torch.Tensor],
                 sure_prefix: bool) -> dict[str, torch.Tensor]:
    """α, K̂, the mean normalized entropy and (routing in seconds) the sure prefix of first spans of one length:
    `span` [..., s, V] and `p_span` [..., s] (no leading dim: one span, as batch 1 holds it; [R, ...]: R rows at
    once). `every`: the masks' distributions [..., n, V] when the entropy is taken over all of them
    (`ucb_entropy_scope` "masks"). Every operation is elementwise or over a row's own last dims, so a row's values
    do not depend on the rows beside it."""
    h_span = normalized_entropy(span) if every is None else None  # shared with the estimator
    alphas = acceptance_alphas(cfg, span, p_span, entropy=h_span)
    out = {
        "alphas": alphas if alphas.dtype == torch.float32 else alphas.float(),
        "k_hat": expected_accepted_tokens(alphas).to(torch.float32),  # type: ignore[union-attr]
        "mean_entropy": (h_span if h_span is not None else normalized_entropy(every)).mean(-1),
    }
    if sure_prefix:  # routing in seconds: how many of the span's leading drafts are above τ
        out["sure_prefix"] = torch.cumprod((p_span > cfg.confidence_threshold).to(torch.long), dim=-1).sum(-1)
    return out


def _counts(hi: torch.Tensor, starts: list[int], sizes: Sequence[int]) -> torch.Tensor:
    """[R] each row's N_hi (its masks' drafts above τ) from one running count: integers, so exact in any order."""
    if len(sizes) == 1:
        return hi.sum().unsqueeze(0)
    running = torch.cat([hi.new_zeros(1, dtype=torch.long), hi.to(torch.long).cumsum(0)])
    ends = torch.tensor([a + n for a, n in zip(starts, sizes)], device=hi.device)
    return running[ends] - running[ends - torch.tensor(list(sizes), device=hi.device)]


def _rows(values: torch.Tensor, starts: list[int], rows: list[int], width: int) -> torch.Tensor:
    """[len(rows), width, ...]: each listed row's first `width` values (one gather; a lone row's is a view)."""
    if len(rows) == 1:
        return values.narrow(0, starts[rows[0]], width).unsqueeze(0)
    at = torch.tensor([starts[j] for j in rows], device=values.device)[:, None] + torch.arange(width,
                                                                                               device=values.device)
    return values[at]
