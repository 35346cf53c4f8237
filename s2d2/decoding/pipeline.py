"""The pipeline loop (`loop="pipeline"`): D2F's pipelined block decoding, and S2D2 on top of it.

D2F (Discrete Diffusion Forcing; the reference's `D2F/generation_utils.py`) keeps several blocks in flight. The
prompt is a block of its own (bidirectional), and `G // B` blocks of B masks join after it, each attending
block-causally to the blocks before it (models/masks.segments_pattern). A step:

1. **Add** a block when the last one is `block_add_threshold` decoded (the prompt counts as fully decoded), unless a
   stop id was decoded or every block is in.
2. **Complete**: once a block is `decoded_token_threshold` decoded, the next one counts as complete (sticky).
3. **One forward** over [blocks to cache | every block in flight]: it stores the finished blocks' KV (the first
   forward stores the prompt) and drafts every mask in flight (pipeline_step.py).
4. **Decode**, per block, by the D2F rule (pipeline_rules.py); with method "s2d2" the policy first routes the first
   mask span after the cache, which may run across blocks, and a verify step checks it in AR mode (2L for
   position-aligned models, causal for right-shifted ones), exactly as the block loop's verifier does.
5. **Finish**: a block whose last mask is decoded is cached by the next forward once every earlier block is
   finished. The run ends when no block is in flight; the output is cut at the first stop id.

Every lifecycle change is a `BlockEvent` of the step it happens in (added, complete, finished, cached) and every
block a step touched has an `InFlight` row, so the trace shows which blocks were in flight at each step.

Deviations from the reference (phymhan/S2D2 `D2F/generation_utils.py`), per docs/algorithm.md,
'Where we deviate from the reference code':

* The mask token is never drafted (docs/algorithm.md, 'Sampling a draft'): the reference can draft it, and then counts
  the position as decoded while it still holds the mask token (its loop never ends on a random model).
* One sampling transform for p, q and the residual (docs/algorithm.md, 'Sampling a draft'): in greedy mode the reference
  applies top-p / top-k to the confidences too; here greedy is T = 1 with no top-k / top-p, as in every loop.
* S2D2: a block the verifier decoded nothing in runs the D2F rule (`pipeline_fallback="d2f"`, the default), so a
  step whose policy declines to verify is exactly a D2F step (docs/algorithm.md, 'One step', invariant 5: never verify ≡
  the baseline). The reference's fallback serves only complete blocks, thresholds the *score* (margin or negative
  entropy when those are on) with ≥ instead of the D2F rule's p >, and leaves an incomplete block alone unless the
  verifier reaches it, so its never-verify decoder is not D2F. `pipeline_fallback="reference"` reproduces it (the
  comparison in benchmarks/d2f_reference.py runs both).
* The verifier reads the in-flight region only up to the span's end: its rows are causal, so nothing after the span
  changes q there (same q in exact arithmetic). The reference forwards the whole in-flight region, twice over for
  the 2L layout, and fills every mask of it with drafts.
* Dream (right-shifted): the reference passes its mask as `attention_bias=`, an argument DreamModel.forward does not
  have (it lands in **loss_kwargs), so every Dream forward there runs with no mask at all: blocks see later blocks,
  and the "causal" verifier sees the very drafts it is testing. Here every forward has the mask the reference
  builds (D2F block-causal; causal for the verifier).
* `cache_ver` / `draft_ver` are refused: the reference asserts them equal and never reads them.
* A complete block's top-1 is the first of its equal best scores (pipeline_rules.py `block_rules`): the reference's
  `torch.topk(scores, 1)` leaves ties to the kernel, which picks another of equal scores by length and device.

A StopDecoding raised by the model's forward (the app's Stop) rolls the run back to its last complete step; `check`
runs after every step that finished a block ("cancelled", "time_limit").
"""
from __future__ import annotations

from typing import Any, Callable, Optional

import torch

from ..config import DecodeConfig
from ..trace import BlockEvent, BlockRecord, StepRecord
from .context import StepContext, lay_out
from .draws import Source
from .pipeline_state import PipeBlock, PipeState
from .pipeline_step import pipeline_step
from .forwards import Recorder
from .result import Kept, LoopResult, StopDecoding, number_steps


@torch.inference_mode()  # no autograd bookkeeping on any op of the loop
def pipeline_loop(model: Any, cfg: DecodeConfig, prompt: torch.Tensor, rec: Recorder, generator: Source,
                  check: Callable[[list[StepRecord]], Optional[str]]) -> LoopResult:
    plan, ctx = lay_out(model, cfg, prompt, rec, generator, model.new_cache())
    P, x, mask_id = ctx.prompt_len, ctx.x, ctx.mask_id
    st = PipeState(done=torch.zeros((plan.end - P) // cfg.block_length, dtype=torch.bool, device=x.device))
    steps: list[StepRecord] = []
    blocks: list[BlockRecord] = []
    kept = Kept(rec, x, blocks, steps)
    n_blocks = (plan.end - P) // cfg.block_length
    try:
        while True:
            events = begin_step(ctx, st, blocks, n_blocks)
            if events is None:
                break
            record = pipeline_step(ctx, st, events)
            reason = end_step(st, steps, record, check)
            if reason is not None:
                ctx.reads.flush()
                return LoopResult(x, blocks, number_steps(steps), reason)
            kept.mark()
        ctx.reads.flush()
        return LoopResult(x, blocks, number_steps(steps), "length")
    except StopDecoding:
        ctx.reads.flush()  # the kept steps' deferred values (a resampled token's record): every step is kept
        blocks, steps = kept.restore(mask_id)
        return LoopResult(x, blocks, steps, "cancelled")


def begin_step(ctx: StepContext, st: PipeState, blocks: list[BlockRecord], n_blocks: int) -> Optional[list[BlockEvent]]:
    """A step's lifecycle before its forward (steps 1-2): a block joins, blocks become complete. Returns the step's
    events so far, or None when no block is in flight (the run is over). Shared by batch 1 and the batch-first
    engine (lockstep_pipeline.py)."""
    events: list[BlockEvent] = []
    add_block(ctx, st, blocks, n_blocks, events)
    mark_complete(st, ctx.cfg.decoded_token_threshold, events)
    return events if any(b.state == "active" for b in st.blocks) else None


def end_step(st: PipeState, steps: list[StepRecord], record: StepRecord,
             check: Callable[[list[StepRecord]], Optional[str]]) -> Optional[str]:
    """After a step (step 5): its record kept, blocks finished; the progress check's reason to stop, run after a
    step that finished a block, else None."""
    finished = finish_blocks(st, record.events)
    steps.append(record)
    st.step += 1
    return check(number_steps(steps)) if finished else None


def wants_block(ctx: StepContext, st: PipeState, n_blocks: int) -> bool:
    """Whether a block may join now (blocks left, no stop id decoded, the last one far enough); before it does, a
    resampled token still on the device is read (`add_block`), since it may be a stop id."""
    if len(st.blocks) >= n_blocks or st.eos:
        return False
    progress = st.blocks[-1].decoded_ratio if st.blocks else 1.0
    return progress >= ctx.cfg.block_add_threshold


def add_block(ctx: StepContext, st: PipeState, blocks: list[BlockRecord], n_blocks: int,
              events: list[BlockEvent]) -> None:
    """Append a block of masks when the last block (the prompt at first) is block_add_threshold decoded."""
    if not wants_block(ctx, st, n_blocks):
        return
    if ctx.reads.pending:  # a resampled token still on the device may be a stop id: read it before deciding
        ctx.reads.flush()
        if st.eos:
            return
    B = ctx.cfg.block_length
    start = ctx.prompt_len + len(st.blocks) * B
    index = len(st.blocks) + 1
    st.blocks.append(PipeBlock(index, start, B, st.step, masks=list(range(start, start + B))))
    blocks.append(BlockRecord(index, start, B, 0))
    events.append(BlockEvent(index, "added"))


def mark_complete(st: PipeState, threshold: float, events: list[BlockEvent]) -> None:
    """A block whose predecessor (the prompt for the first) is `threshold` decoded counts as complete, for good."""
    previous = 1.0
    for b in st.blocks:
        if not b.complete and previous >= threshold:
            b.complete = True
            st.done[b.index - 1].fill_(True)  # (a scalar fill: no upload)
            events.append(BlockEvent(b.index, "complete"))
        previous = b.decoded_ratio


def finish_blocks(st: PipeState, events: list[BlockEvent]) -> bool:
    """End of a step: blocks with no mask left are finished; a finished block is cached by the next forward once no
    earlier block is in flight. True when a block finished at this step."""
    finished = False
    for b in st.blocks:
        if b.state == "active" and not b.masks and not b.finished:
            b.finished, finished = True, True
            events.append(BlockEvent(b.index, "finished"))
    earlier_active = False
    for b in st.blocks:
        if b.state == "active" and b.finished and not earlier_active:
            b.state = "to_cache"
        earlier_active = earlier_active or b.state == "active"
    return finished
