"""One denoising step of the current window: draft -> first mask span -> route -> verify -> fallback (§3.2).

With method "diffusion" (or a policy that declines) the step is exactly a baseline step. Deviations from the
reference code, per the spec (§9): k is clamped to the candidates; the loop runs while masks remain; the mask
token is never drafted; masks are built per call; a rejected draft is never committed when
allow_resample=False; one sampling transform serves p, q and the residual.

Beyond the paper (off in the paper presets): with `kv_reuse` the first `ctx.cached` positions of the block already
have their causal KV in the cache, so the draft and the verifier query only the rest (same logits in exact
arithmetic, see kv.py); with `fused_commit` the block's first draft logits come from the fused forward that also
cached the previous block (`ctx.carried`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import torch

from ..config import DecodeConfig
from ..estimators import acceptance_alphas, expected_accepted_tokens, normalized_entropy, top2_margin
from ..models.masks import draft_mask, verify_2l_mask
from ..trace import Commit, MaskDraft, PolicyInputs, StepRecord, Verification, VerifyPosition
from . import remasking
from .kv import kept_prefix_rows, remember_verified, settle_verified_rows
from .recorder import Recorder
from .sampling import draw_tokens, entropy, token_distribution
from .verify import Outcome, accept_span


@dataclass
class StepContext:
    """What a step reads and mutates: the sequence, the cache, the policy state and the recorder."""

    model: Any
    cfg: DecodeConfig
    rec: Recorder
    generator: torch.Generator
    x: torch.Tensor  # [total] token ids, MASK where undecided
    cache: Any
    policy: Any  # None for method "diffusion"
    prompt_len: int
    block_length: Optional[int] = None  # the current block's length (varies with adaptive_block); None: cfg's
    cached: int = 0  # leading positions of the current block whose KV is already in the cache (kv_reuse)
    carried: Optional[tuple[torch.Tensor, int]] = None  # (draft logits, offset) from a fused forward, unconsumed
    tail: Optional[tuple[int, int]] = None  # [start, end) of the finished block still to cache (fused_commit)
    seen: Optional[torch.Tensor] = None  # verifier input tokens whose KV rows are kept until acceptance settles

    @property
    def B(self) -> int:
        return self.block_length or self.cfg.block_length

    @property
    def mask_id(self) -> int:
        return self.model.spec.mask_id

    @property
    def aligned(self) -> bool:
        return self.model.spec.alignment == "aligned"


def first_mask_span(mask_positions: list[int]) -> int:
    """Length of the first maximal run of consecutive masked positions (never 0 while masks remain)."""
    for i in range(1, len(mask_positions)):
        if mask_positions[i] != mask_positions[i - 1] + 1:
            return i
    return len(mask_positions)


def run_step(ctx: StepContext, block: int, start: int, window: tuple[int, int], step: int, k_s: int) -> StepRecord:
    cfg, x, B = ctx.cfg, ctx.x, ctx.B
    ws, we = window
    block_ids = x[start : start + B]
    positions = torch.arange(start, start + B, device=x.device)
    in_window = torch.zeros(B, dtype=torch.bool, device=x.device)
    in_window[ws - start : we - start] = True
    mask_idx = ((block_ids == ctx.mask_id) & in_window).nonzero().squeeze(-1)  # block-relative, ascending
    masks = mask_idx.tolist()
    first_forward = ctx.rec.last_index + (0 if ctx.carried is not None else 1)

    # 1. draft; 2-5. target, first span, route
    probs, drafts, p = draft_step(ctx, block, step, block_ids, positions, mask_idx, masks[0])
    min_k = min(k_s, len(masks))
    span_len = first_mask_span(masks)
    inputs, decision = None, None
    if ctx.policy is not None:
        inputs = policy_inputs(ctx, probs, p, span_len, len(masks), we - ws, _prompt_in(ctx, ws, we))
        decision = ctx.policy.decide(inputs)

    # 6. verify; 7. extras; 8. fallback
    chosen: list[tuple[int, int, str]] = []  # (candidate index, token, how)
    verification = None
    if decision is not None and decision.verify:
        verification, chosen = verify_span(ctx, block, step, start, block_ids, positions, mask_idx, masks, probs,
                                           drafts, p, span_len, we)
    if cfg.always_check_high_conf:
        chosen += _hiconf_extras(cfg, p, drafts, {c[0] for c in chosen})
    fallback_k = max(0, min_k - len(chosen))
    if fallback_k > 0:
        chosen += fallback_picks(cfg, probs, drafts, p, chosen, fallback_k, topup=verification is not None)

    # 9. reward; 10. apply every update at once
    reward = ctx.policy.update(decision, len(chosen)) if ctx.policy is not None else None
    cand = torch.tensor([c[0] for c in chosen], dtype=torch.long, device=x.device)
    x[start + mask_idx[cand]] = torch.tensor([c[1] for c in chosen], dtype=torch.long, device=x.device)
    settle_verified_rows(ctx, start)
    commits = [Commit(start + masks[i], t, ctx.rec.text(t) if ctx.rec.detailed else "", how) for i, t, how in chosen]
    return StepRecord(
        index=-1, block=block, step=step, window=[ws, we], forwards=list(range(first_forward, ctx.rec.last_index + 1)),
        masks_before=[start + m for m in masks], drafts=draft_records(ctx, probs, drafts, p, masks, start),
        span=[start + masks[0], span_len], policy_inputs=inputs, decision=decision, verification=verification,
        fallback_k=fallback_k, commits=commits, reward=reward,
    )


def verify_span(ctx: StepContext, block: int, step: int, start: int, block_ids: torch.Tensor,
                positions: torch.Tensor, mask_idx: torch.Tensor, masks: list[int], probs: torch.Tensor,
                drafts: torch.Tensor, p: torch.Tensor, span_len: int,
                window_end: int) -> tuple[Verification, list[tuple[int, int, str]]]:
    """Verifier forward + acceptance test over the span: the record and the (index, token, how) it decodes.
    Shared by the block loop and the editing loop (which passes its block with this step's edits applied)."""
    cfg = ctx.cfg
    q_probs, kind = verify_probs(ctx, block, step, start, block_ids, positions, mask_idx, drafts, span_len,
                                 window_end)
    outcome = accept_span(cfg.acceptance, drafts[:span_len], p[:span_len], probs[:span_len], q_probs,
                          cfg.ratio_gamma, cfg.allow_resample, ctx.generator)
    drafts_host = drafts[:span_len].tolist()
    chosen = [(i, drafts_host[i], "accepted") for i in range(outcome.accepted_len)]
    if outcome.resampled is not None:
        chosen.append((outcome.accepted_len, outcome.resampled, "resampled"))
    verification = _verification_record(ctx, kind, outcome, masks, start, drafts_host, p, q_probs, span_len)
    return verification, chosen + _ratio_extras(cfg, outcome, span_len, drafts_host)


def draft_step(ctx: StepContext, block: int, step: int, block_ids: torch.Tensor, positions: torch.Tensor,
               mask_idx: torch.Tensor, first_mask: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Draft forward over the block (no KV stored) -> (distribution, drafts, p) at the masked positions.

    draft_ver makes the rows of the decoded prefix (before the first mask) causal. A fused forward that already
    drafted this block (`ctx.carried`) is used instead of a new forward.
    """
    cfg = ctx.cfg
    if ctx.carried is not None:
        (logits, offset), ctx.carried = ctx.carried, None
    else:
        logits, offset = draft_forward(ctx, block, step, block_ids, positions, first_mask)
    probs = token_distribution(logits[mask_idx - offset], cfg, ctx.mask_id)
    drafts = draw_tokens(probs, cfg, ctx.generator)
    return probs, drafts, probs.gather(-1, drafts[:, None]).squeeze(-1)


def draft_forward(ctx: StepContext, block: int, step: int, block_ids: torch.Tensor, positions: torch.Tensor,
                  first_mask: int) -> tuple[torch.Tensor, int]:
    """(logits, offset): the logit that drafts block position i is row i - offset.

    Only the uncached positions [ctx.cached, B) are queried. Right-shifted models read the logit at i-1 for i
    (block position 0 is never masked). With kv_reuse, causal decoded-prefix rows stay in the cache (kv.py).
    """
    k = ctx.cached
    prefix = max(0, first_mask - k)  # decoded rows before the first mask among the queried ones
    n = int(block_ids.shape[0]) - k
    cache_len = ctx.cache.get_seq_length()
    attention = draft_mask(cache_len, n, prefix, block_ids.device) if ctx.cfg.draft_ver else "full"
    keep = kept_prefix_rows(ctx, prefix)
    logits = ctx.rec.forward("draft", block, step, ctx.cache, block_ids[k:], positions[k:], attention, keep=keep)
    ctx.cached += keep
    return logits, k + (0 if ctx.aligned else 1)


def fallback_picks(cfg: DecodeConfig, probs: torch.Tensor, drafts: torch.Tensor, p: torch.Tensor,
                   chosen: list[tuple[int, int, str]], k: int, topup: bool) -> list[tuple[int, int, str]]:
    """The remasking rule over the masks not yet chosen this step (a whole baseline step when none are)."""
    rest = torch.ones(p.shape[0], dtype=torch.bool, device=p.device)
    rest[[c[0] for c in chosen]] = False
    rest = rest.nonzero().squeeze(-1)
    picks, hows = remasking.select(cfg.remasking, p[rest], entropy(probs[rest]), k, cfg.confidence_threshold,
                                   cfg.eb_gamma, topup=topup)
    idx = rest[picks]
    return list(zip(idx.tolist(), drafts[idx].tolist(), hows))


def _prompt_in(ctx: StepContext, ws: int, we: int) -> int:
    return max(0, min(we, ctx.prompt_len) - ws)


def policy_inputs(ctx: StepContext, probs: torch.Tensor, p: torch.Tensor, span_len: int, n_masks: int,
                  window_len: int, prompt_in_window: int) -> PolicyInputs:
    """Estimator outputs for the span plus the counts a policy reads, in one host transfer."""
    cfg = ctx.cfg
    alphas = acceptance_alphas(cfg, probs[:span_len], p[:span_len])
    k_hat = torch.as_tensor(expected_accepted_tokens(alphas), device=p.device, dtype=torch.float32)
    scope = probs[:span_len] if cfg.ucb_entropy_scope == "span" else probs
    summary = torch.cat([alphas.float(), k_hat.reshape(1), (p > cfg.confidence_threshold).sum().reshape(1).float(),
                         normalized_entropy(scope).mean().reshape(1)]).tolist()
    decoded = window_len - n_masks - prompt_in_window
    return PolicyInputs(
        span_len=span_len, alphas=summary[:span_len], k_hat=summary[span_len], n_hi=int(summary[span_len + 1]),
        window_len=window_len, progress=decoded / window_len, mean_entropy=summary[span_len + 2],
    )


def verify_probs(ctx: StepContext, block: int, step: int, start: int, block_ids: torch.Tensor,
                 positions: torch.Tensor, mask_idx: torch.Tensor, drafts: torch.Tensor, span_len: int,
                 window_end: int) -> tuple[torch.Tensor, str]:
    """Run the verifier on the draft-filled block and return q over the span positions.

    The queried rows start at ctx.cached (0 unless kv_reuse keeps part of the block in the cache). With kv_reuse
    the verifier's causal rows stay in the cache until `settle_verified_rows` trims them to the accepted prefix.
    """
    k, B = ctx.cached, int(block_ids.shape[0])
    filled = block_ids.clone()
    filled[mask_idx] = drafts
    span_idx = mask_idx[:span_len]
    cache_len = ctx.cache.get_seq_length()
    if ctx.aligned:  # 2L: [x~ | MASK x n] at duplicated positions; row n+i is one AR query at i
        n, end = B - k, B
        ids = torch.cat([filled[k:], torch.full_like(filled[k:], ctx.mask_id)])
        logits = ctx.rec.forward("verify_2l", block, step, ctx.cache, ids, torch.cat([positions[k:]] * 2),
                                 verify_2l_mask(cache_len, n, filled.device), keep=n if ctx.cfg.kv_reuse else 0,
                                 last=n)
        rows, kind = logits[span_idx - k], "2l"
    else:  # causal pass from the first uncached position to the window end; the logit at j-1 predicts j
        end = window_end - start
        logits = ctx.rec.forward("verify_causal", block, step, ctx.cache, filled[k:end], positions[k:end],
                                 "causal", keep=end - k if ctx.cfg.kv_reuse else 0)
        rows, kind = logits[span_idx - 1 - k], "causal"
    remember_verified(ctx, filled[:end])
    return token_distribution(rows, ctx.cfg, ctx.mask_id), kind


def _ratio_extras(cfg: DecodeConfig, out: Outcome, span_len: int, drafts: list[int]) -> list[tuple[int, int, str]]:
    if cfg.ratio_threshold is None or out.first_reject is None:
        return []
    ratio = out.ratio.tolist()
    return [(i, drafts[i], "ratio_extra") for i in range(out.first_reject + 1, span_len)
            if ratio[i] >= cfg.ratio_threshold]


def _hiconf_extras(cfg: DecodeConfig, p: torch.Tensor, drafts: torch.Tensor,
                   taken: set[int]) -> list[tuple[int, int, str]]:
    hi = (p > cfg.confidence_threshold).nonzero().squeeze(-1).tolist()
    toks = drafts.tolist()
    return [(i, toks[i], "hiconf_extra") for i in hi if i not in taken]


def draft_records(ctx: StepContext, probs: torch.Tensor, drafts: torch.Tensor, p: torch.Tensor,
                  masks: list[int], start: int) -> list[MaskDraft]:
    if not ctx.rec.detailed:
        return []
    stats = torch.stack([p, normalized_entropy(probs), top2_margin(probs)]).tolist()
    tops = ctx.rec.candidates(probs)
    toks = drafts.tolist()
    return [
        MaskDraft(start + m, toks[i], ctx.rec.text(toks[i]), stats[0][i], stats[1][i], stats[2][i], tops[i])
        for i, m in enumerate(masks)
    ]


def _verification_record(ctx: StepContext, kind: str, out: Outcome, masks: list[int], start: int,
                         drafts: list[int], p: torch.Tensor, q_probs: torch.Tensor, span_len: int) -> Verification:
    rows: list[VerifyPosition] = []
    if ctx.rec.detailed:
        cols = torch.stack([p[:span_len], out.q_draft, out.ratio, out.argmax_q_prob]).tolist()
        draws = out.draws.tolist() if out.draws is not None else [None] * span_len
        acc, amax, tops = out.accepted.tolist(), out.argmax_q.tolist(), ctx.rec.candidates(q_probs)
        rows = [
            VerifyPosition(start + masks[i], drafts[i], ctx.rec.text(drafts[i]), cols[0][i], cols[1][i], cols[2][i],
                           draws[i], acc[i], amax[i], ctx.rec.text(amax[i]), cols[3][i], tops[i])
            for i in range(span_len)
        ]
    text = ctx.rec.text(out.resampled) if (out.resampled is not None and ctx.rec.detailed) else ""
    return Verification(kind, ctx.cfg.acceptance, rows, out.accepted_len, out.first_reject, out.residual_mass,
                        out.fallback_to_q, out.resampled, text)
