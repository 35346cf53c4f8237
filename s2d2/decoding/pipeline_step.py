"""One step of the D2F pipeline (pipeline.py): one forward over [blocks to cache | blocks in flight] that stores
the finished blocks' KV and drafts every mask in flight; the per-block D2F rule; with S2D2, the route and the
verifier (pipeline_verify.py); the writes and the step's record.

On the device, as the block loop: the host knows every block's masks, so it never reads the sequence to find them
(the masks' device positions come from a sort of the in-flight region, masks first, cut at the count the host
knows). A step reads back once after the draft (the drafts, each block's rule and the policy's inputs) and, if it
verifies, once after the verifier; a resampled token rides on the next read (read early only when it may be a
stop id that decides whether a block joins).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from itertools import compress
from typing import Any, Optional

import torch

from ..config import DecodeConfig
from ..models.base import ForwardRequest
from ..models.masks import segments_query
from ..trace import BlockEvent, Commit, InFlight, PolicyDecision, PolicyInputs, StepRecord
from .context import StepContext
from .pipeline_rules import block_rules, confidence_scores
from .pipeline_state import PipeBlock, PipeState
from .pipeline_verify_branch import Verified, verify_span
from .detail_rows import draft_detail, draft_rows
from .sampling import draw_with_probs, token_distribution
from .step import first_mask_span, inputs_from_summary, policy_summary
from .token_writes import TokenWrites


@dataclass
class PipeStep:
    """A pipeline step under way, from its plan to its record: host facts first (`plan_pipe_step`), then what its
    forward, draw and first read give (`drafted`, `route_reads`, `routed`). Batch 1 (`pipeline_step`) and the
    batch-first engine (lockstep_pipeline.py) run a step through these same parts."""

    events: list[BlockEvent]
    active: list[PipeBlock]
    first_forward: int  # the step's first forward's index in the run's trace
    lo: int
    hi: int
    end: int
    masks: list[int]  # every mask in flight, ascending (absolute)
    kind: str  # the forward's kind: "prefill+draft", "commit+draft" or "draft"
    request: ForwardRequest
    rows_abs: torch.Tensor  # the masks' device positions
    done: torch.Tensor  # [blocks in flight] bool: their complete flags (a view of the run's, PipeState.done)
    span_len: int = 0
    probs: Optional[torch.Tensor] = None
    drafts: Optional[torch.Tensor] = None
    p: Optional[torch.Tensor] = None
    chosen: Optional[torch.Tensor] = None
    top1: Optional[torch.Tensor] = None
    got: dict[str, Any] = field(default_factory=dict)
    inputs: Optional[PolicyInputs] = None
    decision: Optional[PolicyDecision] = None

    @property
    def first(self) -> PipeBlock:
        return self.active[0]


def pipeline_step(ctx: StepContext, st: PipeState, events: list[BlockEvent]) -> StepRecord:
    """One step, batch 1: plan, forward, draft, read, route, (verify,) record."""
    ps = plan_pipe_step(ctx, st, events)
    logits = ctx.rec.forward(ps.kind, ps.first.index, st.step - ps.first.added_step, *ps.request)
    logits = drafted(ctx, st, ps, logits)
    probs = token_distribution(logits, ctx.cfg, ctx.mask_id, owned=True)  # a fresh tensor (last_logit is a copy)
    drafts, p = draw_with_probs(probs, ctx.cfg, ctx.generator)  # one draw over every mask in flight, block order
    routed(ctx, ps, ctx.reads.fetch(route_reads(ctx, ps, probs, drafts, p)))
    verified = None
    if ps.decision is not None and ps.decision.verify:
        verified = verify_span(ctx, st, ps.first, ps.hi, ps.masks, ps.span_len, probs, drafts, p, ps.got["drafts"])
    return finish_pipe_step(ctx, st, ps, verified)


def plan_pipe_step(ctx: StepContext, st: PipeState, events: list[BlockEvent],
                   rows_abs: Optional[torch.Tensor] = None) -> PipeStep:
    """A step's host facts and its forward (over [blocks to cache | every block in flight]), before it runs.
    `rows_abs`: the masks' device positions (`in_flight_masks` uploaded), where the caller located them for many
    rows at once; else a sort of the in-flight region finds them on the device."""
    active = [b for b in st.blocks if b.state == "active"]
    lo, hi, end = _cache_forward_bounds(ctx, st)
    masks = in_flight_masks(st)
    kind, request, rows_abs = _forward_request(ctx, st, active, lo, hi, end, len(masks), rows_abs)
    done = st.done[active[0].index - 1 : active[-1].index]  # (a view: no upload)
    return PipeStep(events, active, ctx.rec.last_index + 1, lo, hi, end, masks, kind, request, rows_abs, done)


def in_flight_masks(st: PipeState) -> list[int]:
    """Every mask of the blocks in flight, ascending (absolute positions, the host's lists)."""
    return [m for b in st.blocks if b.state == "active" for m in b.masks]


def drafted(ctx: StepContext, st: PipeState, ps: PipeStep, logits: torch.Tensor) -> torch.Tensor:
    """After the step's forward: the logits at the masks in flight (a right-shifted model's taken one row early,
    the first from the last cached logit), and the blocks it cached marked so."""
    if not ctx.aligned:
        if ps.hi > ps.lo:
            st.last_logit, logits = logits[-1].clone(), logits[:-1]
        if ps.masks[0] == ps.lo:
            logits = torch.cat([st.last_logit[None], logits[1:]])
    _cached(st, ps.hi, ps.events)
    return logits


def route_reads(ctx: StepContext, ps: PipeStep, probs: torch.Tensor, drafts: torch.Tensor, p: torch.Tensor,
                summary: Optional[dict[str, torch.Tensor]] = None,
                rules: Optional[tuple[torch.Tensor, torch.Tensor]] = None) -> dict[str, Optional[torch.Tensor]]:
    """The step's device work after its draw (every block's rule; with a policy, the routing summary of the first
    span; either taken by the caller with other rows': `rules`, `summary`) and what its one read takes."""
    ps.probs, ps.drafts, ps.p = probs, drafts, p
    ps.chosen, ps.top1 = rules if rules is not None else _block_rules(ctx, ps, probs, p)
    ps.span_len = first_mask_span(ps.masks)
    if summary is None:
        summary = policy_summary(ctx, probs, p, ps.span_len) if ctx.policy is not None else {}
    return {"drafts": drafts, "chosen": ps.chosen, "top1": ps.top1, **summary, **draft_detail(ctx, probs, p)}


def routed(ctx: StepContext, ps: PipeStep, got: dict[str, Any]) -> None:
    """After the read: the policy's inputs and decision (S2D2)."""
    ps.got = got
    if ctx.policy is not None:
        ps.inputs = inputs_from_summary(got, ps.span_len, len(ps.masks), ps.end - ps.hi, 0)
        ps.decision = ctx.policy.decide(ps.inputs)


def finish_pipe_step(ctx: StepContext, st: PipeState, ps: PipeStep, verified: Optional[Verified],
                     writes: Optional[TokenWrites] = None) -> StepRecord:
    """The step's writes (the verified prefix, then each block's rule) and its record. `writes`: the rules' picks
    join it (host-known tokens; the caller flushes it with other rows') instead of being written here."""
    active, masks, got = ps.active, ps.masks, ps.got
    commits, decoded, fallbacks = _apply(ctx, st, ps, verified, writes)
    reward = ctx.policy.update(ps.decision, sum(decoded.values())) if ctx.policy is not None else None
    in_flight = [InFlight(b.index, b.complete, len(b.masks) + decoded[b.index], decoded[b.index]) for b in active]
    return StepRecord(
        index=-1, block=ps.first.index, step=st.step - ps.first.added_step, window=[ps.hi, ps.end],
        forwards=list(range(ps.first_forward, ctx.rec.last_index + 1)), masks_before=masks,
        drafts=draft_rows(ctx, got, got["drafts"], masks, 0), span=[masks[0], ps.span_len], policy_inputs=ps.inputs,
        decision=ps.decision, verification=verified.record if verified else None, fallback_k=fallbacks,
        commits=commits, reward=reward, in_flight=in_flight, events=ps.events,
    )


def _cache_forward_bounds(ctx: StepContext, st: PipeState) -> tuple[int, int, int]:
    """[lo, hi): what this step's forward stores (the prompt, or the finished blocks waiting); [hi, end): the
    blocks in flight."""
    lo = st.cache_end
    if st.prompt_pending:
        hi = ctx.prompt_len
    else:
        waiting = [b for b in st.blocks if b.state == "to_cache"]
        hi = waiting[-1].start + waiting[-1].length if waiting else lo
    last = st.blocks[-1]
    return lo, hi, last.start + last.length


def _forward_request(ctx: StepContext, st: PipeState, active: list[PipeBlock], lo: int, hi: int, end: int,
                     n: int, rows_abs: Optional[torch.Tensor]) -> tuple[str, ForwardRequest, torch.Tensor]:
    """The step's forward (KV of [lo, hi) kept, the n masks of [hi, end) drafted): its kind, its request and the
    masks' device positions (`drafted` takes its logits)."""
    B = ctx.cfg.block_length
    waiting = [b for b in st.blocks if b.state == "to_cache"]
    segments = ((hi - lo,) if st.prompt_pending else (B,) * len(waiting)) + (B,) * len(active)
    kind = "prefill+draft" if st.prompt_pending else "commit+draft" if hi > lo else "draft"
    if rows_abs is None:  # the masks' positions, ascending, without reading the sequence or uploading an index
        region = end - hi
        key = torch.where(ctx.x[hi:end] == ctx.mask_id, ctx.index[:region], ctx.index[:region] + region)
        rows_abs = key.sort().values[:n] + hi
    shifted = not ctx.aligned
    rows = rows_abs - (lo + 1 if shifted else lo)
    if shifted:
        rows = rows.clamp_min(0)  # the first mask sits at lo only without caching: its logit is st.last_logit
        if hi > lo:  # and the last cached row's logit predicts the first position in flight from now on
            rows = torch.cat([rows, ctx.index[hi - 1 - lo : hi - lo]])
    request = ForwardRequest(ctx.cache, ctx.x[lo:end], ctx.index[lo:end], segments_query(segments, ctx.x.device),
                             hi - lo, None, rows)
    return kind, request, rows_abs


def _cached(st: PipeState, hi: int, events: list[BlockEvent]) -> None:
    for b in st.blocks:
        if b.state == "to_cache":
            b.state = "cached"
            events.append(BlockEvent(b.index, "cached"))
    st.prompt_pending, st.cache_end = False, hi


def _block_rules(ctx: StepContext, ps: PipeStep, probs: torch.Tensor,
                 p: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Every block's rule on the device: ([n] bool, the masks it decodes; [blocks] bool, it took its top-1)."""
    cfg, B = ctx.cfg, ctx.cfg.block_length
    rel = ps.rows_abs - ps.first.start  # the blocks in flight are consecutive, each B long
    block_of = torch.div(rel, B, rounding_mode="floor")
    return block_rules(p, confidence_scores(cfg.confidence_score, probs, p), block_of, rel - block_of * B,
                       ps.done, B, cfg.confidence_threshold, uses_reference(cfg))


def uses_reference(cfg: DecodeConfig) -> bool:
    """Whether the blocks run the reference's fallback rule (S2D2 with `pipeline_fallback="reference"`)."""
    return cfg.method == "s2d2" and cfg.pipeline_fallback == "reference"


def _apply(ctx: StepContext, st: PipeState, ps: PipeStep, verified: Optional[Verified],
           writes: Optional[TokenWrites]) -> tuple[list[Commit], dict[int, int], int]:
    """Write the step's decodes: the verified prefix (already written by pipeline_verify), then every block the
    verifier decoded nothing in by its rule (on the device, or into `writes`). Returns (commits in that order,
    decoded per block, top-1 picks)."""
    active, masks, chosen = ps.active, ps.masks, ps.chosen
    tokens, flags = ps.got["drafts"], ps.got["chosen"]
    commits = list(verified.commits) if verified is not None else []
    by_verify = {c.position for c in commits}
    ruled: list[Commit] = []
    keep, fallbacks, at = [], 0, 0
    for b, used_top1 in zip(active, ps.got["top1"]):
        n = len(b.masks)
        rule = not by_verify or by_verify.isdisjoint(b.masks)  # the verifier decoded nothing here: its rule runs
        if writes is None:
            keep.append(chosen[at : at + n] if rule else torch.zeros(n, dtype=torch.bool, device=chosen.device))
        if rule:
            how = "fallback" if used_top1 else "threshold"
            picked = list(compress(range(at, at + n), flags[at : at + n]))
            fallbacks += int(bool(used_top1)) if picked else 0
            ruled += [Commit(masks[i], tokens[i], "", how) for i in picked]
        at += n
    commits += ctx.rec.with_texts(ruled)
    if writes is not None:
        writes.add(ctx.x[ps.hi : ps.end], ps.hi, ruled)
    elif keep:
        write = torch.cat(keep)
        ctx.x[ps.rows_abs] = torch.where(write, ps.drafts, ctx.x[ps.rows_abs])
    done = {c.position for c in commits}
    decoded = {}
    for b in active:
        left = [m for m in b.masks if m not in done] if done else b.masks
        decoded[b.index], b.masks = len(b.masks) - len(left), left
    if ctx.stop_set and not ctx.stop_set.isdisjoint([c.token for c in commits]):  # (a list: no call per token)
        st.eos = True
    return commits, decoded, fallbacks
