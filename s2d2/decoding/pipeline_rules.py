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


def block_rules(p: torch.Tensor, scores: torch.Tensor, block_of: torch.Tensor, col: torch.Tensor, done: torch.Tensor,
                width: int, threshold: float, reference: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """What many blocks decode at a step, at once: (chosen [n] bool, per mask; took its top-1 [blocks] bool).

    `p` and `scores` [n] are the masks' draft probabilities and scores; mask i sits in block `block_of[i]` at column
    `col[i]` (its place in its block, < `width`), a block's masks in ascending columns; `done` [blocks] bool is each
    block's complete flag (a block may have no mask). The D2F rule, or with `reference` the reference's fallback
    (module docstring). Batch 1 runs it on one sequence's blocks in flight, the batch-first engine
    (lockstep_pipeline.py) on every sequence's of one config: every op is elementwise or over a block's own row,
    so a block's picks do not depend on the blocks beside it, and nothing here reads or uploads host data.

    A block's masks sit in a row of width `width`, the rest padded: p with -1 (never above a threshold in [0, 1]),
    scores with -inf (never the best of a block that has a mask). A complete block's top-1 is the first of equal
    best scores (`argmax`'s documented choice). The reference takes `torch.topk(scores, 1)`, which leaves ties to
    the kernel (on the CPU, of 8 equal scores it picks the 7th), so the page's decoder (s2d2_web/decoding/
    pipeline_rules.js, the first of equal bests) could not match it; the values are the same otherwise.
    """
    blocks = int(done.shape[0])
    ranked = torch.full((blocks, width), -torch.inf, dtype=scores.dtype, device=scores.device)
    ranked[block_of, col] = scores
    if reference:
        high = ranked >= threshold
    else:
        padded = torch.full((blocks, width), -1.0, dtype=p.dtype, device=p.device)
        padded[block_of, col] = p
        high = padded > threshold
    has = torch.zeros(blocks, dtype=torch.bool, device=p.device).index_fill_(0, block_of, True)
    none = ~high.any(-1) & done & has  # a complete block with a mask and none above: its top-1 instead
    best = torch.zeros_like(high).scatter_(1, ranked.argmax(-1, keepdim=True), True)
    chosen = torch.where(none[:, None], best, high)
    if reference:  # an incomplete block takes nothing
        chosen &= done[:, None]
    return chosen[block_of, col], none
