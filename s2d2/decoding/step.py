"""One denoising step of the current window: draft -> first mask span -> route -> verify -> fallback (§3.2).

With method "diffusion" (or a policy that declines) the step is exactly a baseline step. Deviations from the
reference code, per the spec (§9): k is clamped to the candidates; the loop runs while masks remain; the mask
token is never drafted; masks are built per call; a rejected draft is never committed when
allow_resample=False; one sampling transform serves p, q and the residual.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from ..config import DecodeConfig
from ..estimators import acceptance_alphas, expected_accepted_tokens, normalized_entropy, top2_margin
from ..models.masks import draft_mask, verify_2l_mask
from ..trace import Commit, MaskDraft, PolicyInputs, StepRecord, Verification, VerifyPosition
from . import remasking
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
    cfg, x, B = ctx.cfg, ctx.x, ctx.cfg.block_length
    ws, we = window
    block_ids = x[start : start + B]
    positions = torch.arange(start, start + B, device=x.device)
    in_window = torch.zeros(B, dtype=torch.bool, device=x.device)
    in_window[ws - start : we - start] = True
    mask_idx = ((block_ids == ctx.mask_id) & in_window).nonzero().squeeze(-1)  # block-relative, ascending
    masks = mask_idx.tolist()

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
        q_probs, kind = verify_probs(ctx, block, step, start, block_ids, positions, mask_idx, drafts, span_len, we)
        outcome = accept_span(cfg.acceptance, drafts[:span_len], p[:span_len], probs[:span_len], q_probs,
                              cfg.ratio_gamma, cfg.allow_resample, ctx.generator)
        drafts_host = drafts[:span_len].tolist()
        chosen += [(i, drafts_host[i], "accepted") for i in range(outcome.accepted_len)]
        if outcome.resampled is not None:
            chosen.append((outcome.accepted_len, outcome.resampled, "resampled"))
        verification = _verification_record(ctx, kind, outcome, masks, start, drafts_host, p, q_probs, span_len)
        chosen += _ratio_extras(cfg, outcome, span_len, drafts_host)
    if cfg.always_check_high_conf:
        chosen += _hiconf_extras(cfg, p, drafts, {c[0] for c in chosen})
    fallback_k = max(0, min_k - len(chosen))
    if fallback_k > 0:
        chosen += fallback_picks(cfg, probs, drafts, p, chosen, fallback_k, topup=verification is not None)

    # 9. reward; 10. apply every update at once
    reward = ctx.policy.update(decision, len(chosen)) if ctx.policy is not None else None
    cand = torch.tensor([c[0] for c in chosen], dtype=torch.long, device=x.device)
    x[start + mask_idx[cand]] = torch.tensor([c[1] for c in chosen], dtype=torch.long, device=x.device)
    commits = [Commit(start + masks[i], t, ctx.rec.text(t) if ctx.rec.detailed else "", how) for i, t, how in chosen]
    forwards = list(range(ctx.rec.last_index - (1 if verification else 0), ctx.rec.last_index + 1))
    return StepRecord(
        index=-1, block=block, step=step, window=[ws, we], forwards=forwards,
        masks_before=[start + m for m in masks], drafts=_draft_records(ctx, probs, drafts, p, masks, start),
        span=[start + masks[0], span_len], policy_inputs=inputs, decision=decision, verification=verification,
        fallback_k=fallback_k, commits=commits, reward=reward,
    )


def draft_step(ctx: StepContext, block: int, step: int, block_ids: torch.Tensor, positions: torch.Tensor,
               mask_idx: torch.Tensor, first_mask: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Draft forward over the whole block (no KV stored) -> (distribution, drafts, p) at the masked positions.

    draft_ver makes the rows of the decoded prefix (before the first mask) causal.
    """
    cfg, B = ctx.cfg, ctx.cfg.block_length
    attention = draft_mask(ctx.cache.get_seq_length(), B, first_mask, block_ids.device) if cfg.draft_ver else "full"
    logits = ctx.rec.forward("draft", block, step, ctx.cache, block_ids, positions, attention, keep=0)
    if not ctx.aligned:  # right-shifted: the logit at j-1 predicts j; block position 0 is never masked
        logits = torch.cat([logits[:1], logits[:-1]], dim=0)
    probs = token_distribution(logits[mask_idx], cfg, ctx.mask_id)
    drafts = draw_tokens(probs, cfg, ctx.generator)
    return probs, drafts, probs.gather(-1, drafts[:, None]).squeeze(-1)


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
    """Run the verifier on the draft-filled block and return q over the span positions."""
    B = ctx.cfg.block_length
    filled = block_ids.clone()
    filled[mask_idx] = drafts
    span_idx = mask_idx[:span_len]
    if ctx.aligned:  # 2L: [x~ | MASK x B] at duplicated positions; row B+i is one AR query at i
        ids = torch.cat([filled, torch.full_like(filled, ctx.mask_id)])
        mask = verify_2l_mask(ctx.cache.get_seq_length(), B, filled.device)
        logits = ctx.rec.forward("verify_2l", block, step, ctx.cache, ids, torch.cat([positions, positions]),
                                 mask, keep=0, last=B)
        rows = logits[span_idx]
        kind = "2l"
    else:  # causal pass from the block start to the window end; the logit at j-1 predicts j
        end = window_end - start
        logits = ctx.rec.forward("verify_causal", block, step, ctx.cache, filled[:end], positions[:end],
                                 "causal", keep=0)
        rows = logits[span_idx - 1]
        kind = "causal"
    return token_distribution(rows, ctx.cfg, ctx.mask_id), kind


def _ratio_extras(cfg: DecodeConfig, out: Outcome, span_len: int, drafts: list[int]) -> list[tuple[int, int, str]]:
    if cfg.ratio_threshold is None or out.first_reject is None:
        return []
    ratio = out.ratio.tolist()
    return [(i, drafts[i], "ratio_extra") for i in range(out.first_reject + 1, span_len)
            if ratio[i] >= cfg.ratio_threshold]


def _hiconf_extras(cfg: DecodeConfig, p: torch.Tensor, drafts: torch.Tensor, taken: set[int]) -> list[tuple[int, int, str]]:
    hi = (p > cfg.confidence_threshold).nonzero().squeeze(-1).tolist()
    toks = drafts.tolist()
    return [(i, toks[i], "hiconf_extra") for i in hi if i not in taken]


def _draft_records(ctx: StepContext, probs: torch.Tensor, drafts: torch.Tensor, p: torch.Tensor,
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


# Public names for the LLaDA2 editing loop (editing.py), which builds its steps from the same pieces.
draft_records = _draft_records
verification_record = _verification_record
