"""The verify branch of a step (step 6 of docs/algorithm.md, 'One step', 'The 2L verifier', 'The causal verifier' and
'Acceptance, first rejection and the residual'): the verifier forward, the acceptance test on the device, what the step
decodes, and one read of it.

The host must learn the outcome before it goes on: whether the block still has masks decides whether the next
forward is a draft or the commit, and whether a position was rejected decides whether the residual draw consumes
the generator. So this read is the step's second (the first routed it); the residual token itself is drawn and
written on the device and read with the next transfer.
"""
from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from typing import Any, Optional

import torch

from ..models.base import ForwardRequest
from ..models.masks import verify_2l_query, verify_2l_span_query
from ..trace import Verification
from .kv import remember_verified, settle_verified_rows
from .detail_rows import verification_record, verify_detail, verify_rows
from .sampling import token_distribution
from .selection import Pick, StepPicks, verify_inputs, verify_picks, write_picks
from .acceptance import Acceptance, accept_span, acceptance, residual_token
from .context import Draft, StepContext



def verifier_extent(ctx: StepContext, masks: list[int], span_len: int, window_end: int) -> tuple[int, int]:
    """(end, queries) of this step's verifier: it reads block positions [ctx.cached, end) (`window_end` and `end`
    block-relative) and queries `queries` tokens.

    2L: the first half is [cached, B) and the second half the same positions, 2(B − cached) queries; with
    `trim_verify` the first half stops at the span's end e and the second half holds the span only, (e − cached) +
    span queries: row L+i reads only the first half before i and itself, so the rows after the span and the second
    half before it change nothing that is read. Causal (right-shifted): [cached, window end), or with `trim_verify`
    up to the span's last position (its logit comes from the row before it)."""
    k, last = ctx.cached, masks[span_len - 1]
    if ctx.aligned:
        if ctx.cfg.trim_verify:
            return last + 1, last + 1 - k + span_len
        return ctx.B, 2 * (ctx.B - k)
    end = last if ctx.cfg.trim_verify else window_end
    return end, end - k


def verify_probs(ctx: StepContext, block: int, step: int, start: int, block_ids: torch.Tensor,
                 positions: torch.Tensor, mask_idx: torch.Tensor, drafts: torch.Tensor, span_len: int,
                 window_end: int, masks: Optional[list[int]] = None) -> tuple[torch.Tensor, str]:
    """Run the verifier on the draft-filled block and return q over the span positions, and the verification's
    kind (`verifier_request`'s forward, then `verifier_probs`)."""
    request, kind, end = verifier_request(ctx, block_ids, positions, mask_idx, drafts, span_len, window_end - start,
                                          masks)
    logits = ctx.rec.forward("verify_" + kind, block, step, *request)
    return verifier_probs(ctx, logits, end), kind


def verifier_request(ctx: StepContext, block_ids: torch.Tensor, positions: torch.Tensor, mask_idx: torch.Tensor,
                     drafts: torch.Tensor, span_len: int, window_end: int,
                     masks: Optional[list[int]] = None) -> tuple[ForwardRequest, str, int]:
    """The verifier's forward over the draft-filled block, its kind ("2l" on position-aligned models, "causal" on
    right-shifted ones) and the block-relative end it reads (`window_end` block-relative too).

    The queried rows start at ctx.cached (0 unless kv_reuse keeps part of the block in the cache). With kv_reuse
    the verifier's causal rows stay in the cache until `settle_verified_rows` trims them to the accepted prefix.
    `masks` (the step's block-relative mask positions) is needed with `trim_verify` (beyond the paper: the
    verifier over the rows its span reads only, `verifier_extent`). Also the batch-first editing loop's
    (lockstep_editing.py)."""
    kind = "2l" if ctx.aligned else "causal"
    if ctx.cfg.trim_verify:
        assert masks is not None
        end, _ = verifier_extent(ctx, masks, span_len, window_end)
        return trimmed_verify_request(ctx, block_ids, positions, drafts, span_len, end, masks[0]), kind, end
    if ctx.aligned:
        return (ForwardRequest(ctx.cache, *verify_2l_inputs(ctx, block_ids, positions, mask_idx, drafts, span_len)),
                kind, int(block_ids.shape[0]))
    # causal pass from the first uncached position to the window end; the logit at j-1 predicts j
    return causal_verify_request(ctx, block_ids, positions, mask_idx, drafts, span_len, window_end), kind, window_end


def causal_verify_request(ctx: StepContext, block_ids: torch.Tensor, positions: torch.Tensor, mask_idx: torch.Tensor,
                          drafts: torch.Tensor, span_len: int, end: int) -> ForwardRequest:
    """The causal verifier's forward (right-shifted models) over block positions [ctx.cached, end) with the drafts
    in their masks, reading the span's rows one to the left; kv_reuse keeps its rows in the cache until
    `settle_verified_rows`. Also the batch-first engine's for a row with cached positions (lockstep_verify.py)."""
    k = ctx.cached
    at = mask_idx - k  # the masks' rows among the queried positions
    filled = causal_verify_rows(block_ids[k:end], [at], [drafts])
    return ForwardRequest(ctx.cache, filled, positions[k:end], "causal", end - k if ctx.cfg.kv_reuse else 0, None,
                          at[:span_len] - 1)


def verify_2l_inputs(ctx: StepContext, block_ids: torch.Tensor, positions: torch.Tensor, mask_idx: torch.Tensor,
                     drafts: torch.Tensor, span_len: int) -> tuple[Any, ...]:
    """The 2L verifier's forward arguments after the cache (ids, positions, attention, keep, last, rows): [x̃ | MASK
    x n] at duplicated positions over the uncached rows [k, B), row n+i one AR query at i; the span's rows kept.
    (The batch-first engine puts the same arguments in its shared forward: lockstep_block.py.)"""
    k, B = ctx.cached, int(block_ids.shape[0])
    n, at = B - k, mask_idx - k
    ids, pos = verify_2l_rows(ctx.mask_id, block_ids[k:], positions[k:], [at], [drafts])
    return ids, pos, verify_2l_query(n, ids.device), n if ctx.cfg.kv_reuse else 0, n, at[:span_len]


def verify_2l_rows(mask_id: int, blocks: torch.Tensor, positions: torch.Tensor, at: list[torch.Tensor],
                   drafts: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """The 2L verifier's ids and positions ([2n], or [R, 2n] for R rows at once) over n uncached positions (blocks
    and positions [n] or [R, n]; row i's drafts fill its masks `at[i]`): [x̃ | MASK x n] at duplicated positions.
    Integers only, so each row is exactly its lone call's; the batch-first engine builds all its verify rows so."""
    ids = torch.cat([blocks, torch.full_like(blocks, mask_id)], dim=-1)
    _fill(ids, at, drafts)
    return ids, torch.cat([positions, positions], dim=-1)


def causal_verify_rows(blocks: torch.Tensor, at: list[torch.Tensor], drafts: list[torch.Tensor]) -> torch.Tensor:
    """The causal verifier's ids ([n], or [R, n] for R rows at once) over n uncached positions: a copy of the
    block's (the sequence is not written) with row i's drafts in its masks `at[i]`. Integers only, so each row is
    exactly its lone call's; the batch-first engine builds its right-shifted verify rows so (lockstep_shifted.py)."""
    filled = blocks.clone()
    _fill(filled, at, drafts)
    return filled


def _fill(ids: torch.Tensor, at: list[torch.Tensor], drafts: list[torch.Tensor]) -> None:
    """Row i of `ids` ([n], one row; or [R, n]) gets `drafts[i]` at its positions `at[i]`: one write for all rows."""
    if ids.dim() == 1:
        ids[at[0]] = drafts[0]
    else:
        sizes = torch.tensor([int(a.shape[0]) for a in at], device=ids.device)
        ids[torch.repeat_interleave(torch.arange(len(at), device=ids.device), sizes), torch.cat(at)] = torch.cat(drafts)


def verifier_probs(ctx: StepContext, logits: torch.Tensor, end: int) -> torch.Tensor:
    """q over the span from the verifier's logits; the verifier read the block's [0, end) (kv.remember_verified)."""
    remember_verified(ctx, end)
    return token_distribution(logits, ctx.cfg, ctx.mask_id, owned=True)


def trimmed_verify_request(ctx: StepContext, block_ids: torch.Tensor, positions: torch.Tensor, drafts: torch.Tensor,
                           span_len: int, end: int, m0: int) -> ForwardRequest:
    """The trimmed verifier's forward (`trim_verify`) over block positions [ctx.cached, end) (`verifier_extent`),
    its span starting at `m0`: the span is the first run of masks and nothing before it is masked, so its drafts
    fill one slice. It returns the span's s logits (`last`). Also the batch-first engine's (lockstep_verify.py)."""
    k, s = ctx.cached, span_len
    keep = end - k if ctx.cfg.kv_reuse else 0
    if ctx.aligned:  # [x~[k:e] | MASK x s]; second-half row t is the AR query at span position m0 + t
        n = end - k
        ids = torch.full((n + s,), ctx.mask_id, dtype=block_ids.dtype, device=block_ids.device)
        ids[:n] = block_ids[k:end]
        ids[n - s : n] = drafts[:s]
        pos = torch.cat([positions[k:end], positions[m0:end]])
        return ForwardRequest(ctx.cache, ids, pos, verify_2l_span_query(n, s, ids.device), keep, s)
    # [k, last span position): the span's drafts but the last are inputs; row j-1 predicts j
    filled = block_ids[k:end].clone()
    filled[m0 - k :] = drafts[: s - 1]
    return ForwardRequest(ctx.cache, filled, positions[k:end], "causal", keep, s)


def verify_step(ctx: StepContext, block: int, step: int, start: int, draft: Draft, masks: list[int],
                span_len: int, min_k: int, window_end: int,
                tokens: list[int]) -> tuple[StepPicks, Verification, Optional[torch.Tensor]]:
    """Verifier forward + acceptance test over the span, extras and the top-up, written on the device.

    Returns the picks, the verification record and, when a residual token was drawn, the device values
    [token, mass, fell back to q] that complete both (the caller reads them later).
    """
    q_probs, kind = verify_probs(ctx, block, step, start, ctx.x[start : start + ctx.B], draft.positions,
                                 draft.mask_idx, draft.tokens, span_len, window_end, masks)
    return verify_outcome(ctx, start, draft, masks, span_len, min_k, tokens, q_probs, kind)


@dataclass
class Tested:
    """A verify step between its acceptance test and its read: the test, the step's device work, what to read."""

    acc: Acceptance
    inputs: dict[str, torch.Tensor]
    q_probs: torch.Tensor
    kind: str
    wanted: dict[str, Optional[torch.Tensor]]


def verify_outcome(ctx: StepContext, start: int, draft: Draft, masks: list[int], span_len: int, min_k: int,
                   tokens: list[int], q_probs: torch.Tensor,
                   kind: str) -> tuple[StepPicks, Verification, Optional[torch.Tensor]]:
    """After the verifier: the acceptance test over the span, one read, the picks written on the device, the
    record and the pending residual values (`verify_step`'s second half; the batch-first engine runs its two parts
    with one read for many sequences between them)."""
    tested = acceptance_test(ctx, draft, span_len, min_k, q_probs, kind)
    return tested_picks(ctx, start, draft, masks, span_len, min_k, tokens, tested, ctx.reads.fetch(tested.wanted))


def acceptance_test(ctx: StepContext, draft: Draft, span_len: int, min_k: int, q_probs: torch.Tensor,
                    kind: str, acc: Optional[Acceptance] = None) -> Tested:
    """The acceptance test over the span and the extras' and top-up's device work (the test's uniforms drawn from
    the sequence's generator), with the tensors the host reads next. `acc`: the row's test when the caller ran it
    with other rows' (the batch-first engine: acceptance.py `acceptance_rows`, the same rule)."""
    cfg, s = ctx.cfg, span_len
    if acc is None:
        acc = acceptance(cfg.acceptance, draft.tokens[:s], draft.p[:s], q_probs, cfg.ratio_gamma, ctx.generator,
                         with_argmax=ctx.rec.detailed)
    inputs = verify_inputs(cfg, acc, draft.p, draft.entropy, min_k)
    greedy = cfg.acceptance == "greedy_exact"
    wanted = {**inputs, "argmax_q": acc.argmax_q if greedy else None, **verify_detail(ctx, acc, draft.p, q_probs)}
    return Tested(acc, inputs, q_probs, kind, wanted)


def tested_picks(ctx: StepContext, start: int, draft: Draft, masks: list[int], span_len: int, min_k: int,
                 tokens: list[int], tested: Tested, got: dict[str, Any],
                 defer: bool = False) -> tuple[StepPicks, Verification, Optional[torch.Tensor]]:
    """From the read test: the picks (the residual drawn on the device when a position was rejected) written on
    the device, the verification record, and the pending residual values. `defer`: when no residual is pending
    (every decoded token is then a host value, as the step's commits record it) the picks are left for the caller
    to write from the commits with other rows' (the batch-first engine: token_writes.py)."""
    cfg, s, acc, q_probs = ctx.cfg, span_len, tested.acc, tested.q_probs
    greedy = cfg.acceptance == "greedy_exact"
    sp, first = verify_picks(cfg, got, len(masks), min_k, tested.inputs)
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
    if not (defer and pending is None):
        write_picks(ctx.x, start, draft.mask_idx, sp, new_tokens, draft.run)
    if ctx.seen_end is not None:
        same = pending is not None and bool(token == draft.tokens[first])  # kv_reuse only: a rare extra read
        settle_verified_rows(ctx, first_changed(masks, sp.picks, same, first_left(ctx.masks, masks, ctx.seen_end)))
    text = ctx.rec.text(resampled) if resampled is not None and ctx.rec.detailed else ""
    verification = Verification(tested.kind, cfg.acceptance, verify_rows(ctx, got, masks, start, tokens), first,
                                first if first < s else None, None, False, resampled, text)
    return sp, verification, pending


def first_left(block_masks: list[int], masks: list[int], end: int) -> int:
    """The block's first mask after the window's masks `masks` (both block-relative, ascending), or `end`: a
    position the verifier read as MASK that a later window decodes, so its row is not final. Only the 2L verifier
    of a sub-block window reads past the window (it reads the whole block)."""
    i = bisect_right(block_masks, masks[-1])
    return block_masks[i] if i < len(block_masks) and block_masks[i] < end else end


def first_changed(masks: list[int], picks: list[Pick], resampled_same: bool, end: int) -> int:
    """The first block position whose token now differs from what the verifier read (its input there was the
    draft): the first mask not decoded with its draft, or `end` if there is none before it (`end`: where the
    verifier's read ends, or the first mask a later window decodes, `first_left`)."""
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
    q_probs, kind = verify_probs(ctx, block, step, start, block_ids, positions, mask_idx, drafts, span_len,
                                 window_end, masks)
    return span_outcome(ctx, kind, start, masks, probs, drafts, p, q_probs, span_len)


def span_outcome(ctx: StepContext, kind: str, start: int, masks: list[int], probs: torch.Tensor,
                 drafts: torch.Tensor, p: torch.Tensor, q_probs: torch.Tensor,
                 span_len: int) -> tuple[Verification, list[tuple[int, int, str]]]:
    """`verify_span` after its verifier (`q_probs` over the span): the acceptance test and the residual draw (from
    the sequence's generator), read back as the record and the (index, token, how) picks. Also the batch-first
    editing loop's (lockstep_editing.py)."""
    cfg = ctx.cfg
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
