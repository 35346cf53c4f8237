"""The right-shifted family (Fast-dLLM v2) in the batch-first block loop (lockstep_block.py): what its rows do that
a position-aligned row does not, each part batch 1's own code (decoder.py `_decode_blocks`, `_decode_block`,
`_end_block`; step.py `draft_forward`; verify_branch.py `verify_probs`).

* **The AR seed.** The logit at row r predicts position r + 1, so the last logit of the prefill (when the prompt
  fills whole blocks) and of every commit but the last block's opens the next block: blocks.py `ar_seed`, which
  writes the token on the device and records its own step.
* **The stop rule.** The Fast-dLLM v2 reference ends a run mid-block: before each step, a stop id with no mask to
  its left ends it (blocks.py `stop_reached`), and before the commit forward a stop id anywhere in the generated
  part does, so that block's commit is never run (no forward batch 1 does not make). The batch-first step checks
  it for all its right-shifted rows at the end of a step, after one shared read of the tokens they still hold on
  the device (lockstep_block.py `_shifted_stops`), where batch 1 reads each alone.
* **Shifted rows.** A draft reads the logit at i − 1 for mask i (draft_plans.py computes those rows with the
  masks); the verifier is causal over the block up to the window's end with the drafts filled in, reading the
  span's rows one to the left, and the rows of one end are built together.
"""
from __future__ import annotations

from typing import Optional

import torch

from ..models.base import ForwardRequest
from .blocks import ar_seed, stop_reached, stopped_in
from .lockstep_rows import Row
from .result import number_steps
from .verify_branch import causal_verify_rows


def seeded_prefill(row: Row, logits: torch.Tensor) -> None:
    """After the prefill forward: a right-shifted row whose prompt fills whole blocks opens its first block with the
    prefill's last logit (decoder.py `_decode_blocks`)."""
    st = row.state
    ctx, B = st.ctx, row.prep.cfg.block_length
    if not ctx.aligned and ctx.prompt_len % B == 0:
        row.steps.append(ar_seed(ctx, logits, ctx.prompt_len, st.plan.first_start // B))


def seeded_commit(row: Row, logits: torch.Tensor, end: int, next_block: int) -> None:
    """After a commit forward: a right-shifted row's commit logit opens the next block (not after the last one)."""
    st = row.state
    if not st.ctx.aligned and end < st.plan.end:
        row.steps.append(ar_seed(st.ctx, logits, end, next_block))


def stopped_before(row: Row) -> None:
    """A right-shifted row's stop rule before its next forward (the row's phase is already set): before a step, a
    stop id with no mask to its left; before the commit, a stop id in the block. Either ends the row
    ("stop_token"); a position-aligned row never stops here. With nothing left to read and no stop id known
    (`stop_hits`), neither rule can find one: the row goes on without running them."""
    st = row.state
    ctx, blk = st.ctx, st.blk
    if ctx.aligned or blk is None or st.phase not in ("draft", "commit"):
        return
    if not ctx.stop_hits and not ctx.reads.pending:
        return
    if st.phase == "draft":
        stop = stop_reached(ctx, blk)
    else:
        stop = stopped_in(ctx, ctx.prompt_len, blk.start + blk.length) is not None
    if stop:
        row.finish("stop_token", number_steps(row.steps))


def causal_verify_requests(rows: list[Row]) -> list[ForwardRequest]:
    """Right-shifted rows' verifier forwards (verify_branch.py `verify_probs`, causal, nothing cached): each the
    block up to its window's end (lockstep_verify.py `verify_kind`'s end, kept as the row's `verifier`) with the
    drafts in its masks, reading the span's rows one to the left (the draft's read rows, draft_plans.py). The ids of
    all rows of one block length and end are built at once (verify_branch.py `causal_verify_rows`)."""
    out: list[Optional[ForwardRequest]] = [None] * len(rows)
    by_end: dict[tuple[int, int], list[int]] = {}
    for j, r in enumerate(rows):
        by_end.setdefault((r.state.ctx.B, r.state.verifier[2]), []).append(j)
    for (_, end), members in by_end.items():
        group = [rows[j].state for j in members]
        ids = causal_verify_rows(torch.stack([st.ids for st in group])[:, :end],
                                 [st.draft.mask_idx for st in group], [st.draft.tokens for st in group])
        positions = torch.stack([st.positions for st in group])[:, :end]
        for j, st, row_ids, row_pos in zip(members, group, ids.unbind(0), positions.unbind(0)):
            reads = st.read_rows
            span = st.step_plan.span_len
            out[j] = ForwardRequest(st.ctx.cache, row_ids, row_pos, "causal", 0, None,
                                    reads if int(reads.shape[0]) == span else reads[:span])
    return out  # type: ignore[return-value]
