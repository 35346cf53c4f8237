"""The verify branch of a step (§3.2 step 6, §3.4-§3.6): the verifier forward, the acceptance test on the device,
what the step decodes, and one read of it.

The host must learn the outcome before it goes on: whether the block still has masks decides whether the next
forward is a draft or the commit, and whether a position was rejected decides whether the residual draw consumes
the generator. So this read is the step's second (the first routed it); the residual token itself is drawn and
written on the device and read with the next transfer.
"""
from __future__ import annotations

from typing import Any, Optional

import torch

from ..models.masks import verify_2l_query
from ..trace import Verification
from .kv import remember_verified, settle_verified_rows
from .records import verification_record, verify_detail, verify_rows
from .sampling import token_distribution
from .selection import Pick, StepPicks, verify_inputs, verify_picks, write_picks
from .verify import accept_span, acceptance, residual_token
from .context import Draft, StepContext



def verify_probs(ctx: StepContext, block: int, step: int, start: int, block_ids: torch.Tensor,
                 positions: torch.Tensor, mask_idx: torch.Tensor, drafts: torch.Tensor, span_len: int,
                 window_end: int) -> tuple[torch.Tensor, str]:
    """Run the verifier on the draft-filled block and return q over the span positions.

    The queried rows start at ctx.cached (0 unless kv_reuse keeps part of the block in the cache). With kv_reuse
    the verifier's causal rows stay in the cache until `settle_verified_rows` trims them to the accepted prefix.
    """
    k, B = ctx.cached, int(block_ids.shape[0])
    at = mask_idx - k  # the masks' rows among the queried positions [k, B)
    if ctx.aligned:  # 2L: [x~ | MASK x n] at duplicated positions; row n+i is one AR query at i
        n, end = B - k, B
        ids = torch.full((2 * n,), ctx.mask_id, dtype=block_ids.dtype, device=block_ids.device)
        ids[:n] = block_ids[k:]
        ids[at] = drafts
        logits = ctx.rec.forward("verify_2l", block, step, ctx.cache, ids, positions[k:].repeat(2),
                                 verify_2l_query(n, ids.device), keep=n if ctx.cfg.kv_reuse else 0, last=n,
                                 rows=at[:span_len])
        kind = "2l"
    else:  # causal pass from the first uncached position to the window end; the logit at j-1 predicts j
        end = window_end - start
        filled = block_ids[k:end].clone()
        filled[at] = drafts
        logits = ctx.rec.forward("verify_causal", block, step, ctx.cache, filled, positions[k:end], "causal",
                                 keep=end - k if ctx.cfg.kv_reuse else 0, rows=at[:span_len] - 1)
        kind = "causal"
    remember_verified(ctx, end)
    return token_distribution(logits, ctx.cfg, ctx.mask_id, owned=True), kind


def verify_step(ctx: StepContext, block: int, step: int, start: int, draft: Draft, masks: list[int],
                span_len: int, min_k: int, window_end: int,
                tokens: list[int]) -> tuple[StepPicks, Verification, Optional[torch.Tensor]]:
    """Verifier forward + acceptance test over the span, extras and the top-up, written on the device.

    Returns the picks, the verification record and, when a residual token was drawn, the device values
    [token, mass, fell back to q] that complete both (the caller reads them later).
    """
    cfg, s = ctx.cfg, span_len
    q_probs, kind = verify_probs(ctx, block, step, start, ctx.x[start : start + ctx.B], draft.positions,
                                 draft.mask_idx, draft.tokens, s, window_end)
    acc = acceptance(cfg.acceptance, draft.tokens[:s], draft.p[:s], q_probs, cfg.ratio_gamma, ctx.generator,
                     with_argmax=ctx.rec.detailed)
    inputs = verify_inputs(cfg, acc, draft.p, draft.entropy, min_k)
    greedy = cfg.acceptance == "greedy_exact"
    got = ctx.reads.fetch({**inputs, "argmax_q": acc.argmax_q if greedy else None,
                           **verify_detail(ctx, acc, draft.p[:s], q_probs)})
    sp, first = verify_picks(cfg, got, len(masks), min_k, inputs)
    resampled: Optional[int] = None
    new_tokens, pending, token = draft.tokens, None, None
    if first < s and cfg.allow_resample:
        if greedy:
            resampled, token = got["argmax_q"][first], acc.argmax_q[first]  # type: ignore[index]
        else:
            token, mass, to_q = residual_token(draft.probs[first], q_probs[first], ctx.generator)
            pending = torch.stack([token.to(mass.dtype), mass, to_q.to(mass.dtype)])
        new_tokens = draft.tokens.clone()
        new_tokens[first] = token
    write_picks(ctx.x, start, draft.mask_idx, sp, new_tokens, draft.run)
    if ctx.seen_end is not None:
        same = pending is not None and bool(token == draft.tokens[first])  # kv_reuse only: a rare extra read
        settle_verified_rows(ctx, first_changed(masks, sp.picks, same, ctx.seen_end))
    text = ctx.rec.text(resampled) if resampled is not None and ctx.rec.detailed else ""
    verification = Verification(kind, cfg.acceptance, verify_rows(ctx, got, masks, start, tokens), first,
                                first if first < s else None, None, False, resampled, text)
    return sp, verification, pending


def first_changed(masks: list[int], picks: list[Pick], resampled_same: bool, end: int) -> int:
    """The first block position whose token now differs from what the verifier read (its input there was the
    draft): the first mask not decoded with its draft, or `end` if there is none before it."""
    same: set[Any] = {i for i, how in picks if how != "resampled" or resampled_same}
    i = 0
    while i in same:
        i += 1
    return masks[i] if i < len(masks) else end


def verify_span(ctx: StepContext, block: int, step: int, start: int, block_ids: torch.Tensor,
                positions: torch.Tensor, mask_idx: torch.Tensor, masks: list[int], probs: torch.Tensor,
                drafts: torch.Tensor, p: torch.Tensor, span_len: int,
                window_end: int) -> tuple[Verification, list[tuple[int, int, str]]]:
    """Verifier forward + acceptance test over the span, read back: the record and the (index, token, how) it
    decodes (accepted, resampled, ratio extras). For loops that keep their picks on the host (the editing loop,
    which passes its block with this step's edits applied); the block loop uses `verify_step`."""
    cfg = ctx.cfg
    q_probs, kind = verify_probs(ctx, block, step, start, block_ids, positions, mask_idx, drafts, span_len,
                                 window_end)
    out = accept_span(cfg.acceptance, drafts[:span_len], p[:span_len], probs[:span_len], q_probs, cfg.ratio_gamma,
                      cfg.allow_resample, ctx.generator)
    tokens = drafts[:span_len].tolist()
    chosen = [(i, tokens[i], "accepted") for i in range(out.accepted_len)]
    if out.resampled is not None:
        chosen.append((out.accepted_len, out.resampled, "resampled"))
    if cfg.ratio_threshold is not None and out.first_reject is not None:
        ratio = out.ratio.tolist()
        chosen += [(i, tokens[i], "ratio_extra") for i in range(out.first_reject + 1, span_len)
                   if ratio[i] >= cfg.ratio_threshold]
    return verification_record(ctx, kind, out, masks, start, tokens, p, q_probs, span_len), chosen
