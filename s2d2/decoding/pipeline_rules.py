"""What one block of the D2F pipeline decodes at a step, on the device (pure functions over one block's masks).

The D2F rule (the reference's `generate_block_single`): every mask whose draft probability is above
`confidence_threshold` (D2F's skip_threshold); a *complete* block (its predecessor is at least
`decoded_token_threshold` decoded) with none above takes its single best mask by `confidence_score` instead —
probability, top-1 minus top-2 margin, or negative entropy Σ p·log(p + 1e-10) (the reference's formula). This is
the dynamic rule of docs/algorithm.md, 'Remasking rules', with k = 1 for a complete block and k = 0 for an incomplete
one.

The reference rule (`pipeline_fallback="reference"`, S2D2 only: the fallback of `generate_block_speculative`): a
complete block takes every mask whose *score* is at least the threshold, else its best one; an incomplete block
takes nothing. It differs from the D2F rule in three ways (pipeline.py's docstring says why the default is D2F's).
"""
from __future__ import annotations

import torch

from ..estimators import top2_margin

NEG_ENTROPY_EPS = 1e-10  # the reference's epsilon inside the log


def confidence_scores(kind: str, probs: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
    """Per mask: the score a complete block's top-1 pick maximises (probs: [n, V], p: [n] the drafts' p)."""
    if kind == "probability":
        return p
    if kind == "margin":
        return top2_margin(probs)
    if kind == "neg_entropy":
        return (probs * torch.log(probs + NEG_ENTROPY_EPS)).sum(-1)
    raise ValueError(f"confidence_score: unknown value {kind!r}")


def top1(scores: torch.Tensor) -> torch.Tensor:
    """[n] bool: the best-scoring mask, the first of equal bests (`argmax`'s documented choice). The reference takes
    `torch.topk(scores, 1)`, which leaves ties to the kernel: on the CPU it picks another of equal bests depending
    on the length (of 8 equal scores, the 7th), so the page's decoder (s2d2_web/decoding/pipeline_rules.js, the
    first of equal bests) could not match it; the same values otherwise."""
    return torch.zeros_like(scores, dtype=torch.bool).index_fill_(0, scores.argmax().view(1), True)


def d2f_rule(p: torch.Tensor, scores: torch.Tensor, threshold: float,
             complete: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """(chosen [n] bool, used the top-1 [] bool) of one block by the D2F rule."""
    above = p > threshold
    if not complete:
        return above, torch.zeros((), dtype=torch.bool, device=p.device)
    none = ~above.any()
    return torch.where(none, top1(scores), above), none


def reference_rule(scores: torch.Tensor, threshold: float, complete: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """(chosen, used the top-1) of one block by the reference S2D2-on-D2F fallback."""
    if not complete:
        nothing = torch.zeros_like(scores, dtype=torch.bool)
        return nothing, torch.zeros((), dtype=torch.bool, device=scores.device)
    high = scores >= threshold
    none = ~high.any()
    return torch.where(none, top1(scores), high), none
