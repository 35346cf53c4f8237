"""The detailed trace rows of a step (per-mask drafts, per-position verification), built from host values.

Each `*_detail` function names the device tensors a row needs; the step adds them to the fetch it makes anyway,
so a detailed trace costs compute and bytes but no extra device-to-host transfer. The `*_rows` functions build
the rows from what was read. `draft_records` and `verification_record` do both for callers with their own loop
(one read each).
"""
from __future__ import annotations

from typing import Any, Optional

import torch

from ..estimators import normalized_entropy, top2_margin
from ..trace import Commit, MaskDraft, Verification, VerifyPosition
from .forwards import top_k
from .acceptance import Acceptance, Outcome
from .context import StepContext



def draft_detail(ctx: StepContext, probs: torch.Tensor, p: torch.Tensor) -> dict[str, torch.Tensor]:
    """Per mask: p, normalized entropy, top-1 minus top-2 margin, and the top-k of the draft distribution."""
    if not ctx.rec.detailed:
        return {}
    top = top_k(probs)
    return {"d_stats": torch.stack([p, normalized_entropy(probs), top2_margin(probs)]),
            "d_top_ids": top["top_ids"], "d_top_probs": top["top_probs"]}


def draft_rows(ctx: StepContext, got: dict[str, Any], tokens: list[int], masks: list[int],
               start: int) -> list[MaskDraft]:
    if not ctx.rec.detailed:
        return []
    n, rec = len(masks), ctx.rec
    stats = got["d_stats"]
    tops = rec.candidate_rows(got["d_top_ids"], got["d_top_probs"], n)
    return [MaskDraft(start + m, tokens[i], rec.text(tokens[i]), stats[i], stats[n + i], stats[2 * n + i], tops[i])
            for i, m in enumerate(masks)]


def draft_records(ctx: StepContext, probs: torch.Tensor, drafts: torch.Tensor, p: torch.Tensor,
                  masks: list[int], start: int) -> list[MaskDraft]:
    """`draft_rows` with its own read (for loops that do not batch it)."""
    if not ctx.rec.detailed:
        return []
    got = ctx.rec.reads.fetch({"drafts": drafts, **draft_detail(ctx, probs, p)})
    return draft_rows(ctx, got, got["drafts"], masks, start)


def verify_detail(ctx: StepContext, acc: Acceptance, p: torch.Tensor,
                  q_probs: torch.Tensor) -> dict[str, Optional[torch.Tensor]]:
    """Per span position: p, q(draft), r, argmax-q probability, the draw, the test, argmax q and the top-k of q.
    `p`: the draft probabilities of the step's masks, of which the span's are read (cut here, so a trace that is
    not detailed makes no view)."""
    if not ctx.rec.detailed:
        return {}
    assert acc.argmax_q is not None and acc.argmax_q_prob is not None
    top = top_k(q_probs)
    p_span = p[: acc.q_draft.shape[0]]
    return {"v_cols": torch.stack([p_span, acc.q_draft, acc.ratio, acc.argmax_q_prob]), "v_draws": acc.draws,
            "v_accepted": acc.accepted, "v_argmax": acc.argmax_q, "v_top_ids": top["top_ids"],
            "v_top_probs": top["top_probs"]}


def verify_rows(ctx: StepContext, got: dict[str, Any], masks: list[int], start: int,
                drafts: list[int]) -> list[VerifyPosition]:
    if not ctx.rec.detailed:
        return []
    rec, s = ctx.rec, len(got["v_accepted"])
    cols, amax = got["v_cols"], got["v_argmax"]
    draws = got.get("v_draws") or [None] * s
    tops = rec.candidate_rows(got["v_top_ids"], got["v_top_probs"], s)
    return [VerifyPosition(start + masks[i], drafts[i], rec.text(drafts[i]), cols[i], cols[s + i], cols[2 * s + i],
                           draws[i], bool(got["v_accepted"][i]), amax[i], rec.text(amax[i]), cols[3 * s + i], tops[i])
            for i in range(s)]


def verification_record(ctx: StepContext, kind: str, out: Outcome, masks: list[int], start: int,
                        drafts: list[int], p: torch.Tensor, q_probs: torch.Tensor, span_len: int) -> Verification:
    """The record of an `accept_span` outcome (for loops that do not batch it; one read when detailed)."""
    rows: list[VerifyPosition] = []
    if ctx.rec.detailed:
        acc = Acceptance(out.q_draft, out.ratio, out.draws, out.accepted, out.argmax_q, out.argmax_q_prob)
        rows = verify_rows(ctx, ctx.rec.reads.fetch(verify_detail(ctx, acc, p, q_probs)), masks, start,
                           drafts)
    text = ctx.rec.text(out.resampled) if (out.resampled is not None and ctx.rec.detailed) else ""
    return Verification(kind, ctx.cfg.acceptance, rows, out.accepted_len, out.first_reject, out.residual_mass,
                        out.fallback_to_q, out.resampled, text)


def fill_residual(ctx: StepContext, verification: Verification, commit: Commit, values: list[float]) -> int:
    """Complete a verification and its resampled commit from the device values [token, residual mass, fell back to
    q], read with the transfer after the step (the residual draw stays on the device until then); the token."""
    token = int(values[0])
    verification.resampled, verification.residual_mass, verification.fallback_to_q = token, values[1], bool(values[2])
    commit.token = token
    if ctx.rec.detailed:
        verification.resampled_text = commit.text = ctx.rec.text(token)
    return token
