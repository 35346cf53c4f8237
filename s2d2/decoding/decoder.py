"""The block loop: prefill, then per block the steps of each window, then the end of the block (docs/algorithm.md,
'The block loop, stopping and output', 'One step').

Methods `diffusion` and `s2d2` share this loop (a `diffusion` run has no policy); `ar` lives in ar.py.

Budget and stop rule, per family (each as its reference decoder does it):

* position-aligned (SDAR): the blocks cover P + G positions (`ceil((P+G)/B)` blocks from the one holding the prompt
  tail); every block is finished and committed, and the run ends after a block whose generated region holds a stop
  id. This is the SDAR reference's loop, so the SDAR presets match it decision for decision.
* right-shifted (Fast-dLLM v2): `G // B` blocks (at least one) from the one holding the prompt tail, as the
  reference's `max_new_tokens // block_size`; the run stops mid-block, before any further forward, as soon as a stop
  id has no mask to its left (`blocks.stop_reached`), and a block that ends that way is not committed. The output is
  cut at the stop id, whose index is the trace's `stop_position`.

End of a block: the commit forward (paper), or with `fused_commit` (beyond the paper) nothing now: the next block's
first draft forward caches the uncached tail, and the last block (or one whose output already stopped) is never
committed, since nothing reads its KV. With `adaptive_block` (beyond the paper) the next block's length comes from
the finished block's verifications (s2d2/policies/adaptive_block.py).

A StopDecoding raised by the model's forward (the app's Stop) ends the run at once, rolled back to its last complete
block (result.py `Kept`): the trace `should_stop` would have given at that block's end.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Optional

import torch

from ..config import DecodeConfig
from ..policies import AdaptiveBlock
from ..trace import BlockRecord, StepRecord
from .adaptive_blocks import decoded_layout, next_block_length
from .blocks import (ar_seed, block_masks, block_windows, carry_tail, commit_block, prefill, stop_reached,
                     stopped_in)
from .context import StepContext, lay_out
from .draws import Source
from .layout import BlockPlan
from .forwards import Recorder
from .result import Kept, LoopResult, StopDecoding, number_steps
from .step import run_step, window_has_mask


@torch.inference_mode()  # no autograd bookkeeping on any op of the loop
def block_loop(model: Any, cfg: DecodeConfig, prompt: torch.Tensor, rec: Recorder, generator: Source,
               check: Callable[[list[StepRecord]], Optional[str]]) -> LoopResult:
    plan, ctx = lay_out(model, cfg, prompt, rec, generator, model.new_cache())
    x, mask_id = ctx.x, ctx.mask_id
    rule = AdaptiveBlock(cfg) if cfg.adaptive_block else None
    steps: list[StepRecord] = []
    blocks: list[BlockRecord] = []
    kept = Kept(rec, x, blocks, steps)
    try:
        return _decode_blocks(ctx, plan, rule, blocks, steps, check, kept)
    except StopDecoding:
        return _result(ctx, *kept.restore(mask_id), "cancelled")


def _decode_blocks(ctx: StepContext, plan: BlockPlan, rule: Optional[AdaptiveBlock], blocks: list[BlockRecord],
                   steps: list[StepRecord],
                   check: Callable[[list[StepRecord]], Optional[str]], kept: Kept) -> LoopResult:
    """Prefill, then block after block until the plan's end or a stop; `kept` follows the last complete block."""
    cfg, P, shifted = ctx.cfg, ctx.prompt_len, not ctx.aligned
    seed_logits = prefill(ctx, plan.first_start, shifted and P % cfg.block_length == 0)
    if seed_logits is not None:
        steps.append(ar_seed(ctx, seed_logits, P, plan.first_start // cfg.block_length))
    kept.mark()
    start, length, why = plan.first_start, cfg.block_length, ""
    index = start // length
    while start < plan.end:
        blk = BlockRecord(index, start, length, max(0, min(P - start, length)), why)
        blocks.append(blk)
        first_step, last = len(steps), start + length >= plan.end
        finish = _decode_block(ctx, blk, steps) or _end_block(ctx, blk, steps, last)
        if finish is None:
            finish = check(number_steps(steps))
        if finish is not None:
            return _result(ctx, blocks, steps, finish)
        kept.mark()
        start += length
        index += 1
        length, why = next_block_length(rule, cfg, blk, steps[first_step:], start)
    return _result(ctx, blocks, steps, "length")


def _decode_block(ctx: StepContext, blk: BlockRecord, steps: list[StepRecord]) -> Optional[str]:
    """Every step of the block's windows; "stop_token" when the right-shifted stop rule ends the run mid-block."""
    ctx.block_length, ctx.cached = blk.length, 0
    ctx.masks = block_masks(ctx, blk)  # the host's view of the block from here on (steps keep it current)
    if ctx.tail is not None:  # fused_commit: this block's first draft also caches the previous block's tail
        seed = carry_tail(ctx, blk)
        if seed is not None:
            steps.append(seed)
    schedule = ctx.cfg.transfer_schedule() if not ctx.cfg.adaptive_block else [1]
    step = 0
    for ws, we in block_windows(ctx.cfg, blk):
        while window_has_mask(ctx.masks, ws - blk.start, we - blk.start):
            if not ctx.aligned and stop_reached(ctx, blk):
                return "stop_token"
            k_s = schedule[min(step, len(schedule) - 1)]
            steps.append(run_step(ctx, blk.index, blk.start, (ws, we), step, k_s))
            step += 1
    ctx.carried = None  # a fused forward whose block needed no draft step
    return None


def _end_block(ctx: StepContext, blk: BlockRecord, steps: list[StepRecord], last: bool) -> Optional[str]:
    """Commit the block (or hand its tail to the next draft); "stop_token" when the output has stopped.

    Reads the tokens still on the device (the block's records are complete after this)."""
    end = blk.start + blk.length
    stopped = stopped_in(ctx, ctx.prompt_len, end) is not None
    if stopped and not ctx.aligned:  # the Fast-dLLM v2 reference stops before committing such a block
        return "stop_token"
    if ctx.cfg.fused_commit:
        if not (last or stopped) and blk.start + ctx.cached < end:  # nothing reads the last block's KV
            ctx.tail = (blk.start + ctx.cached, end)
        ctx.cached = 0
    else:
        logits = commit_block(ctx, blk)
        if not ctx.aligned and not last and logits is not None:  # the commit's last logit opens the next block
            steps.append(ar_seed(ctx, logits, end, blk.index + 1))
    return "stop_token" if stopped else None


def _result(ctx: StepContext, blocks: list[BlockRecord], steps: list[StepRecord], reason: str) -> LoopResult:
    """The allocated layout; with adaptive blocks it ends where the last decoded block ends."""
    ctx.reads.flush()
    return LoopResult(decoded_layout(ctx.x, ctx.cfg, blocks), blocks, number_steps(steps), reason)


def make_check(should_stop: Callable[[], bool] | None, max_seconds: float | None,
               on_block: Callable[[list[StepRecord]], None] | None) -> Callable[[list[StepRecord]], str | None]:
    """A per-block hook that streams progress and says why to stop early ("cancelled", "time_limit") or None."""
    t0 = time.perf_counter()

    def check(steps: list[StepRecord]) -> str | None:
        if on_block is not None:
            on_block(steps)
        if should_stop is not None and should_stop():
            return "cancelled"
        if max_seconds is not None and time.perf_counter() - t0 > max_seconds:
            return "time_limit"
        return None

    return check
