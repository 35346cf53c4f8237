"""The D2F pipeline (pipeline.py) as one step over every live sequence of a batch: the batch-first form of
`pipeline_loop`, for D2F and S2D2 on it, on both families.

A pipeline step keeps several blocks in flight, but it is still one forward over [blocks to cache | every block
in flight], plus, when its policy verifies, one verifier forward. So a row is in one of two phases per step, each
one forward: "step" (pipeline_step.py `plan_pipe_step`'s forward) or "verify" (pipeline_verify_branch.py
`verifier_request`'s). The engine (lockstep.py) runs every row's forward together, whatever its phase and whatever
loop the rows beside it run. Then, for the step rows of one config at once: one `token_distribution` and, greedy,
one max (lockstep_verify.py `shared_drafts`; sampled, each row draws from its own generator); every block's rule
in one call (pipeline_rules.py `block_rules`, which batch 1 runs over its own blocks; each row's complete flags are
read from the device, `PipeState.done`); the S2D2 rows' routing summaries (route_summary.py `summary_parts`); the
masks of the next step located by one upload. For the verify rows of one config, one `token_distribution` of their
verifiers' q. For every row, step or verify, ONE shared read (lockstep_verify.py `shared_read`: the drafts and
summaries as parts over all rows, transfers.py `Bulk`; each row reads what its batch-1 fetch reads and counts its
own transfer, as alone), and the rules' picks written together (token_writes.py). A resampled token a row must read
before a block may join (pipeline.py `add_block`), and what rows still hold on the device when they end, are read
in one shared read too.

The rest is batch 1's own code per row: pipeline.py's `begin_step` and `end_step` (the blocks' lifecycle, the
progress check), pipeline_step.py's `drafted`, `route_reads`, `routed` and `finish_pipe_step`, and
pipeline_verify_branch.py's `verifier_logits`, `verify_reads` and `verify_outcome`. The order of each row's random
draws is its batch-1 order (draft, acceptance test, residual), so in float64 each sequence's trace is its `generate`
trace apart from wall times.

Still per row: the policy's decision, the acceptance test and residual (the row's generator), and the records; on a
GPU the verify rows' acceptance outcome is read in the shared read, but a residual still on the device is a row's
own deferred value, as in batch 1.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import torch

from ..config import DecodeConfig
from ..models.base import ForwardRequest
from ..trace import StepRecord
from . import block_state
from .context import StepContext, lay_out
from .acceptance import acceptance_each, acceptance_rows
from .lockstep_rows import Asked, Row
from .lockstep_verify import read_pending, shared_drafts, shared_read
from .pipeline import begin_step, end_step, wants_block
from .pipeline_state import PipeState
from .pipeline_rules import block_rules, confidence_scores
from .pipeline_step import (PipeStep, drafted, finish_pipe_step, in_flight_masks, plan_pipe_step, route_reads, routed,
                            uses_reference)
from .pipeline_verify_branch import Verified, gated, tested_reads, verifier_logits, verifier_request, verify_outcome
from .route_summary import summary_parts
from .draft_reads import summary_bulk
from .sampling import token_distribution
from .step import first_mask_span
from .transfers import Bulk
from .token_writes import TokenWrites
from .result import Kept, LoopResult, number_steps

__all__ = ["covers", "start", "requests", "advance", "cancel", "result"]  # the loop's interface (lockstep.py)


@dataclass
class PipeRow:
    """A row's pipeline state: what batch 1 keeps in `pipeline_loop`'s locals."""

    ctx: StepContext
    pipe: PipeState
    kept: Kept
    n_blocks: int
    phase: str = "step"  # "step" or "verify": what the row's next forward is
    step: Optional[PipeStep] = None  # the step under way
    verifier: Optional[tuple[str, ForwardRequest, str, int]] = None  # its verifier (`verifier_request`)
    tested: Any = None  # between the verifier forward and the read: (q, Acceptance)


def covers(cfg: DecodeConfig) -> bool:
    """Whether a config runs this loop: the D2F pipeline, on either family."""
    return cfg.loop == "pipeline"


def start(model: Any, row: Row) -> None:
    """Lay out the row's sequence (pipeline_loop's setup) and plan its first step."""
    cfg = row.prep.cfg
    plan, ctx = lay_out(model, cfg, row.prep.ids, row.rec, row.generator, row.cache)
    x = ctx.x
    n_blocks = (plan.end - ctx.prompt_len) // cfg.block_length
    pipe = PipeState(done=torch.zeros(n_blocks, dtype=torch.bool, device=model.device))
    row.state = PipeRow(ctx, pipe, Kept(row.rec, x, row.blocks, row.steps), n_blocks)
    _begin([row])


def requests(model: Any, rows: list[Row]) -> list[Asked]:
    """Each row's one forward of this step: its step's forward, or its verifier."""
    out = []
    for r in rows:
        st: PipeRow = r.state
        ps = st.step
        step = st.pipe.step - ps.first.added_step
        if st.phase == "verify":
            kind, request, _, _ = st.verifier
            out.append(Asked(kind, ps.first.index, step, request))
        else:
            out.append(Asked(ps.kind, ps.first.index, step, ps.request))
    return out


def advance(model: Any, rows: list[Row], logits: list[torch.Tensor]) -> None:
    """After the step's forwards: the step rows of each config drafted from one distribution and draw, the verify
    rows tested, every row's read in one shared read; then each row routes (a verifying row's verifier is its next
    forward) or ends its step, and the rows whose step ended begin their next one."""
    phases = [r.state.phase for r in rows]
    readers: list[Row] = []
    wanted: list[dict[str, Any]] = []
    bulk: list[Bulk] = []
    for cfg, members in _by_cfg(rows, phases, "step").items():
        bulk += _drafted(model, cfg, [rows[j] for j in members], [logits[j] for j in members], readers, wanted)
    for cfg, members in _by_cfg(rows, phases, "verify").items():
        _verifying(model, cfg, [rows[j] for j in members], [logits[j] for j in members], readers, wanted)
    ended = []
    writes = TokenWrites()  # the rules' picks of every row, written together before any row plans its next step
    for r, got in zip(readers, shared_read(readers, wanted, bulk)):
        record = _after_read(r, got, writes)
        if record is not None:
            ended.append((r, record))
    writes.flush()
    _next_steps(ended)


def _by_cfg(rows: list[Row], phases: list[str], phase: str) -> dict[DecodeConfig, list[int]]:
    """The rows in `phase` (their indices), by config."""
    out: dict[DecodeConfig, list[int]] = {}
    for j, (r, ph) in enumerate(zip(rows, phases)):
        if ph == phase:
            out.setdefault(r.prep.cfg, []).append(j)
    return out


def _drafted(model: Any, cfg: DecodeConfig, group: list[Row], logits: list[torch.Tensor], readers: list[Row],
             wanted: list[dict[str, Any]]) -> list[Bulk]:
    """The step rows of one config after their forward: one distribution and draw over all their masks, the S2D2
    rows' routing summaries taken together (route_summary.py `summary_parts`); their drafts and summaries are
    parts read once for all of them (returned), each row's own reads appended to `wanted`."""
    spans = [drafted(r.state.ctx, r.state.pipe, r.state.step, lg) for r, lg in zip(group, logits)]
    sizes = [int(t.shape[0]) for t in spans]
    probs, tokens, p = shared_drafts(model, cfg, group, spans)
    first, bulk = len(readers), []
    members = range(first, first + len(group))
    starts = [0]
    for n in sizes[:-1]:
        starts.append(starts[-1] + n)
    bulk.append(Bulk("drafts", tokens, members, [(a, a + n) for a, n in zip(starts, sizes)]))
    routes = group[0].state.ctx.policy is not None  # one config: every row has a policy or none does
    if routes:
        span_lens = [first_mask_span(r.state.step.masks) for r in group]
        bulk += summary_bulk(first, summary_parts(cfg, probs, p, sizes, span_lens,
                                                  group[0].state.ctx.rec.costs is not None))
    served = {b.name for b in bulk}
    rules = _shared_rules(cfg, [r.state.step for r in group], probs, p, sizes)
    for r, rule, *drawn in zip(group, rules, probs.split(sizes), tokens.split(sizes), p.split(sizes)):
        readers.append(r)
        own = route_reads(r.state.ctx, r.state.step, *drawn, summary={} if routes else None, rules=rule)
        wanted.append({name: t for name, t in own.items() if name not in served})
    return bulk


def _shared_rules(cfg: DecodeConfig, steps: list[PipeStep], probs: torch.Tensor, p: torch.Tensor,
                  sizes: list[int]) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Every block's rule of the step rows of one config in one call (pipeline_rules.py `block_rules`, batch 1's
    rule over one row's blocks): each row's blocks numbered after the rows' before it; returns each row's (chosen,
    took its top-1), as its own call gives them."""
    B, device = cfg.block_length, p.device
    nbs = [len(ps.active) for ps in steps]
    bases, at = [], 0
    for ps, nb in zip(steps, nbs):  # position - base = (block number in the call) * B + column
        bases.append(ps.first.start - at * B)
        at += nb
    base = torch.repeat_interleave(torch.tensor(bases, device=device), torch.tensor(sizes, device=device),
                                   output_size=int(p.shape[0]))
    rel = torch.cat([ps.rows_abs for ps in steps]) - base
    block_of = torch.div(rel, B, rounding_mode="floor")
    chosen, took = block_rules(p, confidence_scores(cfg.confidence_score, probs, p), block_of, rel - block_of * B,
                               torch.cat([ps.done for ps in steps]), B, cfg.confidence_threshold, uses_reference(cfg))
    return list(zip(chosen.split(sizes), took.split(nbs)))


def _verifying(model: Any, cfg: DecodeConfig, group: list[Row], logits: list[torch.Tensor], readers: list[Row],
               wanted: list[dict[str, Any]]) -> None:
    """The verify rows of one config after their verifier forward: one distribution of every row's q, then the
    acceptance test over all rows of one span length at once (acceptance.py `acceptance_rows`, each row's uniforms
    from its own generator, as the block loop's `tested`), gated as batch 1's `verify_reads`; their reads appended
    to `wanted`, in the rows' order."""
    spans = [verifier_logits(r.state.ctx, r.state.pipe, lg, r.state.verifier[3]) for r, lg in zip(group, logits)]
    q_all = token_distribution(torch.cat(spans), cfg, model.spec.mask_id, owned=True)
    qs = q_all.split([int(t.shape[0]) for t in spans])
    by_span: dict[int, list[int]] = {}
    for j, r in enumerate(group):
        by_span.setdefault(r.state.step.span_len, []).append(j)
    own: list[dict[str, Any]] = [{} for _ in group]
    for s, members in by_span.items():
        steps = [group[j].state.step for j in members]
        p = torch.stack([ps.p[:s] for ps in steps])
        acc = gated(cfg, acceptance_rows(cfg.acceptance, torch.stack([ps.drafts[:s] for ps in steps]), p,
                                         torch.stack([qs[j] for j in members]), cfg.ratio_gamma,
                                         [group[j].state.ctx.generator for j in members],
                                         with_argmax=group[members[0]].state.ctx.rec.detailed), p)
        for j, ps, acc_row in zip(members, steps, acceptance_each(acc)):
            st: PipeRow = group[j].state
            st.tested = (qs[j], acc_row)
            own[j] = tested_reads(st.ctx, acc_row, ps.p, qs[j])
    readers += group
    wanted += own


def _after_read(r: Row, got: dict[str, Any], writes: TokenWrites) -> Optional[StepRecord]:
    """A row after the shared read: a step row routes (a verify makes the verifier its next forward: None), else
    the step ends with its record."""
    st: PipeRow = r.state
    ctx, ps = st.ctx, st.step
    verified: Optional[Verified] = None
    if st.phase == "step":
        routed(ctx, ps, got)
        if ps.decision is not None and ps.decision.verify:
            st.verifier = verifier_request(ctx, st.pipe, ps.hi, ps.masks[0], ps.span_len, ps.drafts)
            st.phase = "verify"
            return None
    else:
        (q, acc), how = st.tested, st.verifier[2]
        verified = verify_outcome(ctx, st.pipe, how, ps.masks, ps.span_len, ps.probs, ps.drafts, q, acc,
                                  ps.got["drafts"], got)
        st.tested = st.verifier = None
    return finish_pipe_step(ctx, st.pipe, ps, verified, writes)


def _next_steps(ended: list[tuple[Row, StepRecord]]) -> None:
    """Rows whose step ended: the step kept (`end_step`, the progress check), then the next step begun."""
    going, stopping = [], []
    for r, record in ended:
        st: PipeRow = r.state
        reason = end_step(st.pipe, r.steps, record, r.check)
        if reason is None:
            st.kept.mark()
            going.append(r)
        else:
            stopping.append((r, reason))
    _finish(stopping)
    _begin(going)


def _begin(rows: list[Row]) -> None:
    """Each row's next step (pipeline.py `begin_step`, after one shared read of the resampled tokens that decide
    whether a block joins), or its end ("length") when no block is in flight."""
    st_of = [r.state for r in rows]
    read_pending([r for r, st in zip(rows, st_of) if wants_block(st.ctx, st.pipe, st.n_blocks)])
    over, going = [], []
    for r, st in zip(rows, st_of):
        events = begin_step(st.ctx, st.pipe, r.blocks, st.n_blocks)
        if events is None:
            over.append((r, "length"))
        else:
            going.append((r, events))
    for (r, events), rows_abs in zip(going, _located([r for r, _ in going])):
        st = r.state
        st.step, st.phase = plan_pipe_step(st.ctx, st.pipe, events, rows_abs), "step"
    _finish(over)


def _located(rows: list[Row]) -> list[torch.Tensor]:
    """Each row's in-flight masks as device positions, from the host's lists by one upload for all rows (batch 1
    finds the same positions by a sort on the device)."""
    if not rows:
        return []
    masks = [in_flight_masks(r.state.pipe) for r in rows]
    flat = torch.tensor([m for row in masks for m in row], dtype=torch.long, device=rows[0].state.ctx.x.device)
    return list(flat.split([len(row) for row in masks]))


def _finish(rows: list[tuple[Row, str]]) -> None:
    """End rows (their reason), after one shared read of what they still hold on the device (batch 1 flushes its
    reads before it returns)."""
    read_pending([r for r, _ in rows])
    for r, reason in rows:
        r.state.step = None
        r.finish(reason, number_steps(r.steps))


def cancel(row: Row) -> None:
    """The row's own forward raised StopDecoding: back to its last complete step (every step is one), as
    pipeline_loop's rollback, with the kept steps' deferred values read first (a resampled token's record)."""
    row.state.ctx.reads.flush()
    block_state.cancel(row)


def result(model: Any, row: Row) -> LoopResult:
    """The row's LoopResult as pipeline_loop returns it."""
    assert row.finish_reason is not None
    return LoopResult(row.state.ctx.x, row.blocks, row.steps, row.finish_reason)
