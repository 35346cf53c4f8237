"""Block-level forwards of the block loop: prefill, commit, the fused commit+draft, the right-shifted AR seed, and
the right-shifted stop rule.

* commit (§2.7): stores the finished block's KV, causal with cache_ver, else block-bidirectional. With kv_reuse
  only the uncached tail [start + cached, end) is processed, and nothing at all when it is empty.
* commit+draft (`fused_commit`, beyond the paper): the next block's first draft forward carries the previous
  block's uncached tail as rows `[tail | block]` (masks.fused_draft_mask); the tail's KV is kept, the block's is
  cropped. Right-shifted models: the new block's position 0 goes in as MASK and is seeded from the tail's last
  row, which is exactly the commit's last logit (no extra NFE, as without fusing).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import torch

from ..models.masks import block_causal_mask, fused_draft_mask
from ..trace import BlockRecord, Commit, StepRecord
from .kv import kept_prefix_rows
from .sampling import token_distribution

if TYPE_CHECKING:
    from .step import StepContext


def prefill(ctx: "StepContext", n: int, want_logits: bool) -> Optional[torch.Tensor]:
    """Store the prompt's full blocks: block-causal, or causal with cache_ver. Returns the last logit if asked."""
    if n == 0:
        return None
    attention = "causal" if ctx.cfg.cache_ver else block_causal_mask(n, ctx.cfg.block_length, 0, ctx.x.device)
    logits = ctx.rec.forward("prefill", -1, -1, ctx.cache, ctx.x[:n], torch.arange(n, device=ctx.x.device),
                             attention, keep=n, last=1)
    return logits if want_logits else None


def commit_block(ctx: "StepContext", blk: BlockRecord) -> Optional[torch.Tensor]:
    """Store the block's uncached positions; returns the last logit (None when everything was cached)."""
    lo, end = blk.start + ctx.cached, blk.start + blk.length
    ctx.cached = 0
    if lo >= end:
        return None
    positions = torch.arange(lo, end, device=ctx.x.device)
    return ctx.rec.forward("commit", blk.index, -1, ctx.cache, ctx.x[lo:end], positions,
                           "causal" if ctx.cfg.cache_ver else "full", keep=end - lo, last=1)


def carry_tail(ctx: "StepContext", blk: BlockRecord) -> Optional[StepRecord]:
    """The fused commit+draft forward that opens `blk`; leaves its draft logits in ctx.carried.

    Returns the AR-seed step of a right-shifted model (None for position-aligned ones).
    """
    assert ctx.tail is not None
    t0, t1 = ctx.tail
    ctx.tail = None
    t, start, B = t1 - t0, blk.start, blk.length
    block_ids = ctx.x[start : start + B]
    masked = (block_ids == ctx.mask_id).nonzero()
    first_mask = int(masked[0, 0]) if masked.numel() else B
    prefix = first_mask if ctx.cfg.draft_ver else 0
    keep = kept_prefix_rows(ctx, prefix)
    mask = fused_draft_mask(ctx.cache.get_seq_length(), t, B, ctx.cfg.cache_ver, prefix, ctx.x.device)
    ids = torch.cat([ctx.x[t0:t1], block_ids])
    logits = ctx.rec.forward("commit+draft", blk.index, 0, ctx.cache, ids,
                             torch.arange(t0, start + B, device=ctx.x.device), mask, keep=t + keep)
    ctx.cached = keep
    ctx.carried = (logits, -t if ctx.aligned else 1 - t)  # block position i is drafted by row t + i (- 1)
    if ctx.aligned:
        return None
    return ar_seed(ctx, logits[t - 1 : t], start, blk.index)


def ar_seed(ctx: "StepContext", logits: torch.Tensor, position: int, block: int) -> StepRecord:
    """Right-shifted family: argmax of the last logit becomes the next block's first token (no extra NFE)."""
    probs = token_distribution(logits[-1:], ctx.cfg, ctx.mask_id)
    token = int(torch.argmax(probs, dim=-1))
    ctx.x[position] = token
    text = ctx.rec.text(token) if ctx.rec.detailed else ""
    return StepRecord(-1, block, -1, [position, position + 1], [ctx.rec.last_index], [position], [], [position, 0],
                      None, None, None, 0, [Commit(position, token, text, "ar_seed")])


def stop_reached(ctx: "StepContext", blk: BlockRecord, stops: torch.Tensor) -> bool:
    """Right-shifted stop rule (the Fast-dLLM v2 reference): a stop id in the generated part of the block with no
    mask to its left. Earlier blocks are complete and stop-free, so looking inside the block is enough."""
    lo = max(ctx.prompt_len, blk.start)
    region = ctx.x[lo : blk.start + blk.length]
    hits = torch.isin(region, stops).nonzero()
    if hits.numel() == 0:
        return False
    return not bool((region[: int(hits[0, 0])] == ctx.mask_id).any())
