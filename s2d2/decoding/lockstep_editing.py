"""The LLaDA2 editing loop (editing.py) as one step over every live sequence of a batch: the batch-first form of
`editing_loop`, for the diffusion decoders and S2D2 on it.

Each live row is in one phase per step, and each phase is one forward: the prefill (the prompt's full blocks), a
step's draft of its block (editing.py `draft_rows`), that step's 2L verifier (S2D2, when the row's policy verifies;
on the block with the step's edits applied), or the block's commit. The engine (lockstep.py) runs all rows'
forwards together, whatever their phases. Then, for the draft rows of one config at once: one `token_distribution`
and, greedy, one max (lockstep_verify.py `shared_drafts`; sampled, each row draws from its own generator), the
drafts at every row's masks, the S2D2 rows' routing summaries in one shared read (route_summary.py
`summary_parts`), and for the steps that end without a verifier the remasking rule over all their masks in one
read (remasking.py `rule_inputs`' batch form); every step's fills are written together (token_writes.py) before
any row plans its next step. The rest is batch 1's own code per row: editing.py's `plan_edit_step`, `take_draft`
(the edits), `decide_route`, `finish_edit_step`, `step_due`, `block_ended` and `eos_in`; step.py's `fallback_from`;
verify_branch.py's `verifier_request`, `verifier_probs` and `span_outcome`; blocks.py's `prefill_request` and
`commit_request`. The order of phases is `editing_loop`'s (prefill; per block the steps until `block_ended` or
`step_due` says so; the EOS early stop; the commit but after the last block; the progress check), and so is the
order of each row's random draws (draft, acceptance test, residual). So in float64 each sequence's trace is its
`generate` trace apart from wall times.

Still per row: the edits (their positions and records read where batch 1 reads them), a verifying step's
acceptance test and residual, and a detailed trace's draft and verifier rows. Covered (`covers`): every editing
config on a position-aligned model (the loop refuses right-shifted ones).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import torch

from ..config import DecodeConfig
from ..models.base import ForwardRequest
from ..trace import BlockRecord, StepRecord
from .block_state import cancel
from .blocks import commit_request, prefill_request
from .context import StepContext, lay_out
from .draft_reads import summary_bulk
from .editing import (EditStep, block_ended, decide_route, draft_rows, eos_in, fallback_due, finish_edit_step,
                      first_mask, k_s_at, masks_only, open_block, plan_edit_step, routes, step_due, stop_ids,
                      take_draft)
from .layout import BlockPlan
from .lockstep_rows import Asked, Row, padded_runs, read_rows
from .lockstep_verify import shared_drafts, shared_read
from .result import Kept, LoopResult, number_steps
from .remasking import rule_inputs
from .route_summary import summary_parts
from .step import draft_request, fallback_from
from .token_writes import TokenWrites
from .verify_branch import span_outcome, verifier_probs, verifier_request

__all__ = ["covers", "start", "requests", "advance", "cancel", "result"]  # the loop's interface (lockstep.py)

BATCH_RULES = ("low_confidence_static", "low_confidence_dynamic", "sequential")  # rule_inputs' batch form


@dataclass
class EditState:
    """A row's editing-loop state: what batch 1 keeps in `editing_loop`'s locals and its StepContext."""

    ctx: StepContext
    plan: BlockPlan
    kept: Kept
    schedule: list[int]
    stops: torch.Tensor
    phase: str = "prefill"  # "prefill", "draft", "verify" or "commit": what the row's next forward is
    blk: Optional[BlockRecord] = None
    step: int = 0
    post: int = 0  # mask-free steps of the block so far
    had_masks: bool = False  # whether the block had a mask when the step under way began
    edit: Optional[EditStep] = None  # the step under way
    verifier: Optional[tuple[ForwardRequest, str, int]] = None  # its verifier (`verifier_request`), when it verifies


def covers(cfg: DecodeConfig, model: Any) -> bool:
    """Whether a config runs this loop on this model: the editing loop, on a position-aligned model."""
    return cfg.loop == "editing" and model.spec.alignment == "aligned"


def start(model: Any, row: Row) -> None:
    """Lay out the row's sequence (editing_loop's setup); with no prompt block to prefill, open its first block."""
    cfg = row.prep.cfg
    plan, ctx = lay_out(model, cfg, row.prep.ids, row.rec, row.generator, row.cache)
    x = ctx.x
    row.state = EditState(ctx, plan, Kept(row.rec, x, row.blocks, row.steps), cfg.transfer_schedule(), stop_ids(ctx))
    if plan.first_start == 0:  # nothing to prefill
        _open_block(row, 0)


def requests(model: Any, rows: list[Row]) -> list[Asked]:
    """Each row's one forward of this step, by its phase (editing.py's and blocks.py's shapes exactly)."""
    return [_request(r.state) for r in rows]


def _request(st: EditState) -> Asked:
    ctx, es = st.ctx, st.edit
    if st.phase == "prefill":
        return Asked("prefill", -1, -1, prefill_request(ctx, st.plan.first_start))
    if st.phase == "commit":
        return Asked("commit", st.blk.index, -1, commit_request(ctx, st.blk))
    if st.phase == "verify":
        request, kind, _ = st.verifier
        return Asked("verify_" + kind, es.block, es.step, request)
    # draft_step's forward (its rows: editing.py `draft_rows`); nothing is cached
    return Asked("draft", es.block, es.step, draft_request(ctx, es.block_ids, es.positions, first_mask(ctx, es),
                                                           draft_rows(ctx, es)))


def advance(model: Any, rows: list[Row], logits: list[torch.Tensor]) -> None:
    """After the step's forwards: the draft rows of each config routed after one shared distribution and draw, the
    steps that end now (the non-verifying drafts' fallbacks over all of them at once, the verified ones) recorded
    with their fills written together, then each row's next step or block end, in batch 1's order."""
    phases = [r.state.phase for r in rows]
    by_cfg: dict[DecodeConfig, list[int]] = {}
    for j, phase in enumerate(phases):
        if phase == "draft":
            by_cfg.setdefault(rows[j].prep.cfg, []).append(j)
    writes = TokenWrites()  # every step's fills, written before any row plans its next step (which reads them)
    ended: list[tuple[Row, StepRecord]] = []
    for cfg, members in by_cfg.items():
        skipping = _routed(model, cfg, [rows[j] for j in members], [logits[j] for j in members])
        ended += _skipped(model, cfg, skipping, writes)
    ended += [(r, _verified(r, lg, writes)) for r, phase, lg in zip(rows, phases, logits) if phase == "verify"]
    writes.flush()
    for r, record in ended:
        _stepped(r, record)
    for r, phase in zip(rows, phases):
        if phase == "prefill":
            r.state.kept.mark()
            _open_block(r, r.state.plan.first_start)
        elif phase == "commit":
            r.state.ctx.cached = 0  # (commit_block's)
            _checked(r)


def _routed(model: Any, cfg: DecodeConfig, group: list[Row], logits: list[torch.Tensor]) -> list[Row]:
    """The draft rows of one config after their forward: one distribution and draw, the drafts at every row's
    masks taken at once, each row's edits (editing.py `take_draft`), the routing rows' summaries in one shared read
    and each one's decision (`decide_route`); a verifying row's verifier becomes its next forward. Returns the rows
    whose step ends now (no verifier)."""
    sizes = [int(lg.shape[0]) for lg in logits]
    probs, tokens, p = shared_drafts(model, cfg, group, logits)
    steps = [r.state.edit for r in group]
    counts = [len(es.masks) for es in steps]
    only = [masks_only(r.state.ctx, es) for r, es in zip(group, steps)]
    if all(only):  # every draft read its masks alone: the drafts at the masks are the draft
        masked = zip(*(t.split(sizes) for t in (probs, tokens, p)))
    else:  # each row's masks among its read rows, taken for all rows at once
        local = [r.state.ctx.index[:n] if o else es.mask_idx for r, es, n, o in zip(group, steps, counts, only)]
        starts = torch.tensor([0] + sizes[:-1], device=probs.device).cumsum(0)
        at = torch.cat(local) + torch.repeat_interleave(starts, torch.tensor(counts, device=probs.device))
        masked = zip(*(t.index_select(0, at).split(counts) for t in (probs, tokens, p)))
    for r, es, m, *drawn in zip(group, steps, masked, probs.split(sizes), tokens.split(sizes), p.split(sizes)):
        take_draft(r.state.ctx, es, *drawn, masked=m)
    routing = [r for r, es in zip(group, steps) if routes(r.state.ctx, es)]
    for r, got in zip(routing, _shared_summaries(cfg, routing)):
        decide_route(r.state.ctx, r.state.edit, got)
    skipping = []
    for r, es in zip(group, steps):
        st = r.state
        if es.verifies:  # (verify_span's verifier, on the block with this step's edits applied)
            st.verifier = verifier_request(st.ctx, es.edited(), es.positions, es.mask_idx, es.m_drafts, es.span_len,
                                           st.ctx.B, es.masks)
            st.phase = "verify"
        else:
            skipping.append(r)
    return skipping


def _shared_summaries(cfg: DecodeConfig, rows: list[Row]) -> list[dict[str, Any]]:
    """The routing summary of every routing row of one config (step.py `policy_summary`'s values, row by row:
    route_summary.py `summary_parts`), read in one shared read, each row counting its own fetch as alone."""
    if not rows:
        return []
    steps = [r.state.edit for r in rows]
    parts = summary_parts(cfg, torch.cat([es.m_probs for es in steps]), torch.cat([es.m_p for es in steps]),
                          [len(es.masks) for es in steps], [es.span_len for es in steps],
                          any(r.state.ctx.rec.costs is not None for r in rows))
    return shared_read(rows, [{} for _ in rows], summary_bulk(0, parts))


def _skipped(model: Any, cfg: DecodeConfig, rows: list[Row], writes: TokenWrites) -> list[tuple[Row, StepRecord]]:
    """The steps of one config that end without a verifier: the remasking rule over all their masks at once (one
    read; `fallback_from` per row, batch 1's host half), then each step's record (editing.py `finish_edit_step`).
    A rule without a batch form (entropy-bounded) runs per row, as batch 1's `fallback_picks`."""
    due = [fallback_due(r.state.edit, []) for r in rows]
    batched = [(r, k) for r, k in zip(rows, due) if k > 0] if cfg.remasking in BATCH_RULES else []
    picks = dict(zip((id(r) for r, _ in batched), _shared_fallbacks(model, cfg, batched)))
    return [(r, finish_edit_step(r.state.ctx, r.state.edit, None, [], picks.get(id(r)), writes)) for r in rows]


def _shared_fallbacks(model: Any, cfg: DecodeConfig, rows: list[tuple[Row, int]]) -> list[list[tuple[int, int, str]]]:
    """Each row's fallback picks (k of its masks, none decoded yet this step): `rule_inputs` once over the rows'
    masks padded (its batch form), one read with their drafts, then batch 1's `fallback_from` per row."""
    if not rows:
        return []
    steps = [r.state.edit for r, _ in rows]
    counts = [len(es.masks) for es in steps]
    padded = padded_runs(torch.cat([es.m_p for es in steps]), counts)
    rule = rule_inputs(cfg.remasking, padded, lambda: torch.empty(0), cfg.confidence_threshold, cfg.eb_gamma)
    drafts = padded_runs(torch.cat([es.m_drafts for es in steps]), counts)
    got = read_rows(model, {"drafts": drafts, **rule}, len(rows))
    out = []
    for (_, k), n, g in zip(rows, counts, got):
        inputs = {"order": g["order"][:n]} if "order" in g else {}
        if "above" in g:
            inputs["above"] = g["above"][0]
        out.append(fallback_from(cfg, inputs, n, [], k, False, g["drafts"][:n]))
    return out


def _verified(r: Row, logits: torch.Tensor, writes: TokenWrites) -> StepRecord:
    """After the verifier: q over the span, the acceptance test (the row's generator) and the step's record."""
    st = r.state
    ctx, es = st.ctx, st.edit
    _, kind, end = st.verifier
    st.verifier = None
    q_probs = verifier_probs(ctx, logits, end)
    verification, chosen = span_outcome(ctx, kind, es.start, es.masks, es.m_probs, es.m_drafts, es.m_p, q_probs,
                                        es.span_len)
    return finish_edit_step(ctx, es, verification, chosen, writes=writes)


def _stepped(r: Row, record: StepRecord) -> None:
    """A step is recorded: the block's next step, or its end."""
    st = r.state
    r.steps.append(record)
    st.step += 1
    st.edit = None
    if block_ended(st.had_masks, record):
        _end_block(r)
    else:
        _next_step(r)


def _open_block(r: Row, start: int) -> None:
    """editing_loop's next block at `start` (past the plan's end: the run ends, "length")."""
    st = r.state
    if start >= st.plan.end:
        r.finish("length", number_steps(r.steps))
        return
    st.blk = open_block(st.ctx, start)
    r.blocks.append(st.blk)
    st.step, st.post = 0, 0
    _next_step(r)


def _next_step(r: Row) -> None:
    """Plan the block's next step (its draft is the row's next forward), or end the block (`step_due`)."""
    st = r.state
    due = step_due(st.ctx, st.post)
    if due is None:
        _end_block(r)
        return
    st.had_masks, st.post = due
    st.edit = plan_edit_step(st.ctx, st.blk.index, st.blk.start, st.step, k_s_at(st.schedule, st.step))
    st.phase = "draft"


def _end_block(r: Row) -> None:
    """The EOS early stop, then the commit (the row's next forward) or, after the last block, the progress check."""
    st = r.state
    if eos_in(st.ctx, st.blk, st.stops):
        r.finish("stop_token", number_steps(r.steps))
    elif st.blk.start + st.blk.length < st.plan.end:  # nothing reads the last block's KV
        st.phase = "commit"
    else:
        _checked(r)


def _checked(r: Row) -> None:
    """After a block's commit (or the last block): the progress check, then the next block."""
    st = r.state
    reason = r.check(number_steps(r.steps))
    if reason is not None:
        r.finish(reason, number_steps(r.steps))
        return
    st.kept.mark()
    _open_block(r, st.blk.start + st.blk.length)


def result(model: Any, row: Row) -> LoopResult:
    """The row's LoopResult as editing_loop returns it (the whole layout)."""
    assert row.finish_reason is not None
    return LoopResult(row.state.ctx.x, row.blocks, row.steps, row.finish_reason)
