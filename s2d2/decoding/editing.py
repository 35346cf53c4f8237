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

from typing import Any, Callable, Optional

import torch

from ..config import DecodeConfig
from ..policies import make_policy
from ..trace import BlockRecord, Commit, Edit, StepRecord
from .blocks import commit_block, prefill
from .context import StepContext
from .draws import Source
from .layout import block_plan
from .forwards import Recorder
from .result import Kept, LoopResult, StopDecoding, number_steps
from .step import draft_records, draft_step, fallback_picks, first_mask_span, policy_inputs, verify_span


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
    P, mask_id = int(prompt.shape[0]), model.spec.mask_id
    plan = block_plan(cfg, P, model.spec.alignment == "shifted")  # refuses a right-shifted model
    x = torch.full((plan.total,), mask_id, dtype=torch.long, device=prompt.device)
    x[:P] = prompt
    policy = make_policy(cfg) if cfg.method == "s2d2" else None
    ctx = StepContext(model, cfg, rec, generator, x, model.new_cache(), policy, P)
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
    cfg, x, B, P = ctx.cfg, ctx.x, ctx.cfg.block_length, ctx.prompt_len
    stops = torch.tensor(ctx.model.spec.stop_ids or [-1], device=x.device)
    schedule = cfg.transfer_schedule()
    for start in range(first, end, B):
        blk = BlockRecord(start // B, start, B, max(0, min(P - start, B)))
        blocks.append(blk)
        _decode_block(ctx, blk, steps, schedule)
        if bool(torch.isin(x[P : start + B], stops).any()):  # EOS early stop: the block is final, skip its commit
            return "stop_token"
        if start + B < end:  # nothing reads the last block's KV
            commit_block(ctx, blk)
        reason = check(number_steps(steps))
        if reason is not None:
            return reason
        kept.mark()
    return "length"


def _decode_block(ctx: StepContext, blk: BlockRecord, steps: list[StepRecord], schedule: list[int]) -> None:
    """Steps until the block ends: after a step that started with no masks and edited nothing, or after
    max_post_steps mask-free steps."""
    x, span = ctx.x, slice(blk.start, blk.start + blk.length)
    step, post = 0, 0
    while True:
        had_masks = bool((x[span] == ctx.mask_id).any())
        if not had_masks:
            post += 1
            if post > ctx.cfg.max_post_steps:
                return
        record = editing_step(ctx, blk.index, blk.start, step, schedule[min(step, len(schedule) - 1)])
        steps.append(record)
        step += 1
        if not had_masks and not record.edits:
            return


def editing_step(ctx: StepContext, block: int, start: int, step: int, k_s: int) -> StepRecord:
    """One LLaDA2.x step of the block at `start`: draft, edits, route/verify the first span, fallback, apply."""
    cfg, x, B, rec = ctx.cfg, ctx.x, ctx.B, ctx.rec
    first_forward = rec.last_index + 1
    block_ids = x[start : start + B].clone()
    positions = torch.arange(start, start + B, device=x.device)
    is_mask = block_ids == ctx.mask_id
    mask_idx = is_mask.nonzero().squeeze(-1)
    masks = mask_idx.tolist()
    prompt_tail = max(0, min(B, ctx.prompt_len - start))
    # 1. draft every position (edits read the decoded ones); 2. edits
    probs, drafts, p = draft_step(ctx, block, step, block_ids, positions, torch.arange(B, device=x.device),
                                  masks[0] if masks else B)
    edit_idx = edit_positions(is_mask, prompt_tail, block_ids, drafts, p, cfg.editing_threshold)
    edited = block_ids.clone()
    edited[edit_idx] = drafts[edit_idx]
    # 3. mask filling: route, verify on the edited block (rule V2), fallback
    m_probs, m_drafts, m_p = probs[mask_idx], drafts[mask_idx], p[mask_idx]
    chosen: list[tuple[int, int, str]] = []
    inputs = decision = verification = reward = None
    fallback_k, span_len = 0, first_mask_span(masks) if masks else 0
    if masks:
        if ctx.policy is not None:
            inputs = policy_inputs(ctx, m_probs, m_p, span_len, len(masks), B, prompt_tail, masks,
                                   min(k_s, len(masks)))
            decision = ctx.policy.decide(inputs)
        if decision is not None and decision.verify:
            verification, chosen = verify_span(ctx, block, step, start, edited, positions, mask_idx, masks,
                                               m_probs, m_drafts, m_p, span_len, start + B)
        fallback_k = max(0, min(k_s, len(masks)) - len(chosen))
        if fallback_k > 0:
            chosen += fallback_picks(cfg, m_probs, m_drafts, m_p, chosen, fallback_k,
                                     topup=verification is not None)
        if decision is not None:
            reward = ctx.policy.update(decision, len(chosen))
    # 4. apply edits and fills together
    edits = _edit_records(ctx, start, block_ids, drafts, p, edit_idx)
    x[start + edit_idx] = drafts[edit_idx]
    if chosen:
        cand = torch.tensor([c[0] for c in chosen], dtype=torch.long, device=x.device)
        x[start + mask_idx[cand]] = torch.tensor([c[1] for c in chosen], dtype=torch.long, device=x.device)
    text = rec.text if rec.detailed else (lambda t: "")
    commits = [Commit(start + masks[i], t, text(t), how) for i, t, how in chosen]
    return StepRecord(
        index=-1, block=block, step=step, window=[start, start + B],
        forwards=list(range(first_forward, rec.last_index + 1)), masks_before=[start + m for m in masks],
        drafts=draft_records(ctx, m_probs, m_drafts, m_p, masks, start),
        span=[start + masks[0] if masks else start, span_len], policy_inputs=inputs, decision=decision,
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
