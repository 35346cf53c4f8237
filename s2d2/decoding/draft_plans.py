"""The draft rows of a batch-first block step, planned together (lockstep_block.py): each row's step plan is batch
1's (step.py `plan_step`), and the positions of its window's masks, which its draft request reads as its rows and
its step as its draft's `mask_idx`, are located for many rows with a fixed number of tensor calls: batch 1 takes a
view of its index (masks in one run) or sorts its window (step.py `window_mask_index`). The values are batch 1's,
so each row's forward and trace are too."""
from __future__ import annotations

from typing import Any

import torch

from .lockstep_rows import Row
from .step import plan_step


def plan_drafts(rows: list[Row]) -> None:
    """Each draft row's step plan (step.py `plan_step`, kept for its request and `advance`), its masks located
    together: where they are one run, every such row's positions [run, run + n) cut from one flat range by one
    split (the values batch 1's view of `ctx.index` holds); where they are not, one sort per block length of the
    rows' blocks, keyed to each row's window (step.py `window_mask_index`'s key). Also each
    row's `read_rows`, the rows its draft forward reads: its masks, or on a right-shifted model (one model per
    batch, so every row's family is the first's) one to the left, as step.py `draft_forward` takes them, shifted
    once per group rather than once per row."""
    if not rows:
        return
    shifted = not rows[0].state.ctx.aligned
    runs: list[Any] = []
    waiting: dict[int, list[Any]] = {}
    for r in rows:
        st = r.state
        blk, (ws, we) = st.blk, st.windows[0]
        k_s = st.schedule[min(st.step, len(st.schedule) - 1)]
        plan = st.step_plan = plan_step(st.ctx, blk.index, blk.start, (ws, we), st.step, k_s, locate=False)
        if plan.run is not None:
            runs.append(st)
        else:
            waiting.setdefault(blk.length, []).append(st)
    if runs:
        _locate_runs(runs, rows[0].state.ctx.x.device, shifted)
    for B, states in waiting.items():
        _sort_windows(states, B, shifted)


def _sort_windows(states: list[Any], B: int, shifted: bool) -> None:
    """Rows of one block length whose window's masks are not one run: window_mask_index's key over each row's
    whole block (a mask inside the row's window keys by its position, anything else by position + B), one sort for
    all rows; the keys are distinct integers, so each row's sorted row is its own sort exactly, and its first n
    (its window's mask count) are its window's masks, ascending."""
    ctx = states[0].ctx
    ar = ctx.index[:B]
    inside = torch.stack([st.ids for st in states]) == ctx.mask_id
    bounds = [(st.step_plan.window[0] - st.blk.start, st.step_plan.window[1] - st.blk.start) for st in states]
    if any(b != (0, B) for b in bounds):  # some window is a sub-block
        lo, hi = torch.tensor(bounds, device=ar.device).unbind(1)
        inside &= (ar >= lo[:, None]) & (ar < hi[:, None])
    key = torch.where(inside, ar, ar + B).sort(dim=1).values
    reads = (key - 1).unbind(0) if shifted else [None] * len(states)
    for st, order, read in zip(states, key.unbind(0), reads):
        n = len(st.step_plan.masks)
        st.step_plan.mask_idx = order[:n]
        st.read_rows = read[:n] if shifted else st.step_plan.mask_idx


def _locate_runs(states: list[Any], device: torch.device, shifted: bool) -> None:
    """Each row's one-run masks as block positions [run, run + n): flat position k of row j is k - (row j's first
    flat position) + run_j, one expression over all rows, then one split into the rows' views (and, shifted, one
    more for the read rows one to the left)."""
    sizes = [len(st.step_plan.masks) for st in states]
    shift, at = [], 0
    for st, n in zip(states, sizes):
        shift.append(st.step_plan.run - at)
        at += n
    flat = torch.arange(at, device=device) + torch.tensor(shift, device=device).repeat_interleave(
        torch.tensor(sizes, device=device), output_size=at)
    reads = (flat - 1).split(sizes) if shifted else [None] * len(states)
    for st, idx, read in zip(states, flat.split(sizes), reads):
        st.step_plan.mask_idx = idx
        st.read_rows = read if shifted else idx
