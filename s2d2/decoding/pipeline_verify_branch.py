"""S2D2's verify branch on the D2F pipeline (pipeline_step.py): the verifier forward over the span, the acceptance
test, the residual draw, the writes and the record.

The span is the first run of masks after the cache (it may cross into later blocks). The verifier is the model in
AR mode on the cache this step's forward left: for position-aligned models the 2L layout (docs/algorithm.md,
'The 2L verifier') over [cache end, span end) — drafts, then MASK copies at the same positions, row L+i seeing the
cache, the drafts before i and itself; for right-shifted models one causal pass over the same stretch, q at j read from
row j - 1 (the stored last cached logit when the span starts right at the cache end). No KV is stored.

The acceptance test is that of docs/algorithm.md, 'Acceptance, first rejection and the residual' (`verify.acceptance`),
then D2F's two gates: `draft_confidence_threshold` also requires the draft's p above it (the reference's
`ssd_threshold_draft_confidence`), and at a rejection `verify_confidence_threshold` draws the residual only when
q(rejected draft) reaches it; otherwise, as with `allow_resample=False`, the rejected position stays masked and the D2F
rule decides it (a rejected draft is never committed, docs/algorithm.md, 'Where we deviate from the reference code').
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import torch

from ..config import DecodeConfig
from ..models.base import ForwardRequest
from ..models.masks import verify_2l_query
from ..trace import Commit, Verification
from .context import StepContext
from .pipeline_state import PipeBlock, PipeState
from .detail_rows import fill_residual, verify_detail, verify_rows
from .sampling import token_distribution
from .acceptance import Acceptance, acceptance, first_rejected, residual_token


@dataclass
class Verified:
    record: Verification
    commits: list[Commit] = field(default_factory=list)  # the accepted prefix, then the resampled position


def verify_span(ctx: StepContext, st: PipeState, first: PipeBlock, hi: int, masks: list[int], span_len: int,
                probs: torch.Tensor, drafts: torch.Tensor, p: torch.Tensor, tokens: list[int]) -> Verified:
    """Batch 1's verify branch: the verifier forward, the test, one read, the outcome (the batch-first engine,
    lockstep_pipeline.py, runs the same parts with the forward and the read shared)."""
    kind, request, how, at = verifier_request(ctx, st, hi, masks[0], span_len, drafts)
    logits = ctx.rec.forward(kind, first.index, st.step - first.added_step, *request)
    q_probs = verifier_q(ctx, st, logits, at)
    acc, wanted = verify_reads(ctx, drafts, p, q_probs, span_len)
    return verify_outcome(ctx, st, how, masks, span_len, probs, drafts, q_probs, acc, tokens, ctx.reads.fetch(wanted))


def verify_reads(ctx: StepContext, drafts: torch.Tensor, p: torch.Tensor, q_probs: torch.Tensor,
                 s: int) -> tuple[Acceptance, dict[str, Optional[torch.Tensor]]]:
    """The acceptance test over the span (the decode's own random draws), with D2F's draft-confidence gate, and what
    the outcome reads."""
    cfg = ctx.cfg
    acc = gated(cfg, acceptance(cfg.acceptance, drafts[:s], p[:s], q_probs, cfg.ratio_gamma, ctx.generator,
                                with_argmax=ctx.rec.detailed), p[:s])
    return acc, tested_reads(ctx, acc, p, q_probs)


def gated(cfg: DecodeConfig, acc: Acceptance, p_span: torch.Tensor) -> Acceptance:
    """D2F's draft-confidence gate on the test (`p_span`: the span's draft probabilities, [s] or [R, s] as `acc`'s
    fields): a draft at or below the threshold is never accepted. Returns `acc`, gated in place."""
    if cfg.draft_confidence_threshold is not None:
        acc.accepted = acc.accepted & (p_span > cfg.draft_confidence_threshold)
    return acc


def tested_reads(ctx: StepContext, acc: Acceptance, p: torch.Tensor,
                 q_probs: torch.Tensor) -> dict[str, Optional[torch.Tensor]]:
    """What the outcome reads of a (gated) test: the per-position results, the verifier's picks in greedy_exact,
    q of each draft when the verify-confidence gate asks, and the record's rows."""
    cfg = ctx.cfg
    greedy = cfg.acceptance == "greedy_exact"
    return {"accepted": acc.accepted, "argmax_q": acc.argmax_q if greedy else None,
            "q_draft": acc.q_draft if cfg.verify_confidence_threshold is not None else None,
            **verify_detail(ctx, acc, p, q_probs)}


def verify_outcome(ctx: StepContext, st: PipeState, kind: str, masks: list[int], s: int, probs: torch.Tensor,
                   drafts: torch.Tensor, q_probs: torch.Tensor, acc: Acceptance, tokens: list[int],
                   got: dict[str, Any]) -> Verified:
    """After the read: the accepted prefix written, the residual drawn where due, the commits and the record."""
    cfg = ctx.cfg
    greedy = cfg.acceptance == "greedy_exact"
    accepted = got["accepted"]
    k = first_rejected(accepted)  # (the test covers the span: all s pass, or the first failure)
    start = masks[0]
    if k:
        ctx.x[start : start + k] = drafts[:k]  # the span is consecutive: a slice, no index upload
    commits = ctx.rec.with_texts([Commit(start + i, tokens[i], "", "accepted") for i in range(k)])
    record = Verification(kind, cfg.acceptance, verify_rows(ctx, got, masks[:s], 0, tokens), k,
                          k if k < s else None, None, False, None)
    if k < s and _resample(cfg, got, k):
        commits.append(_residual(ctx, st, record, start + k, k, probs, q_probs, acc, got, greedy))
    return Verified(record, commits)


def _resample(cfg: DecodeConfig, got: dict[str, Any], k: int) -> bool:
    if not cfg.allow_resample:
        return False
    threshold = cfg.verify_confidence_threshold
    return threshold is None or got["q_draft"][k] >= threshold


def _residual(ctx: StepContext, st: PipeState, record: Verification, position: int, k: int, probs: torch.Tensor,
              q_probs: torch.Tensor, acc: Acceptance, got: dict[str, Any], greedy: bool) -> Commit:
    """Draw the rejected position's token ((q - p)+, or argmax q in greedy_exact), write it on the device and
    return its commit (completed by the next read unless greedy)."""
    text = ctx.rec.text if ctx.rec.detailed else (lambda t: "")
    if greedy:
        token = int(got["argmax_q"][k])
        ctx.x[position] = acc.argmax_q[k]  # type: ignore[index]
        record.resampled, record.resampled_text = token, text(token)
        return Commit(position, token, text(token), "resampled")
    token_t, mass, to_q = residual_token(probs[k], q_probs[k], ctx.generator)
    ctx.x[position : position + 1] = token_t[None]
    commit = Commit(position, -1, "", "resampled")
    pending = torch.stack([token_t.to(mass.dtype), mass, to_q.to(mass.dtype)])
    ctx.reads.later(pending, lambda v: _settle(ctx, st, record, commit, v))
    return commit


def _settle(ctx: StepContext, st: PipeState, record: Verification, commit: Commit, values: list[float]) -> None:
    if fill_residual(ctx, record, commit, values) in ctx.stop_set:
        st.eos = True


def verifier_request(ctx: StepContext, st: PipeState, hi: int, span_start: int, s: int,
                     drafts: torch.Tensor) -> tuple[str, ForwardRequest, str, int]:
    """The verifier forward on [hi, span end) with the span filled by its drafts: (forward kind, request,
    verification kind, where the span starts in it)."""
    end = span_start + s
    L, at = end - hi, span_start - hi
    filled = ctx.x[hi:end].clone()
    filled[at:] = drafts[:s]
    if ctx.aligned:  # 2L: [x~ | MASK x L] at duplicated positions; row L + i is one AR query at i
        ids = torch.cat([filled, torch.full_like(filled, ctx.mask_id)])
        rows = torch.arange(L + at, 2 * L, device=ids.device)  # 2L may exceed the run
        pos = ctx.index[hi:end]  # (both copies by one cat: a CPU `repeat` costs several times more)
        return "verify_2l", ForwardRequest(ctx.cache, ids, torch.cat([pos, pos]),
                                           verify_2l_query(L, ids.device), 0, None, rows), "2l", at
    # causal pass: the logit at j - 1 predicts j; the one before hi is the last cached logit
    rows = ctx.index[max(at - 1, 0) : L - 1]
    return "verify_causal", ForwardRequest(ctx.cache, filled, ctx.index[hi:end], "causal", 0, None, rows), "causal", at


def verifier_q(ctx: StepContext, st: PipeState, logits: torch.Tensor, at: int) -> torch.Tensor:
    """q over the span from the verifier's logits."""
    return token_distribution(verifier_logits(ctx, st, logits, at), ctx.cfg, ctx.mask_id, owned=True)


def verifier_logits(ctx: StepContext, st: PipeState, logits: torch.Tensor, at: int) -> torch.Tensor:
    """The verifier's logits over the span (a right-shifted span at the cache end takes its first from the last
    cached logit): a fresh tensor either way, which `token_distribution` may overwrite."""
    if not ctx.aligned and at == 0:
        return torch.cat([st.last_logit[None], logits])  # type: ignore[index]
    return logits
