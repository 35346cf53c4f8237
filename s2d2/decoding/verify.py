"""Acceptance test, first rejection and residual resampling (§3.6, §5).

Modes: `paper` (u < min(1, (q/p)^gamma), residual (q - p)+), `sampled` (the same test on a sampled draft:
exact speculative sampling), `greedy_exact` (draft == argmax q, argmax q at the first disagreement).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class Outcome:
    accepted_len: int
    first_reject: int | None
    resampled: int | None
    residual_mass: float | None
    fallback_to_q: bool
    q_draft: torch.Tensor  # [n] verifier probability of each draft
    ratio: torch.Tensor  # [n]
    draws: torch.Tensor | None  # [n] uniform draws; None in greedy_exact
    accepted: torch.Tensor  # [n] bool, the per-position test result
    argmax_q: torch.Tensor  # [n]
    argmax_q_prob: torch.Tensor  # [n]


def accept_span(
    mode: str,
    drafts: torch.Tensor,
    p_draft: torch.Tensor,
    p_probs: torch.Tensor,
    q_probs: torch.Tensor,
    gamma: float,
    allow_resample: bool,
    generator: torch.Generator,
) -> Outcome:
    """Test every span position at once; the accepted prefix ends at the first failure."""
    q_draft = q_probs.gather(-1, drafts[:, None]).squeeze(-1)
    ratio = torch.clamp((q_draft / p_draft.clamp_min(1e-12)) ** gamma, max=1.0)
    argmax_prob, argmax_q = q_probs.max(dim=-1)
    if mode == "greedy_exact":
        draws = None
        accepted = drafts == argmax_q
    else:
        draws = torch.rand(drafts.shape[0], generator=generator, device=drafts.device)
        accepted = draws < ratio
    failed = (~accepted).nonzero()
    if failed.numel() == 0:
        return Outcome(int(drafts.shape[0]), None, None, None, False, q_draft, ratio, draws, accepted,
                       argmax_q, argmax_prob)
    first = int(failed[0, 0])
    resampled, mass, to_q = None, None, False
    if allow_resample:
        if mode == "greedy_exact":
            resampled = int(argmax_q[first])
        else:
            resampled, mass, to_q = _residual_draw(p_probs[first], q_probs[first], generator)
    return Outcome(first, first, resampled, mass, to_q, q_draft, ratio, draws, accepted, argmax_q, argmax_prob)


def _residual_draw(p: torch.Tensor, q: torch.Tensor, generator: torch.Generator) -> tuple[int, float, bool]:
    """Draw from normalize((q - p)+) using the full draft distribution p; from q if the mass is 0 or not finite."""
    residual = (q - p).clamp_min(0.0)
    mass = float(residual.sum())
    if mass > 0.0 and mass == mass and mass != float("inf"):
        return int(torch.multinomial(residual / mass, 1, generator=generator)), mass, False
    return int(torch.multinomial(q, 1, generator=generator)), mass, True
