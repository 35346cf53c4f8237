"""Block-level forwards of the block loop: prefill, commit, the fused commit+draft, the right-shifted AR seed, and
the right-shifted stop rule.

* commit (docs/algorithm.md, 'The block loop, stopping and output'): stores the finished block's KV, causal with
  cache_ver, else block-bidirectional. With kv_reuse only the uncached tail [start + cached, end) is processed, and
  nothing at all when it is empty.
* commit+draft (`fused_commit`, beyond the paper): the next block's first draft forward carries the previous
  block's uncached tail as rows `[tail | block]` (masks.fused_draft_pattern); the tail's KV is kept, the block's is
  cropped. Right-shifted models: the new block's position 0 goes in as MASK and is seeded from the tail's last
  row, which is exactly the commit's last logit (no extra NFE, as without fusing).
"""
from __future__ import annotations

from typing import Optional

import torch

from ..config import DecodeConfig
from ..models.base import ForwardRequest
from ..models.masks import block_causal_mask, fused_draft_query
from ..trace import BlockRecord, Commit, StepRecord
from .kv import kept_prefix_rows
from .sampling import token_distribution
from .context import StepContext



def prefill(ctx: StepContext, n: int, want_logits: bool) -> Optional[torch.Tensor]:
    """Store the prompt's full blocks: block-causal, or causal with cache_ver. Returns the last logit if asked."""
    if n == 0:
        return None
    logits = ctx.rec.forward("prefill", -1, -1, *prefill_request(ctx, n))
    return logits if want_logits else None


def prefill_request(ctx: StepContext, n: int) -> ForwardRequest:
    """`prefill`'s forward over the prompt's first n positions (n > 0), all kept, returning the last logit. Also
    the batch-first engine's (lockstep_block.py, lockstep_editing.py)."""
    attention = "causal" if ctx.cfg.cache_ver else block_causal_mask(n, ctx.cfg.block_length, 0, ctx.x.device)
    return ForwardRequest(ctx.cache, ctx.x[:n], ctx.index[:n], attention, n, 1)


def commit_block(ctx: StepContext, blk: BlockRecord) -> Optional[torch.Tensor]:
    """Store the block's uncached positions; returns the last logit (None when everything was cached)."""
    request = commit_request(ctx, blk)
    ctx.cached = 0
    return None if request is None else ctx.rec.forward("commit", blk.index, -1, *request)


def commit_request(ctx: StepContext, blk: BlockRecord) -> Optional[ForwardRequest]:
    """The commit forward of the block's uncached positions [ctx.cached, B), all kept, returning the last logit;
    None when everything is cached already (kv_reuse). Also the batch-first engine's (lockstep_block.py)."""
    lo, end = blk.start + ctx.cached, blk.start + blk.length
    if lo >= end:
        return None
    return ForwardRequest(ctx.cache, ctx.x[lo:end], ctx.index[lo:end], "causal" if ctx.cfg.cache_ver else "full",
                          end - lo, 1)


def carry_tail(ctx: StepContext, blk: BlockRecord) -> Optional[StepRecord]:
    """The fused commit+draft forward that opens `blk`; leaves its draft logits in ctx.carried.

    Returns the AR-seed step of a right-shifted model (None for position-aligned ones). `ctx.masks` must already
    hold the block's masks.
    """
    request = fused_request(ctx, blk)
    ctx.tail = None
    logits = ctx.rec.forward("commit+draft", blk.index, 0, *request)
    return carry_logits(ctx, blk, logits, request)


def fused_request(ctx: StepContext, blk: BlockRecord) -> ForwardRequest:
    """`carry_tail`'s forward: [the previous block's uncached tail | this block], the tail stored as a commit would
    store it and the block drafted (its decoded prefix kept too with kv_reuse); every row returned. Also the
    batch-first engine's (lockstep_block.py)."""
    assert ctx.tail is not None
    t0, t1 = ctx.tail
    t, start, B = t1 - t0, blk.start, blk.length
    first_mask = ctx.masks[0] if ctx.masks else B
    prefix = first_mask if ctx.cfg.draft_ver else 0
    mask = fused_draft_query(t, B, ctx.cfg.cache_ver, prefix, ctx.x.device)
    ids = torch.cat([ctx.x[t0:t1], ctx.x[start : start + B]])
    return ForwardRequest(ctx.cache, ids, ctx.index[t0 : start + B], mask, t + kept_prefix_rows(ctx, prefix))


def carry_logits(ctx: StepContext, blk: BlockRecord, logits: torch.Tensor,
                 request: ForwardRequest) -> Optional[StepRecord]:
    """After the fused forward (`request`, `fused_request`'s): the block's kept prefix counts as cached, its draft
    logits wait in ctx.carried for the block's first draft step; a right-shifted model's tail logit seeds the
    block (its AR-seed step, else None)."""
    t = int(request.input_ids.shape[0]) - blk.length
    ctx.cached = request.keep - t
    ctx.carried = (logits, -t if ctx.aligned else 1 - t)  # block position i is drafted by row t + i (- 1)
    if ctx.aligned:
        return None
    ctx.masks = [m for m in ctx.masks if m != 0]
    return ar_seed(ctx, logits[t - 1 : t], blk.start, blk.index)


def ar_seed(ctx: StepContext, logits: torch.Tensor, position: int, block: int) -> StepRecord:
    """Right-shifted family: argmax of the last logit becomes the next block's first token (no extra NFE).

    The token is written on the device; the record gets it with the next read."""
    probs = token_distribution(logits[-1:], ctx.cfg, ctx.mask_id)
    token = torch.argmax(probs, dim=-1)[0]
    ctx.x[position] = token
    ctx.seeded.add(position)
    commit = Commit(position, -1, "", "ar_seed")
    ctx.reads.later(token, lambda v: _settle_seed(ctx, commit, int(v[0])))
    return StepRecord(-1, block, -1, [position, position + 1], [ctx.rec.last_index], [position], [], [position, 0],
                      None, None, None, 0, [commit])


def _settle_seed(ctx: StepContext, commit: Commit, token: int) -> None:
    commit.token = token
    commit.text = ctx.rec.text(token) if ctx.rec.detailed else ""
    if token in ctx.stop_set:
        ctx.stop_hits.append(commit.position)


def block_windows(cfg: DecodeConfig, blk: BlockRecord) -> list[tuple[int, int]]:
    """The block's windows [ws, we) in order: its sub-blocks, or the whole block (steps run in one window until it
    has no mask, then in the next)."""
    sb = cfg.sub_block_length or blk.length
    return [(blk.start + k, blk.start + k + sb) for k in range(0, blk.length, sb)]


def block_masks(ctx: StepContext, blk: BlockRecord) -> list[int]:
    """The block's masks when it begins (block-relative): every position past the prompt that no AR seed filled.
    Nothing writes ahead of the current block but a seed, so the host knows this without reading the sequence."""
    lo = max(0, ctx.prompt_len - blk.start)
    if not ctx.seeded:  # no AR seed (always so in the aligned family): every position past the prompt
        return list(range(lo, blk.length))
    return [i for i in range(lo, blk.length) if blk.start + i not in ctx.seeded]


def stopped_in(ctx: StepContext, lo: int, end: int) -> Optional[int]:
    """The first known stop id in positions [lo, end), after reading any token still on the device."""
    ctx.reads.flush()
    hits = [h for h in ctx.stop_hits if lo <= h < end]
    return min(hits) if hits else None


def stop_reached(ctx: StepContext, blk: BlockRecord) -> bool:
    """Right-shifted stop rule (the Fast-dLLM v2 reference): a stop id in the generated part of the block with no
    mask to its left. Earlier blocks are complete and stop-free, so looking inside the block is enough."""
    lo = max(ctx.prompt_len, blk.start)
    first = stopped_in(ctx, lo, blk.start + blk.length)
    return first is not None and not any(lo <= blk.start + m < first for m in ctx.masks)
