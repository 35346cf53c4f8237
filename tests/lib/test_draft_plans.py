"""draft_plans.py: the batch-first step locates many draft rows' masks together (one-run masks cut from one flat
range, whole-block windows by one sort per block length, any other window as batch 1 does), and every row's
`mask_idx` holds exactly what batch 1's `plan_step` gives it alone, at every step of every row; its draft reads the
rows of its masks, one to the left on a right-shifted model (step.py `draft_forward`)."""
from __future__ import annotations

import pytest
import torch

import s2d2
from benchmarks.stand_in import StandInModel, stand_in_prompts
from s2d2.decoding import draft_plans, lockstep_block
from s2d2.decoding.step import plan_step


@pytest.mark.parametrize("alignment, preset", [("aligned", "sdar-config-b"), ("aligned", "dynamic-baseline"),
                                               ("aligned", "fastdllm-config-a"), ("shifted", "dynamic-baseline"),
                                               ("shifted", "fastdllm-config-a")])
def test_every_rows_located_masks_equal_its_batch_1_plan(monkeypatch, alignment, preset):
    kinds = {"run": 0, "whole": 0, "window": 0}
    real = draft_plans.plan_drafts

    def checked(rows):
        real(rows)
        for r in rows:
            st, plan = r.state, r.state.step_plan
            alone = plan_step(st.ctx, plan.block, plan.start, plan.window, plan.step,
                              st.schedule[min(st.step, len(st.schedule) - 1)])
            assert torch.equal(plan.mask_idx, alone.mask_idx), (r.index, plan.window, plan.masks)
            assert torch.equal(st.read_rows, alone.mask_idx - int(alignment == "shifted")), (r.index, plan.masks)
            assert (plan.masks, plan.run, plan.span_len, plan.min_k) == (alone.masks, alone.run, alone.span_len,
                                                                         alone.min_k)
            whole = plan.window == (st.blk.start, st.blk.start + st.blk.length)
            kinds["run" if plan.run is not None else "whole" if whole else "window"] += 1

    monkeypatch.setattr(lockstep_block, "plan_drafts", checked)
    cfg = s2d2.preset(preset, gen_length=32)
    out = s2d2.generate_batch(StandInModel(alignment), stand_in_prompts(12), cfg, list(range(12)), batch_size=12,
                              detailed=False, engine="batch-first")
    assert len(out) == 12 and kinds["run"] > 0  # every arm: one-run masks (all of S2D2's when each step verifies)
    if preset == "dynamic-baseline":  # masks left scattered over whole-block windows
        assert kinds["whole"] > 0
    if preset == "fastdllm-config-a":  # scattered masks in a sub-block window
        assert kinds["window"] > 0
