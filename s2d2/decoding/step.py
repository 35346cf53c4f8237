"""One denoising step of the current window: draft -> first mask span -> route -> verify -> fallback (docs/algorithm.md,
'One step').

With method "diffusion" (or a policy that declines) the step is exactly a baseline step. Deviations from the
reference code (docs/algorithm.md, 'Where we deviate from the reference code'): k is clamped to the candidates; the loop
runs while masks remain; the mask token is never drafted; masks are built per call; a rejected draft is never committed
when allow_resample=False; one sampling transform serves p, q and the residual.

Beyond the paper (off in the paper presets): with `kv_reuse` the first `ctx.cached` positions of the block already
have their causal KV in the cache, so the draft and the verifier query only the rest (same logits in exact
arithmetic, see kv.py); with `fused_commit` the block's first draft logits come from the fused forward that also
cached the previous block (`ctx.carried`).

On the device: the host keeps its own list of the block's masks (`StepContext.masks`), so it never reads the
sequence to find them. A step reads device values back once before routing (the drafts, the policy's inputs and
what a skip would decode, in one transfer) and, if it verifies, once after the verifier (what the acceptance test
decoded; verifier.py). Commits are scattered on the device; the detailed trace's fields ride along in the same
reads (records.py); a resampled token, already written on the device, is read with the next transfer.
"""
from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass
from typing import Any, Optional

import torch

from ..config import DecodeConfig
from ..models.base import ForwardRequest
from ..models.masks import draft_query
from ..trace import Commit, PolicyDecision, PolicyInputs, StepRecord, Verification
from .context import Draft, StepContext
from .kv import kept_prefix_rows
from .detail_rows import draft_detail, draft_records, draft_rows, fill_residual, verification_record
from .remasking import choose, rule_inputs
from .route_summary import span_summary
from .routing_costs import skip_token_count, step_costs
from .sampling import draw_with_probs, entropy, token_distribution
from .selection import StepPicks, fallback_k, skip_inputs, skip_picks, write_picks
from .verify_branch import verify_probs, verify_span, verify_step

__all__ = [
    "run_step", "first_mask_span", "draft_step", "draft_forward", "policy_inputs", "policy_summary",
    "policy_inputs_from", "fallback_picks", "fallback_from", "draft_records", "verification_record", "verify_probs",
    "verify_span",
]


def first_mask_span(mask_positions: list[int]) -> int:
    """Length of the first maximal run of consecutive masked positions (never 0 while masks remain)."""
    for i in range(1, len(mask_positions)):
        if mask_positions[i] != mask_positions[i - 1] + 1:
            return i
    return len(mask_positions)


@dataclass
class StepPlan:
    """What a step knows before its draft forward (host facts only): the window's masks, the first span, k."""

    block: int
    start: int
    window: tuple[int, int]
    step: int
    masks: list[int]  # block-relative positions of the window's masks, ascending
    span_len: int
    min_k: int
    run: Optional[int]  # the first mask when the masks are consecutive (mask_idx is then a slice of arange)
    mask_idx: torch.Tensor  # (None only between `plan_step(..., locate=False)` and its caller's locating)
    first_forward: int


@dataclass
class Routed:
    """A step after its first read: what was read, the policy's inputs and decision, a skip's device work."""

    got: dict[str, Any]
    skip: dict[str, torch.Tensor]
    inputs: Optional[PolicyInputs]
    decision: Optional[PolicyDecision]
    skipped: Optional[StepPicks]
    verifies: bool

    @property
    def verify(self) -> bool:
        return self.decision is not None and self.decision.verify


def run_step(ctx: StepContext, block: int, start: int, window: tuple[int, int], step: int, k_s: int) -> StepRecord:
    """One step: plan, draft, route, then verify or skip, then its record (the batch-first engine runs the same
    parts with the forwards of many sequences between them: lockstep_block.py)."""
    plan = plan_step(ctx, block, start, window, step, k_s)
    positions = ctx.index[start : start + ctx.B]
    draft = Draft(plan.mask_idx, plan.run, positions, *draft_step(ctx, block, step, ctx.x[start : start + ctx.B],
                                                                  positions, plan.mask_idx, plan.masks[0]))
    routed = route(ctx, plan, draft)
    if routed.verify:
        picks, verification, pending = verify_step(ctx, block, step, start, draft, plan.masks, plan.span_len,
                                                   plan.min_k, window[1], routed.got["drafts"])
        return step_record(ctx, plan, routed, picks, verification, pending)
    return step_record(ctx, plan, routed, skip_step(ctx, plan, draft, routed), None, None)


def plan_step(ctx: StepContext, block: int, start: int, window: tuple[int, int], step: int, k_s: int,
              locate: bool = True) -> StepPlan:
    """The step's host facts before its draft forward (the window's masks from the host's list, never a read).
    `locate` False: the masks are left for the caller to locate (`mask_idx` None; the batch-first step finds many
    rows' at once, draft_plans.py `plan_drafts`)."""
    ws, we = window
    masks = window_masks(ctx.masks, ws - start, we - start)
    n = len(masks)
    run = masks[0] if masks[-1] - masks[0] + 1 == n else None  # one run: always the case when every step verifies
    mask_idx: Optional[torch.Tensor] = None
    if locate:
        mask_idx = ctx.index[run : run + n] if run is not None else window_mask_index(ctx, start, masks, ws, we)
    first_forward = ctx.rec.last_index + (0 if ctx.carried is not None else 1)
    return StepPlan(block, start, window, step, masks, first_mask_span(masks), min(k_s, n), run, mask_idx,
                    first_forward)


def window_masks(masks: list[int], lo: int, hi: int) -> list[int]:
    """The masks in [lo, hi) (block-relative), from the block's ascending list by two bisections: every step of
    every row asks, so no walk over the whole block."""
    return masks[bisect_left(masks, lo) : bisect_left(masks, hi)]


def window_has_mask(masks: list[int], lo: int, hi: int) -> bool:
    """Whether any mask lies in [lo, hi) (block-relative): `window_masks` without building the list (every row asks
    after every step whether its window is done)."""
    i = bisect_left(masks, lo)
    return i < len(masks) and masks[i] < hi


def route(ctx: StepContext, plan: StepPlan, draft: Draft) -> Routed:
    """Steps 2-5: the first span's estimates, one read (drafts, policy inputs, what a skip would decode) and the
    policy's decision (None for a baseline). The batch-first engine runs its two parts with one read for many
    sequences between them."""
    wanted, skip, verifies = route_inputs(ctx, plan, draft)
    return routed_from(ctx, plan, ctx.reads.fetch(wanted), skip, verifies)


def route_inputs(ctx: StepContext, plan: StepPlan, draft: Draft, summary: Optional[dict[str, torch.Tensor]] = None,
                 skip: Optional[dict[str, torch.Tensor]] = None
                 ) -> tuple[dict[str, Optional[torch.Tensor]], dict[str, torch.Tensor], bool]:
    """The step's device work before its first read: what to read, a skip's inputs, whether the policy always
    verifies (then no skip is prepared). `summary` and `skip`: the row's `policy_summary` and `skip_inputs` when
    the caller computed them with other rows' (the batch-first engine)."""
    if summary is None:
        summary = policy_summary(ctx, draft.probs, draft.p, plan.span_len) if ctx.policy is not None else {}
    verifies = always_verifies(ctx)
    if verifies:
        skip = {}
    elif skip is None:
        skip = skip_inputs(ctx.cfg, draft.p, draft.entropy, summary.get("n_hi"))
    return {"drafts": draft.tokens, **summary, **skip, **draft_detail(ctx, draft.probs, draft.p)}, skip, verifies


def always_verifies(ctx: StepContext) -> bool:
    """Whether the step's policy verifies whatever it reads (then a skip's device work is never done)."""
    return ctx.policy is not None and ctx.rec.costs is None and ctx.policy.always_verifies()


def routed_from(ctx: StepContext, plan: StepPlan, got: dict[str, Any], skip: dict[str, torch.Tensor],
                verifies: bool) -> Routed:
    """The policy's inputs and decision from the step's first read."""
    ws, we = plan.window
    n, span_len = len(plan.masks), plan.span_len
    inputs, decision, skipped = None, None, None
    if ctx.policy is not None:
        inputs = inputs_from_summary(got, span_len, n, we - ws, _not_progress(ctx, ws, we))
        if ctx.rec.costs is not None:  # routing in seconds: what a skip would decode, and both forwards' costs
            skipped = skip_picks(ctx.cfg, got, n, plan.min_k, skip)
            inputs.costs = step_costs(ctx, plan.masks, span_len, we - plan.start, len(skipped.picks), plan.min_k,
                                      got["sure_prefix"])
        decision = ctx.policy.decide(inputs)
    return Routed(got, skip, inputs, decision, skipped, verifies)


def skip_step(ctx: StepContext, plan: StepPlan, draft: Draft, routed: Routed, write: bool = True) -> StepPicks:
    """Step 8 without a verify: the remasking rule's picks (a skip's device work was done before the read),
    written on the device (`write` False: the caller writes them, from the step's commits, with other rows':
    token_writes.py)."""
    skip, got = routed.skip, routed.got
    if routed.verifies:  # only a policy that broke its always_verifies() promise gets here: read a skip's inputs now
        skip = skip_inputs(ctx.cfg, draft.p, draft.entropy, routed.got.get("n_hi"))
        got.update(ctx.reads.fetch(skip))
    picks = routed.skipped if routed.skipped is not None else skip_picks(ctx.cfg, got, len(plan.masks), plan.min_k,
                                                                         skip)
    if write:
        write_picks(ctx.x, plan.start, plan.mask_idx, picks, draft.tokens, plan.run)
    return picks


def step_record(ctx: StepContext, plan: StepPlan, routed: Routed, picks: StepPicks,
                verification: Optional[Verification], pending: Optional[torch.Tensor]) -> StepRecord:
    """Steps 9-10: the policy's reward and the step's record (every update is already written on the device)."""
    got, start, masks = routed.got, plan.start, plan.masks
    reward = ctx.policy.update(routed.decision, len(picks.picks)) if ctx.policy is not None else None
    commits = commit_records(ctx, start, masks, picks.picks, got["drafts"], verification, pending)
    return StepRecord(
        index=-1, block=plan.block, step=plan.step, window=list(plan.window),
        forwards=list(range(plan.first_forward, ctx.rec.last_index + 1)), masks_before=[start + m for m in masks],
        drafts=draft_rows(ctx, got, got["drafts"], masks, start), span=[start + masks[0], plan.span_len],
        policy_inputs=routed.inputs, decision=routed.decision, verification=verification,
        fallback_k=fallback_k(picks, plan.min_k), commits=commits, reward=reward,
    )


def window_mask_index(ctx: StepContext, start: int, masks: list[int], ws: int, we: int) -> torch.Tensor:
    """The window's mask positions (block-relative, ascending) as a device tensor, without reading the sequence:
    the host knows how many there are, so a sort of the window's positions (masks first) gives them."""
    n = len(masks)
    ar = ctx.index[ws - start : we - start]
    key = torch.where(ctx.x[ws:we] == ctx.mask_id, ar, ar + ctx.B)
    return key.sort().values[:n]


def commit_records(ctx: StepContext, start: int, masks: list[int], picks: list[tuple[int, str]], tokens: list[int],
             verification: Optional[Verification], pending: Optional[torch.Tensor]) -> list[Commit]:
    """The commit records, and the host's view of the block (its masks, its stop ids) after them (also the
    batch-first block step's, lockstep_block.py)."""
    rec, stops = ctx.rec, ctx.stop_set
    # a resampled token still on the device is -1 until `_settle_residual` fills it in (never a stop id)
    res = -1 if verification is None or verification.resampled is None else verification.resampled
    # one comprehension: this runs for every row of every step, a record per decoded token
    commits = rec.with_texts([Commit(start + masks[i], tokens[i] if how != "resampled" else res, "", how)
                              for i, how in picks])
    if stops and (res in stops or not stops.isdisjoint(tokens)):  # (drafts hold no stop id: nothing to scan)
        ctx.stop_hits += [c.position for c in commits if c.token in stops]
    done = {masks[i] for i, _ in picks}
    ctx.masks = [m for m in ctx.masks if m not in done]
    if pending is not None:  # the residual token, its mass and the fallback flag: read with the next transfer
        assert verification is not None
        resampled = next(c for c in commits if c.how == "resampled")
        ctx.reads.later(pending, lambda v: _settle_residual(ctx, verification, resampled, v))
    return commits


def _settle_residual(ctx: StepContext, verification: Verification, commit: Commit, values: list[float]) -> None:
    if fill_residual(ctx, verification, commit, values) in ctx.stop_set:
        ctx.stop_hits.append(commit.position)


def draft_step(ctx: StepContext, block: int, step: int, block_ids: torch.Tensor, positions: torch.Tensor,
               mask_idx: torch.Tensor, first_mask: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Draft forward over the block (no KV stored) -> (distribution, drafts, p) at the masked positions.

    draft_ver makes the rows of the decoded prefix (before the first mask) causal. A fused forward that already
    drafted this block (`ctx.carried`) is used instead of a new forward.
    """
    cfg = ctx.cfg
    if ctx.carried is not None:
        (logits, offset), ctx.carried = ctx.carried, None
        logits = logits.index_select(0, mask_idx - offset)
    else:
        logits = draft_forward(ctx, block, step, block_ids, positions, first_mask, mask_idx)
    probs = token_distribution(logits, cfg, ctx.mask_id, owned=True)  # rows picked for this step only
    drafts, p = draw_with_probs(probs, cfg, ctx.generator)
    return probs, drafts, p


def draft_forward(ctx: StepContext, block: int, step: int, block_ids: torch.Tensor, positions: torch.Tensor,
                  first_mask: int, mask_idx: torch.Tensor) -> torch.Tensor:
    """The logits of the masked positions `mask_idx` (block-relative).

    Only the uncached positions [ctx.cached, B) are queried. Right-shifted models read the logit at i-1 for i
    (block position 0 is never masked). With kv_reuse, causal decoded-prefix rows stay in the cache (kv.py).
    """
    request = draft_request(ctx, block_ids, positions, first_mask, mask_idx)
    logits = ctx.rec.forward("draft", block, step, *request)
    ctx.cached += request.keep
    return logits


def draft_request(ctx: StepContext, block_ids: torch.Tensor, positions: torch.Tensor, first_mask: int,
                  mask_idx: torch.Tensor) -> ForwardRequest:
    """`draft_forward`'s forward: the uncached positions [ctx.cached, B), reading the masks' rows (one to the left
    when right-shifted); its `keep` leading rows (kv_reuse: the causal decoded prefix) join the cache, so the caller
    adds `keep` to ctx.cached after it ran (also the batch-first engine's, lockstep_block.py)."""
    k = ctx.cached
    prefix = max(0, first_mask - k)  # decoded rows before the first mask among the queried ones
    n = int(block_ids.shape[0]) - k
    attention = draft_query(n, prefix, block_ids.device) if ctx.cfg.draft_ver else "full"
    rows = mask_idx - (k + (0 if ctx.aligned else 1))
    return ForwardRequest(ctx.cache, block_ids[k:], positions[k:], attention, kept_prefix_rows(ctx, prefix), None,
                          rows)


def fallback_picks(cfg: DecodeConfig, probs: torch.Tensor, drafts: torch.Tensor, p: torch.Tensor,
                   chosen: list[tuple[int, int, str]], k: int, topup: bool) -> list[tuple[int, int, str]]:
    """The remasking rule over the masks not yet chosen this step (a whole baseline step when none are), read back
    as (index, token, how) (for loops that keep their picks on the host)."""
    taken = {c[0] for c in chosen}
    rest = None  # every mask competes (rule_inputs gives what an all-true `rest` would, in fewer operations)
    if taken:
        rest = torch.ones(p.shape[0], dtype=torch.bool, device=p.device)
        rest[list(taken)] = False
    device = rule_inputs(cfg.remasking, p, lambda: entropy(probs), cfg.confidence_threshold, cfg.eb_gamma, rest)
    got = {name: (t.tolist() if t.dim() else int(t)) for name, t in device.items()}
    return fallback_from(cfg, got, int(p.shape[0]), chosen, k, topup, drafts.tolist())


def fallback_from(cfg: DecodeConfig, got: dict[str, Any], n: int, chosen: list[tuple[int, int, str]], k: int,
                  topup: bool, tokens: list[int]) -> list[tuple[int, int, str]]:
    """`fallback_picks`'s host half: the rule's picks among the n masks not in `chosen`, from its inputs read back
    (`got`), with the masks' drafts `tokens`. Also the batch-first editing loop's, after one read of many rows'
    rule inputs (lockstep_editing.py)."""
    taken = {c[0] for c in chosen}
    picks, how = choose(cfg.remasking, k, [i for i in range(n) if i not in taken], got, topup)
    return [(i, tokens[i], how) for i in picks]


def _not_progress(ctx: StepContext, ws: int, we: int) -> int:
    """Non-mask positions of the window that UCB progress does not count as decoded: the prompt tail on
    position-aligned models (docs/algorithm.md, 'Routing policies', as the SDAR reference); none on the right-shifted
    family, whose Fast-dLLM v2 reference counts every non-mask of the sub-block, prompt tail and AR seed included
    (docs/algorithm.md, 'Family variants')."""
    return max(0, min(we, ctx.prompt_len) - ws) if ctx.aligned else 0


def policy_summary(ctx: StepContext, probs: torch.Tensor, p: torch.Tensor, span_len: int) -> dict[str, torch.Tensor]:
    """α over the span, K̂, N_hi and the mean normalized entropy, on the device (read with the step's transfer):
    route_summary.py's rule on this one span (the batch-first engine runs it over all its draft rows at once)."""
    cfg = ctx.cfg
    every = probs if cfg.ucb_entropy_scope != "span" else None
    out = span_summary(cfg, probs[:span_len], p[:span_len], every, ctx.rec.costs is not None)
    return {**out, "n_hi": (p > cfg.confidence_threshold).sum()}


def inputs_from_summary(got: dict[str, Any], span_len: int, n_masks: int, window_len: int,
                        prompt_in_window: int) -> PolicyInputs:
    decoded = window_len - n_masks - prompt_in_window
    return PolicyInputs(span_len=span_len, alphas=got["alphas"], k_hat=got["k_hat"], n_hi=got["n_hi"],
                        window_len=window_len, progress=decoded / window_len, mean_entropy=got["mean_entropy"])


def policy_inputs(ctx: StepContext, probs: torch.Tensor, p: torch.Tensor, span_len: int, n_masks: int,
                  window_len: int, prompt_in_window: int, masks: Optional[list[int]] = None,
                  min_k: int = 1) -> PolicyInputs:
    """Estimator outputs for the span plus the counts a policy reads, in one host transfer (with the step's costs
    when the run routes in seconds: pass `masks`, block-relative, and k_s)."""
    got = ctx.reads.fetch(policy_summary(ctx, probs, p, span_len))
    return policy_inputs_from(ctx, got, span_len, n_masks, window_len, prompt_in_window, masks, min_k)


def policy_inputs_from(ctx: StepContext, got: dict[str, Any], span_len: int, n_masks: int, window_len: int,
                       prompt_in_window: int, masks: Optional[list[int]] = None, min_k: int = 1) -> PolicyInputs:
    """`policy_inputs`' host half, from the summary read back (`got`). Also the batch-first editing loop's, after
    one read of many rows' summaries (lockstep_editing.py)."""
    inputs = inputs_from_summary(got, span_len, n_masks, window_len, prompt_in_window)
    if ctx.rec.costs is not None and masks is not None:  # this loop picks after routing: count what a skip takes
        inputs.costs = step_costs(ctx, masks, span_len, window_len, skip_token_count(ctx.cfg, inputs.n_hi, min_k),
                                  min_k, got["sure_prefix"])
    return inputs

