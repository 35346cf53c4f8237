"""A batch-first row's block loop between its steps (lockstep_block.py runs the steps): its state (`BlockState`,
what batch 1 keeps in `block_loop`'s locals and its StepContext) and the life of its blocks, each part decoder.py's
own order: open a block (its masks, its windows; with a previous block's tail to store, a fused first forward),
go from window to window after each step, end the block (the stop rule, a right-shifted AR seed, the progress check,
the next block's length and start), and the ends that need no commit forward (fused commits; KV reuse that cached
the whole block). Also the row's setup, rollback and result, which the engine (lockstep.py) calls."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import torch

from ..models.base import ForwardRequest
from ..policies import AdaptiveBlock
from ..trace import BlockRecord, StepRecord
from .adaptive_blocks import decoded_layout, next_block_length
from .blocks import block_masks, block_windows, carry_logits, stopped_in
from .context import Draft, StepContext, lay_out
from .draft_plans import plan_drafts
from .layout import BlockPlan
from .lockstep_rows import Row
from .lockstep_shifted import seeded_commit, stopped_before
from .lockstep_verify import read_pending
from .result import Kept, LoopResult, number_steps
from .step import Routed, StepPlan, window_has_mask


@dataclass
class BlockState:
    """A row's block-loop state: batch 1 keeps it in `block_loop`'s locals and its StepContext."""

    ctx: StepContext
    plan: BlockPlan
    kept: Kept
    schedule: list[int]
    phase: str = "prefill"  # "prefill", "fused", "draft", "verify" or "commit": what the row's next forward is
    blk: Optional[BlockRecord] = None
    step: int = 0
    windows: list[tuple[int, int]] = field(default_factory=list)  # the block's windows still to decode, in order
    step_plan: Optional[StepPlan] = None  # the step under way (from its draft request to its record)
    read_rows: Optional[torch.Tensor] = None  # ... the rows its draft reads (the masks', one left when shifted)
    rule: Optional[AdaptiveBlock] = None  # adaptive_block: the row's own rule for its next block's length
    first_step: int = 0  # the index of the current block's first step in the row's steps
    draft_keep: int = 0  # kv_reuse: the rows the draft under way keeps in the cache
    fused: Optional[ForwardRequest] = None  # fused_commit: the block's commit+draft forward under way
    verifier: Optional[tuple[str, str, int]] = None  # a verifying row's `verify_kind`, from its routing on
    draft: Optional[Draft] = None  # a verifying row's draft, waiting for its verify forward
    routed: Optional[Routed] = None  # ... and what its route read and decided
    waiting: Any = None  # between a step's device work and its shared read: (skip inputs, verifies) or a Tested
    ids: Optional[torch.Tensor] = None  # the current block's ids and positions: views of the sequence, taken once
    positions: Optional[torch.Tensor] = None  # per block (a view sees every write; its requests reuse them)


def start(model: Any, row: Row) -> None:
    """Lay out the row's sequence and open its first block (after the prefill, when the prompt fills a block)."""
    cfg = row.prep.cfg
    plan, ctx = lay_out(model, cfg, row.prep.ids, row.rec, row.generator, row.cache)
    x = ctx.x
    schedule = cfg.transfer_schedule() if not cfg.adaptive_block else [1]  # (decoder.py `_decode_block`'s)
    row.state = BlockState(ctx, plan, Kept(row.rec, x, row.blocks, row.steps), schedule,
                           rule=AdaptiveBlock(cfg) if cfg.adaptive_block else None)
    if plan.first_start == 0:  # nothing to prefill
        open_block(row, 0, 0)


def carry_fused(rows: list[Row], phases: list[str], logits: list[torch.Tensor]) -> list[torch.Tensor]:
    """fused_commit: after a row's commit+draft forward (blocks.py `carry_logits`), its block's first draft step
    drafts from that forward's logits (step.py `draft_step` with ctx.carried), planned now as batch 1 plans it after
    `carry_tail`: such a row joins this step's draft rows (its phase becomes "draft" in `phases`, its logits the
    draft's rows); a block with no mask left goes to its end (`commitless_ends`). On a right-shifted model the
    forward's tail logit first seeds the block, and the stop rule runs before the draft step, after one shared read
    of those rows' seeds (batch 1 reads its seed there, alone)."""
    fused = [j for j, phase in enumerate(phases) if phase == "fused"]
    if not fused:
        return logits
    logits = list(logits)
    for j in fused:
        st: BlockState = rows[j].state
        seed = carry_logits(st.ctx, st.blk, logits[j], st.fused)
        if seed is not None:  # right-shifted: the AR seed's step
            rows[j].steps.append(seed)
        st.ctx.tail, st.fused = None, None
        next_window(st)
    due = [rows[j] for j in fused if not rows[j].state.ctx.aligned and rows[j].state.phase == "draft"]
    read_pending(due)
    for r in due:
        stopped_before(r)
    drafting = [j for j in fused if rows[j].finish_reason is None and rows[j].state.phase == "draft"]
    for j in set(fused) - set(drafting):
        rows[j].state.ctx.carried = None  # a fused forward whose block needed no draft step (or stopped)
    plan_drafts([rows[j] for j in drafting])  # (plan_step counts the fused forward as the step's first)
    for j in drafting:
        ctx = rows[j].state.ctx
        (carried, offset), ctx.carried = ctx.carried, None
        logits[j] = carried.index_select(0, rows[j].state.step_plan.mask_idx - offset)
        phases[j] = "draft"
    return logits


def commitless_ends(rows: list[Row]) -> None:
    """A block that ends with no commit forward ends now, as batch 1's does, after one shared read of what its row
    still has on the device (a residual draw; batch 1 reads it there too, alone): with fused_commit (its tail is
    stored by the next block's first draft forward, `carry_fused`) and with kv_reuse when the block's last verify left
    every position cached (blocks.py `commit_request` is None)."""
    done = [r for r in rows if r.finish_reason is None and _commitless(r.state)]
    read_pending(done)
    while done:  # (a block opened here may end at once: it has no mask)
        for r in done:
            end_block(r, None)
        done = [r for r in done if r.finish_reason is None and _commitless(r.state)]


def _commitless(st: BlockState) -> bool:
    return st.phase == "commit" and (st.ctx.cfg.fused_commit or st.ctx.cached >= st.blk.length)


def stepped(r: Row, record: StepRecord) -> None:
    """A step is recorded: the next one, in this window, the next window with a mask, or the block's commit."""
    st: BlockState = r.state
    r.steps.append(record)
    st.step += 1
    st.step_plan = None
    next_window(st)


def next_window(st: BlockState) -> None:
    """Drop the windows without a mask (block_loop's `while any(...)` per window); none left: commit."""
    start = st.blk.start if st.blk is not None else 0
    while st.windows and not window_has_mask(st.ctx.masks, st.windows[0][0] - start, st.windows[0][1] - start):
        st.windows.pop(0)
    st.phase = "draft" if st.windows else "commit"


def open_block(r: Row, start: int, index: int, length: Optional[int] = None, why: str = "") -> None:
    """decoder.py's block start (`length`: an adaptive block's, else cfg's): its record, its masks; then its draft
    steps (or, with no mask, its commit)."""
    st: BlockState = r.state
    ctx, length = st.ctx, length or r.prep.cfg.block_length
    blk = BlockRecord(index, start, length, max(0, min(r.prompt_len - start, length)), why)
    r.blocks.append(blk)
    ctx.block_length, ctx.cached = blk.length, 0
    ctx.masks = block_masks(ctx, blk)
    st.blk, st.step, st.windows, st.first_step = blk, 0, block_windows(ctx.cfg, blk), len(r.steps)
    st.ids, st.positions = ctx.x[start : start + length], ctx.index[start : start + length]
    if ctx.tail is not None:  # fused_commit: the block's first forward also stores the last block's tail
        st.phase = "fused"
    else:
        next_window(st)


def end_block(r: Row, logits: Optional[torch.Tensor]) -> None:
    """After the commit forward (`logits`: its last row's; None with no commit forward: a fused commit, or kv_reuse that
    cached the whole block): decoder.py's stop rule, a right-shifted row's AR seed of the next block, the progress
    check and the next block (or the end)."""
    st: BlockState = r.state
    blk = st.blk
    assert blk is not None
    end = blk.start + blk.length
    stopped = stopped_in(st.ctx, r.prompt_len, end) is not None
    if st.ctx.cfg.fused_commit and not stopped and end < st.plan.end and blk.start + st.ctx.cached < end:
        st.ctx.tail = (blk.start + st.ctx.cached, end)  # stored by the next block's first draft (decoder.py)
    st.ctx.cached = 0
    finish = "stop_token" if stopped else None
    if finish is None:
        if logits is not None:  # (a fused commit's seed comes from the next block's first forward)
            seeded_commit(r, logits, end, blk.index + 1)
        finish = r.check(number_steps(r.steps))
    if finish is not None:
        r.finish(finish, number_steps(r.steps))
        return
    st.kept.mark()
    if end < st.plan.end:
        length, why = next_block_length(st.rule, r.prep.cfg, blk, r.steps[st.first_step :], end)
        open_block(r, end, blk.index + 1, length, why)
    else:
        r.finish("length", number_steps(r.steps))


def cancel(row: Row) -> None:
    """The row's own forward raised StopDecoding: back to its last complete block, as block_loop's rollback."""
    blocks, steps = row.state.kept.restore(row.state.ctx.mask_id)
    row.blocks, row.finish_reason, row.steps = blocks, "cancelled", steps


def result(model: Any, row: Row) -> LoopResult:
    """The row's LoopResult as block_loop returns it."""
    assert row.finish_reason is not None
    row.state.ctx.reads.flush()
    return LoopResult(decoded_layout(row.state.ctx.x, row.prep.cfg, row.blocks), row.blocks, row.steps,
                      row.finish_reason)
