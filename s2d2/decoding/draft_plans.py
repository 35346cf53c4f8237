"""The draft rows of a batch-first block step, planned together (lockstep_block.py): each row's step plan is batch
1's (step.py `plan_step`), and the positions of its window's masks, which its draft request reads as its rows and
its step as its draft's `mask_idx`, are located for many rows with a fixed number of tensor calls: batch 1 takes a
view of its index (masks in one run) or sorts its window (step.py `window_mask_index`). The values are batch 1's,
so each row's forward and trace are too."""
from __future__ import annotations

from typing import Any

import torch

from .lockstep_rows import Row
from .step import StepPlan, plan_step, window_mask_index


def plan_drafts(rows: list[Row]) -> None:
    """Each draft row's step plan (step.py `plan_step`, kept for its request and `advance`), its masks located
    together: where they are one run, every such row's positions [run, run + n) cut from one flat range by one
    split (the values batch 1's view of `ctx.index` holds); where they are not and the window is the whole block,
    one sort per block length of the rows' blocks (step.py `window_mask_index`'s key: the keys are distinct
    integers, so each row's sorted row is its own sort, exactly); any other row as batch 1 locates them."""
    runs: list[StepPlan] = []
    waiting: dict[int, list[Any]] = {}
    for r in rows:
        st = r.state
        blk, (ws, we) = st.blk, st.windows[0]
        k_s = st.schedule[min(st.step, len(st.schedule) - 1)]
        plan = st.step_plan = plan_step(st.ctx, blk.index, blk.start, (ws, we), st.step, k_s, locate=False)
        if plan.run is not None:
            runs.append(plan)
        elif ws == blk.start and we == blk.start + blk.length:
            waiting.setdefault(blk.length, []).append(st)
        else:
            plan.mask_idx = window_mask_index(st.ctx, blk.start, plan.masks, ws, we)
    if runs:
        _locate_runs(runs, rows[0].state.ctx.x.device)
    for B, states in waiting.items():
        ctx = states[0].ctx
        ar = ctx.index[:B]
        key = torch.where(torch.stack([st.ids for st in states]) == ctx.mask_id, ar, ar + B)
        for st, order in zip(states, key.sort(dim=1).values.unbind(0)):
            st.step_plan.mask_idx = order[: len(st.step_plan.masks)]


def _locate_runs(plans: list[StepPlan], device: torch.device) -> None:
    """Each plan's one-run masks as block positions [run, run + n): flat position k of row j is k - (row j's first
    flat position) + run_j, one expression over all rows, then one split into the rows' views."""
    sizes = [len(plan.masks) for plan in plans]
    shift, at = [], 0
    for plan, n in zip(plans, sizes):
        shift.append(plan.run - at)
        at += n
    flat = torch.arange(at, device=device) + torch.tensor(shift, device=device).repeat_interleave(
        torch.tensor(sizes, device=device), output_size=at)
    for plan, idx in zip(plans, flat.split(sizes)):
        plan.mask_idx = idx
