"""The LLaDA2.x block loop with self-correction (editing), and S2D2 on top of it (docs/algorithm.md, 'Family variants',
docs/editing.md).

Per block, each step drafts the whole block with full attention over cache + block (no KV stored), then:

1. **Edits** (`editing_threshold` = τ_edit; None = off): every decoded, non-prompt position of the block whose
   draft differs from its token with p > τ_edit takes the draft (`edit_positions`).
2. **Mask filling**: with method "s2d2" the policy routes the first mask span; a verify step runs the 2L
   verifier on the block *with this step's edits applied* and masks filled by the drafts, then the acceptance
   test (docs/algorithm.md, 'Acceptance, first rejection and the residual'). If fewer than k_s = min(1, #masks) tokens
   were decoded, the remasking rule picks the rest (`low_confidence_dynamic` at τ_mask = `confidence_threshold` is
   LLaDA2's: all masks above τ_mask, else the most confident one).
3. Edits and fills are written at once.

The block ends after a step that started with no masks and made no edits, or after `max_post_steps` mask-free
steps (0 in the reference eval scripts: the block ends as soon as its last mask is filled). Then: stop if a stop
id appeared in the generated text (EOS early stop, before committing); otherwise commit the block with full
attention (causal with `cache_ver`), except after the last block, whose KV nothing reads.

A StopDecoding raised by the model's forward (the app's Stop) rolls the run back to its last complete block, as the
block loop does (result.py `Kept`); `check` ends it at a block's end ("cancelled", "time_limit"). The forward-saving
options of the block loop (kv_reuse, fused_commit, adaptive_block) are refused by the config: an edit may rewrite
any decoded token until its block ends, so no row of the block is final before then.

Deviations from the reference code (phymhan/S2D2 `LLaDA2/generate_utils.py`), per docs/algorithm.md,
'Where we deviate from the reference code': the prefill uses a bool block-causal mask (the reference passes a {0,1}
float mask, which SDPA would add as a bias on a native class); the mask token is never drafted; the random generator is
seeded per prompt by the caller; policies are the library's (`never`/`always`/span/threshold/hysteresis, and UCB). Never
verifying is the reference's cached decoder (`generate_cached`); verifying is its `generate_ssd_policy`. One difference
only shows with `max_post_steps > 0`: a mask-free step has no span, so the policy is not consulted (the reference scores
it s = −∞, which turns a hysteresis policy OFF); with `max_post_steps = 0`, as in every eval script, they agree.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

import torch

from ..config import DecodeConfig
from ..trace import BlockRecord, Commit, Edit, PolicyDecision, PolicyInputs, StepRecord, Verification
from .blocks import block_masks, commit_block, prefill
from .context import StepContext, lay_out
from .draws import Source
from .forwards import Recorder
from .result import Kept, LoopResult, StopDecoding, number_steps
from .step import (draft_records, draft_step, fallback_picks, first_mask_span, policy_inputs_from, policy_summary,
                   verify_span)
from .token_writes import TokenWrites


def edit_positions(is_mask: torch.Tensor, prompt_tail: int, current: torch.Tensor, drafts: torch.Tensor,
                   p: torch.Tensor, threshold: float | None) -> torch.Tensor:
    """Block-relative positions to edit (ascending): decoded (not a mask), not prompt, the draft differs from the
    current token, and its probability is strictly above τ_edit. None disables editing (no positions)."""
    if threshold is None:
        return torch.zeros(0, dtype=torch.long, device=current.device)
    editable = ~is_mask
    editable[:prompt_tail] = False
    return (editable & (drafts != current) & (p > threshold)).nonzero().squeeze(-1)


def editing_loop(model: Any, cfg: DecodeConfig, prompt: torch.Tensor, rec: Recorder, generator: Source,
                 check: Callable[[list[StepRecord]], Optional[str]]) -> LoopResult:
    plan, ctx = lay_out(model, cfg, prompt, rec, generator, model.new_cache())  # refuses a right-shifted model
    x, mask_id = ctx.x, ctx.mask_id
    steps: list[StepRecord] = []
    blocks: list[BlockRecord] = []
    kept = Kept(rec, x, blocks, steps)
    try:
        prefill(ctx, plan.first_start, want_logits=False)
        kept.mark()
        reason = _decode_blocks(ctx, plan.first_start, plan.end, blocks, steps, check, kept)
    except StopDecoding:
        blocks, steps = kept.restore(mask_id)
        reason = "cancelled"
    return LoopResult(x, blocks, number_steps(steps), reason)


def _decode_blocks(ctx: StepContext, first: int, end: int, blocks: list[BlockRecord], steps: list[StepRecord],
                   check: Callable[[list[StepRecord]], Optional[str]], kept: Kept) -> str:
    """Block after block until the plan's end or a stop; `kept` follows the last complete block."""
    B = ctx.cfg.block_length
    stops = stop_ids(ctx)
    schedule = ctx.cfg.transfer_schedule()
    for start in range(first, end, B):
        blk = open_block(ctx, start)
        blocks.append(blk)
        _decode_block(ctx, blk, steps, schedule)
        if eos_in(ctx, blk, stops):  # EOS early stop: the block is final, skip its commit
            return "stop_token"
        if start + B < end:  # nothing reads the last block's KV
            commit_block(ctx, blk)
        reason = check(number_steps(steps))
        if reason is not None:
            return reason
        kept.mark()
    return "length"


def _decode_block(ctx: StepContext, blk: BlockRecord, steps: list[StepRecord], schedule: list[int]) -> None:
    """Steps until the block ends (`step_due`, `block_ended`)."""
    step, post = 0, 0
    while (due := step_due(ctx, post)) is not None:
        had_masks, post = due
        record = editing_step(ctx, blk.index, blk.start, step, k_s_at(schedule, step))
        steps.append(record)
        step += 1
        if block_ended(had_masks, record):
            return


def open_block(ctx: StepContext, start: int) -> BlockRecord:
    """The block at `start`: its record, and its masks as the host's list (`step_due`)."""
    B = ctx.cfg.block_length
    blk = BlockRecord(start // B, start, B, max(0, min(ctx.prompt_len - start, B)))
    ctx.masks = block_masks(ctx, blk)
    return blk


def stop_ids(ctx: StepContext) -> torch.Tensor:
    """The model's stop ids as a device tensor (one that matches no token when it has none)."""
    return torch.tensor(ctx.model.spec.stop_ids or [-1], device=ctx.x.device)


def eos_in(ctx: StepContext, blk: BlockRecord, stops: torch.Tensor) -> bool:
    """Whether a stop id appeared in the generated text up to the block's end (the EOS early stop, before the
    commit)."""
    return bool(torch.isin(ctx.x[ctx.prompt_len : blk.start + ctx.cfg.block_length], stops).any())


def step_due(ctx: StepContext, post: int) -> Optional[tuple[bool, int]]:
    """Before a step of the block: (whether the block has a mask, the mask-free steps so far, this one counted), or
    None when the block ends here (it has had max_post_steps mask-free steps). The host knows the block's masks
    (ctx.masks: `block_masks` when it opens, less each step's fills; an edit only rewrites a decoded token and no
    draw is ever the mask id), so no read."""
    had_masks = bool(ctx.masks)
    if not had_masks:
        post += 1
        if post > ctx.cfg.max_post_steps:
            return None
    return had_masks, post


def block_ended(had_masks: bool, record: StepRecord) -> bool:
    """After a step: the block ends after a step that started with no mask and edited nothing."""
    return not had_masks and not record.edits


def k_s_at(schedule: list[int], step: int) -> int:
    """The step's k_s from the block's transfer schedule (its last entry repeats)."""
    return schedule[min(step, len(schedule) - 1)]


@dataclass
class EditStep:
    """One editing step between its parts: its host facts before the draft forward (`plan_edit_step`), then what
    the draft and the routing gave (`route_edit_step`). The batch-first editing loop keeps one per row between
    its forwards (lockstep_editing.py)."""

    block: int
    start: int
    step: int
    k_s: int
    first_forward: int
    block_ids: torch.Tensor  # the block before the step (a copy: the step writes the sequence)
    positions: torch.Tensor
    mask_idx: torch.Tensor
    masks: list[int]  # block-relative, ascending
    prompt_tail: int
    probs: Optional[torch.Tensor] = None  # the draft of its read rows (`draft_rows`): distribution, tokens, p
    drafts: Optional[torch.Tensor] = None
    p: Optional[torch.Tensor] = None
    edit_idx: Optional[torch.Tensor] = None  # the positions this step edits (None: editing is off)
    m_probs: Optional[torch.Tensor] = None  # ... the draft at the masks only
    m_drafts: Optional[torch.Tensor] = None
    m_p: Optional[torch.Tensor] = None
    span_len: int = 0
    inputs: Optional[PolicyInputs] = None
    decision: Optional[PolicyDecision] = None

    @property
    def verifies(self) -> bool:
        return self.decision is not None and self.decision.verify

    def edited(self) -> torch.Tensor:
        """The block with this step's edits applied (what its verifier reads)."""
        if self.edit_idx is None:
            return self.block_ids
        edited = self.block_ids.clone()
        edited[self.edit_idx] = self.drafts[self.edit_idx]
        return edited


def editing_step(ctx: StepContext, block: int, start: int, step: int, k_s: int) -> StepRecord:
    """One LLaDA2.x step of the block at `start`: draft, edits, route/verify the first span, fallback, apply."""
    es = plan_edit_step(ctx, block, start, step, k_s)
    # 1. draft (every position when edits are on: they read the decoded ones); 2. edits and the route
    probs, drafts, p = draft_step(ctx, block, step, es.block_ids, es.positions, draft_rows(ctx, es),
                                  first_mask(ctx, es))
    route_edit_step(ctx, es, probs, drafts, p)
    # 3. mask filling: verify on the edited block (rule V2), then the fallback (`finish_edit_step`)
    verification, chosen = None, []
    if es.verifies:
        verification, chosen = verify_span(ctx, block, step, start, es.edited(), es.positions, es.mask_idx, es.masks,
                                           es.m_probs, es.m_drafts, es.m_p, es.span_len, start + ctx.B)
    return finish_edit_step(ctx, es, verification, chosen)


def plan_edit_step(ctx: StepContext, block: int, start: int, step: int, k_s: int) -> EditStep:
    """The step's host facts before its draft forward: the block's masks (the host's list, `step_due`) and where
    the prompt ends."""
    B, x = ctx.B, ctx.x
    first_forward = ctx.rec.last_index + 1
    block_ids = x[start : start + B].clone()
    masks = list(ctx.masks)
    mask_idx = torch.tensor(masks, dtype=torch.long, device=x.device)
    return EditStep(block, start, step, k_s, first_forward, block_ids, ctx.index[start : start + B], mask_idx, masks,
                    max(0, min(B, ctx.prompt_len - start)))


def first_mask(ctx: StepContext, es: EditStep) -> int:
    """The block's first mask (B when it has none): where the draft's decoded prefix ends."""
    return es.masks[0] if es.masks else ctx.B


def masks_only(ctx: StepContext, es: EditStep) -> bool:
    """Whether the step's draft reads its masks' rows alone: greedy with editing off, nothing reads a decoded
    position's draft (a step with no mask left still drafts its whole block, as a post step's forward does). A
    sampled draft keeps drawing every position, so a seed's draws stay what they were. The page's decoder reads the
    same rows (s2d2_web/decoding/editing.js)."""
    return ctx.cfg.editing_threshold is None and bool(es.masks) and not ctx.cfg.do_sample


def draft_rows(ctx: StepContext, es: EditStep) -> torch.Tensor:
    """The block positions the step's draft reads (`masks_only`: its masks; else every position)."""
    return es.mask_idx if masks_only(ctx, es) else ctx.index[: ctx.B]


def route_edit_step(ctx: StepContext, es: EditStep, probs: torch.Tensor, drafts: torch.Tensor,
                    p: torch.Tensor) -> None:
    """After the draft: the edits, and the policy's route of the first mask span (one read: policy_inputs)."""
    take_draft(ctx, es, probs, drafts, p)
    if routes(ctx, es):
        decide_route(ctx, es, ctx.reads.fetch(policy_summary(ctx, es.m_probs, es.m_p, es.span_len)))


def take_draft(ctx: StepContext, es: EditStep, probs: torch.Tensor, drafts: torch.Tensor, p: torch.Tensor,
               masked: Optional[tuple[torch.Tensor, ...]] = None) -> None:
    """The step's draft, its edits (device work) and the draft at its masks (`masked`: when the caller took it
    with other rows', the batch-first editing loop)."""
    es.probs, es.drafts, es.p = probs, drafts, p
    threshold = ctx.cfg.editing_threshold
    if threshold is not None:
        es.edit_idx = edit_positions(es.block_ids == ctx.mask_id, es.prompt_tail, es.block_ids, drafts, p, threshold)
    if masked is None:
        masked = (probs, drafts, p) if masks_only(ctx, es) else (probs[es.mask_idx], drafts[es.mask_idx],
                                                                 p[es.mask_idx])
    es.m_probs, es.m_drafts, es.m_p = masked
    es.span_len = first_mask_span(es.masks) if es.masks else 0


def routes(ctx: StepContext, es: EditStep) -> bool:
    """Whether the step consults its policy (an S2D2 step with a mask left)."""
    return bool(es.masks) and ctx.policy is not None


def decide_route(ctx: StepContext, es: EditStep, got: dict[str, Any]) -> None:
    """The policy's inputs and decision from the routing summary read back (`got`: step.py `policy_summary`'s,
    or the batch-first editing loop's shared read of many rows' summaries)."""
    masks = es.masks
    es.inputs = policy_inputs_from(ctx, got, es.span_len, len(masks), ctx.B, es.prompt_tail, masks,
                                   min(es.k_s, len(masks)))
    es.decision = ctx.policy.decide(es.inputs)


def fallback_due(es: EditStep, chosen: list[tuple[int, int, str]]) -> int:
    """How many masks the remasking rule picks after the verifier decoded `chosen` (0: none, or no mask left)."""
    return max(0, min(es.k_s, len(es.masks)) - len(chosen)) if es.masks else 0


def finish_edit_step(ctx: StepContext, es: EditStep, verification: Optional[Verification],
                     chosen: list[tuple[int, int, str]], fallback: Optional[list[tuple[int, int, str]]] = None,
                     writes: Optional[TokenWrites] = None) -> StepRecord:
    """After the route (and the verifier, which decoded `chosen`): the fallback, the policy's reward, the edits and
    fills written at once, and the step's record. `fallback`: the rule's picks when the caller took them with other
    rows' (`fallback_from`, the batch-first editing loop); `writes`: the fills join them (the caller flushes them
    with other rows', before anything reads the sequence), the edits are written here."""
    cfg, x, rec, masks, start = ctx.cfg, ctx.x, ctx.rec, es.masks, es.start
    fallback_k, reward = fallback_due(es, chosen), None
    if masks:
        if fallback_k > 0:
            chosen = chosen + (fallback if fallback is not None else fallback_picks(
                cfg, es.m_probs, es.m_drafts, es.m_p, chosen, fallback_k, topup=verification is not None))
        if es.decision is not None:
            reward = ctx.policy.update(es.decision, len(chosen))
    # 4. apply edits and fills together
    edits = [] if es.edit_idx is None else _edit_records(ctx, start, es.block_ids, es.drafts, es.p, es.edit_idx)
    if edits:
        x[start + es.edit_idx] = es.drafts[es.edit_idx]
    commits = rec.with_texts([Commit(start + masks[i], t, "", how) for i, t, how in chosen])
    if commits and writes is not None:
        writes.add(x[start : start + ctx.B], start, commits)
    elif commits:  # (positions from the host's list: mask_idx[i] is masks[i])
        x[torch.tensor([c.position for c in commits], dtype=torch.long, device=x.device)] = torch.tensor(
            [c.token for c in commits], dtype=torch.long, device=x.device)
    filled = {masks[i] for i, _, _ in chosen}
    ctx.masks = [m for m in ctx.masks if m not in filled]
    return StepRecord(
        index=-1, block=es.block, step=es.step, window=[start, start + ctx.B],
        forwards=list(range(es.first_forward, rec.last_index + 1)), masks_before=[start + m for m in masks],
        drafts=draft_records(ctx, es.m_probs, es.m_drafts, es.m_p, masks, start),
        span=[start + masks[0] if masks else start, es.span_len], policy_inputs=es.inputs, decision=es.decision,
        verification=verification, fallback_k=fallback_k, commits=commits, reward=reward, edits=edits,
    )


def _edit_records(ctx: StepContext, start: int, block_ids: torch.Tensor, drafts: torch.Tensor, p: torch.Tensor,
                  edit_idx: torch.Tensor) -> list[Edit]:
    """Typed edit records (position, old, new, p), in one host transfer."""
    if edit_idx.numel() == 0:
        return []
    rows = torch.stack([edit_idx, block_ids[edit_idx], drafts[edit_idx]]).tolist()
    probs = p[edit_idx].tolist()
    text = ctx.rec.text if ctx.rec.detailed else (lambda t: "")
    return [Edit(start + i, old, text(old), new, text(new), q) for i, old, new, q in zip(*rows, probs)]
