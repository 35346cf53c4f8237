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

from typing import Any, Optional

import torch

from ..models.masks import segments_query
from ..trace import BlockEvent, Commit, InFlight, StepRecord
from .context import StepContext
from .pipeline_rules import confidence_scores, d2f_rule, reference_rule
from .pipeline_state import PipeBlock, PipeState
from .pipeline_verify_branch import Verified, verify_span
from .detail_rows import draft_detail, draft_rows
from .sampling import draw_with_probs, token_distribution
from .step import first_mask_span, inputs_from_summary, policy_summary


def pipeline_step(ctx: StepContext, st: PipeState, events: list[BlockEvent]) -> StepRecord:
    active = [b for b in st.blocks if b.state == "active"]
    first = active[0]
    first_forward = ctx.rec.last_index + 1
    lo, hi, end = _cache_forward_bounds(ctx, st)
    masks = [m for b in active for m in b.masks]
    probs, drafts, p, rows_abs = _forward_and_draft(ctx, st, active, lo, hi, end, masks, events)
    chosen, top1_used = _block_rules(ctx, active, probs, p)
    span_len = first_mask_span(masks)
    summary = policy_summary(ctx, probs, p, span_len) if ctx.policy is not None else {}
    got = ctx.reads.fetch({"drafts": drafts, "chosen": chosen, "top1": top1_used, **summary,
                           **draft_detail(ctx, probs, p)})
    inputs = decision = verified = None
    if ctx.policy is not None:
        inputs = inputs_from_summary(got, span_len, len(masks), end - hi, 0)
        decision = ctx.policy.decide(inputs)
    if decision is not None and decision.verify:
        verified = verify_span(ctx, st, first, hi, masks, span_len, probs, drafts, p, got["drafts"])
    commits, decoded, fallbacks = _apply(ctx, st, active, masks, rows_abs, drafts, got, chosen, verified)
    reward = ctx.policy.update(decision, sum(decoded.values())) if ctx.policy is not None else None
    in_flight = [InFlight(b.index, b.complete, len(b.masks) + decoded[b.index], decoded[b.index]) for b in active]
    return StepRecord(
        index=-1, block=first.index, step=st.step - first.added_step, window=[hi, end],
        forwards=list(range(first_forward, ctx.rec.last_index + 1)), masks_before=masks,
        drafts=draft_rows(ctx, got, got["drafts"], masks, 0), span=[masks[0], span_len], policy_inputs=inputs,
        decision=decision, verification=verified.record if verified else None, fallback_k=fallbacks,
        commits=commits, reward=reward, in_flight=in_flight, events=events,
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


def _forward_and_draft(ctx: StepContext, st: PipeState, active: list[PipeBlock], lo: int, hi: int, end: int,
                       masks: list[int], events: list[BlockEvent],
                       ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The step's forward: KV of [lo, hi) kept, the masks of [hi, end) drafted. Returns (probs, drafts, p, the
    masks' device positions)."""
    B, n = ctx.cfg.block_length, len(masks)
    waiting = [b for b in st.blocks if b.state == "to_cache"]
    segments = ((hi - lo,) if st.prompt_pending else (B,) * len(waiting)) + (B,) * len(active)
    kind = "prefill+draft" if st.prompt_pending else "commit+draft" if hi > lo else "draft"
    region = end - hi
    key = torch.where(ctx.x[hi:end] == ctx.mask_id, ctx.index[:region], ctx.index[:region] + region)
    rows_abs = key.sort().values[:n] + hi  # the masks' positions, ascending, without reading the sequence
    shifted = not ctx.aligned
    rows = rows_abs - lo - (1 if shifted else 0)
    if shifted:
        rows = rows.clamp_min(0)  # the first mask sits at lo only without caching: its logit is st.last_logit
        if hi > lo:  # and the last cached row's logit predicts the first position in flight from now on
            rows = torch.cat([rows, ctx.index[hi - 1 - lo : hi - lo]])
    logits = ctx.rec.forward(kind, active[0].index, st.step - active[0].added_step, ctx.cache, ctx.x[lo:end],
                             ctx.index[lo:end], segments_query(segments, ctx.x.device), keep=hi - lo, rows=rows)
    if shifted:
        if hi > lo:
            st.last_logit, logits = logits[-1].clone(), logits[:-1]
        if masks[0] == lo:
            logits = torch.cat([st.last_logit[None], logits[1:]])
    _cached(st, hi, events)
    probs = token_distribution(logits, ctx.cfg, ctx.mask_id, owned=True)  # a fresh tensor (last_logit is a copy)
    drafts, p = draw_with_probs(probs, ctx.cfg, ctx.generator)  # one draw over every mask in flight, block order
    return probs, drafts, p, rows_abs


def _cached(st: PipeState, hi: int, events: list[BlockEvent]) -> None:
    for b in st.blocks:
        if b.state == "to_cache":
            b.state = "cached"
            events.append(BlockEvent(b.index, "cached"))
    st.prompt_pending, st.cache_end = False, hi


def _block_rules(ctx: StepContext, active: list[PipeBlock], probs: torch.Tensor,
                 p: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Every block's rule on the device: ([n] bool, the masks it decodes; [blocks] bool, it took its top-1)."""
    cfg = ctx.cfg
    scores = confidence_scores(cfg.confidence_score, probs, p)
    reference = cfg.method == "s2d2" and cfg.pipeline_fallback == "reference"
    chosen, top1 = [], []
    at = 0
    for b in active:
        n = len(b.masks)
        if n == 0:
            top1.append(torch.zeros((), dtype=torch.bool, device=p.device))
            continue
        sl = slice(at, at + n)
        if reference:
            c, t = reference_rule(scores[sl], cfg.confidence_threshold, b.complete)
        else:
            c, t = d2f_rule(p[sl], scores[sl], cfg.confidence_threshold, b.complete)
        chosen.append(c)
        top1.append(t)
        at += n
    return torch.cat(chosen), torch.stack(top1)


def _apply(ctx: StepContext, st: PipeState, active: list[PipeBlock], masks: list[int], rows_abs: torch.Tensor,
           drafts: torch.Tensor, got: dict[str, Any], chosen: torch.Tensor,
           verified: Optional[Verified]) -> tuple[list[Commit], dict[int, int], int]:
    """Write the step's decodes: the verified prefix (already written by pipeline_verify), then every block the
    verifier decoded nothing in by its rule. Returns (commits in that order, decoded per block, top-1 picks)."""
    text = ctx.rec.text if ctx.rec.detailed else (lambda t: "")
    tokens, flags = got["drafts"], got["chosen"]
    commits = list(verified.commits) if verified is not None else []
    by_verify = {c.position for c in commits}
    keep, fallbacks, at = [], 0, 0
    for b, used_top1 in zip(active, got["top1"]):
        n = len(b.masks)
        rule = not any(m in by_verify for m in b.masks)  # the verifier decoded nothing here: the block's rule runs
        keep.append(chosen[at : at + n] if rule else torch.zeros(n, dtype=torch.bool, device=chosen.device))
        if rule:
            how = "fallback" if used_top1 else "threshold"
            picked = [i for i in range(at, at + n) if flags[i]]
            fallbacks += int(bool(used_top1)) if picked else 0
            commits += [Commit(masks[i], tokens[i], text(tokens[i]), how) for i in picked]
        at += n
    if keep:
        write = torch.cat(keep)
        ctx.x[rows_abs] = torch.where(write, drafts, ctx.x[rows_abs])
    done = {c.position for c in commits}
    decoded = {b.index: sum(m in done for m in b.masks) for b in active}
    for b in active:
        b.masks = [m for m in b.masks if m not in done]
    if any(c.token in ctx.stop_set for c in commits):
        st.eos = True
    return commits, decoded, fallbacks
