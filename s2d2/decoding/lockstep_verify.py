"""S2D2's routing and 2L verifier in the batch-first block loop (lockstep_block.py): the draft rows of S2D2 configs
routed together after their shared forward, and a verifying row's second forward joining the next shared one.

A batch-1 step is draft forward -> read -> route -> (verify forward -> read) -> picks and record (step.py
`run_step`). Here the verify forward of a row that decides to verify is its NEXT step's forward, so one padded
forward carries the draft rows, the 2L verify rows and the commit rows of different sequences together. Between the
forwards each row runs step.py's and verify_branch.py's own parts (`plan_step`, `route`, `skip_step`,
`verify_2l_inputs`, `verifier_probs`, `verify_outcome`, `step_record`): one copy of every rule, so in float64 a
sequence's trace is its `generate` trace apart from wall times. The distribution and the greedy draw of every
draft row of one config are one tensor call each; a sampled draw, the acceptance test's uniforms and the residual
draw come from the row's own generator, in its batch-1 order (draft, then test, then residual).
"""
from __future__ import annotations

from typing import Any, Optional

import torch

from ..config import DecodeConfig
from ..models.base import ForwardRequest
from ..trace import StepRecord
from .context import Draft
from .lockstep_rows import Row
from .sampling import draw_with_probs, token_distribution
from .step import route, skip_step, step_record
from .verify_branch import verifier_probs, verify_2l_inputs, verify_outcome


def shared_drafts(model: Any, cfg: DecodeConfig, rows: list[Row],
                  logits: list[torch.Tensor]) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """Each row's (distribution, drafts, p) at its masks: one `token_distribution` over every row of the config,
    greedy one max, sampled each row's draw from its own generator (the call its batch-1 step makes)."""
    sizes = [int(lg.shape[0]) for lg in logits]
    probs = token_distribution(torch.cat(logits), cfg, model.spec.mask_id, owned=True)
    parts = probs.split(sizes)
    if cfg.do_sample:
        drawn = [draw_with_probs(p, cfg, r.state.ctx.generator) for r, p in zip(rows, parts)]
        return [(p, t, q) for p, (t, q) in zip(parts, drawn)]
    tokens, p_all = draw_with_probs(probs, cfg, rows[0].generator)
    return list(zip(parts, tokens.split(sizes), p_all.split(sizes)))


def routed_drafts(model: Any, cfg: DecodeConfig, rows: list[Row],
                  logits: list[torch.Tensor]) -> list[Optional[StepRecord]]:
    """The draft rows of one S2D2 config after their shared forward: each row routed by its own policy; a row that
    skips decodes now (its step's record), a row that verifies waits for its verify forward (None)."""
    out: list[Optional[StepRecord]] = []
    for r, (probs, tokens, p) in zip(rows, shared_drafts(model, cfg, rows, logits)):
        st = r.state
        ctx, plan = st.ctx, st.step_plan
        draft = Draft(plan.mask_idx, plan.run, ctx.index[plan.start : plan.start + ctx.B], probs, tokens, p)
        routed = route(ctx, plan, draft)
        if routed.verify:
            st.draft, st.routed, st.phase = draft, routed, "verify"
            out.append(None)
        else:
            out.append(step_record(ctx, plan, routed, skip_step(ctx, plan, draft, routed), None, None))
    return out


def verify_request(row: Row) -> ForwardRequest:
    """The row's 2L verifier forward (verify_branch.py's arguments exactly) over its draft-filled block."""
    st = row.state
    ctx, plan, draft = st.ctx, st.step_plan, st.draft
    block_ids = ctx.x[plan.start : plan.start + ctx.B]
    return ForwardRequest(ctx.cache, *verify_2l_inputs(ctx, block_ids, draft.positions, plan.mask_idx, draft.tokens,
                                                       plan.span_len))


def verified(row: Row, logits: torch.Tensor) -> StepRecord:
    """After the row's verify forward: the acceptance test, its read, the picks and the step's record."""
    st = row.state
    ctx, plan, draft, routed = st.ctx, st.step_plan, st.draft, st.routed
    q_probs = verifier_probs(ctx, logits, ctx.B)
    picks, verification, pending = verify_outcome(ctx, plan.start, draft, plan.masks, plan.span_len, plan.min_k,
                                                  routed.got["drafts"], q_probs, "2l")
    st.draft = st.routed = None
    return step_record(ctx, plan, routed, picks, verification, pending)
