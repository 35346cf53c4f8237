"""Acceptance test, first rejection and residual resampling (docs/algorithm.md,
'Acceptance, first rejection and the residual', 'Acceptance modes and AR-exactness'), on the device.

Modes: `paper` (u < min(1, (q/p)^gamma), residual (q - p)+), `sampled` (the same test on a sampled draft:
exact speculative sampling), `greedy_exact` (draft == argmax q, argmax q at the first disagreement).

`acceptance` tests every span position at once, reading nothing back (the accepted prefix ends at the first
failure: a cumulative product on the device when the device needs it, else the host finds it in the read-back
test results). The residual draw is separate because it consumes the generator only when a position was rejected:
the host decides whether to draw (it has read the outcome by then), the draw and its fallback to q stay on the
device (`residual_token`). `accept_span` is the whole test read back in one `Outcome` (tests, the editing loop).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import torch

from .draws import Source, categorical, uniform


@dataclass
class Acceptance:
    q_draft: torch.Tensor  # [n] verifier probability of each draft
    ratio: torch.Tensor  # [n]
    draws: Optional[torch.Tensor]  # [n] uniform draws; None in greedy_exact
    accepted: torch.Tensor  # [n] bool, the per-position test result
    argmax_q: Optional[torch.Tensor]  # [n] (greedy_exact, or when asked for the record)
    argmax_q_prob: Optional[torch.Tensor]  # [n]


def acceptance(mode: str, drafts: torch.Tensor, p_draft: torch.Tensor, q_probs: torch.Tensor, gamma: float,
               generator: Source, with_argmax: bool = False) -> Acceptance:
    """Test every span position at once; the accepted prefix ends at the first failure. One uniform draw per
    position (one call) unless greedy_exact."""
    draws = None if mode == "greedy_exact" else uniform(generator, int(drafts.shape[-1]), drafts.device)
    return span_test(mode, drafts, p_draft, q_probs, gamma, draws, with_argmax)


def acceptance_rows(mode: str, drafts: torch.Tensor, p_draft: torch.Tensor, q_probs: torch.Tensor, gamma: float,
                    generators: Sequence[Source], with_argmax: bool = False) -> Acceptance:
    """The test over R spans of one length at once (drafts and p_draft [R, s], q_probs [R, s, V]; every field
    [R, s]): the batch-first engine tests all its verify rows of one config and span length together. Row i's
    uniforms come from `generators[i]`, one call of s draws, as alone."""
    draws = None
    if mode != "greedy_exact":
        s = int(drafts.shape[-1])
        draws = torch.stack([uniform(g, s, drafts.device) for g in generators])  # each row's own source
    return span_test(mode, drafts, p_draft, q_probs, gamma, draws, with_argmax)


def span_test(mode: str, drafts: torch.Tensor, p_draft: torch.Tensor, q_probs: torch.Tensor, gamma: float,
              draws: Optional[torch.Tensor], with_argmax: bool) -> Acceptance:
    """The test itself, on one span ([s], [s, V]) or many ([R, s], [R, s, V]) with their uniforms drawn: every
    operation is elementwise or over a row's own vocabulary, so a row's values do not depend on the rows beside
    it (batch 1 and the batch-first engine run this one rule)."""
    q_draft = q_probs.gather(-1, drafts[..., None]).squeeze(-1)
    ratio = q_draft / p_draft.clamp_min(1e-12)
    ratio = torch.clamp(ratio if gamma == 1.0 else ratio**gamma, max=1.0)  # x ** 1 is x exactly: skip the op
    argmax_prob = argmax_q = None
    if with_argmax or mode == "greedy_exact":
        argmax_prob, argmax_q = q_probs.max(dim=-1)
    accepted = drafts == argmax_q if mode == "greedy_exact" else draws < ratio
    return Acceptance(q_draft, ratio, draws, accepted, argmax_q, argmax_prob)


def acceptance_each(acc: Acceptance) -> list[Acceptance]:
    """Every row of `acceptance_rows`' test, each field a view [s] (one unbind per field, not an index per row and
    field)."""
    n = int(acc.ratio.shape[0])
    fields = [[None] * n if t is None else t.unbind(0) for t in (acc.q_draft, acc.ratio, acc.draws, acc.accepted,
                                                                 acc.argmax_q, acc.argmax_q_prob)]
    return [Acceptance(*row) for row in zip(*fields)]


def first_rejected(accepted: Sequence[bool]) -> int:
    """The first position whose test failed in the read-back results (their number when every one passed): the
    accepted prefix's length. One search in C, not a Python step per accepted position."""
    try:
        return accepted.index(False)  # (a list read back: bools, or 0/1, and 0 == False)
    except ValueError:
        return len(accepted)


def residual_token(p: torch.Tensor, q: torch.Tensor,
                   generator: Source) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Draw from normalize((q - p)+) using the full draft distribution p; from q if the mass is 0 or not finite.

    Returns device tensors (token, mass, fell back to q). One multinomial call either way, over the same width, so
    the generator advances exactly as a host-side branch would.
    """
    residual = (q - p).clamp_min(0.0)
    mass = residual.sum()
    usable = (mass > 0.0) & torch.isfinite(mass)
    token = categorical(generator, torch.where(usable, residual / mass, q), "residual")
    return token, mass, ~usable


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


def accept_span(mode: str, drafts: torch.Tensor, p_draft: torch.Tensor, p_probs: torch.Tensor,
                q_probs: torch.Tensor, gamma: float, allow_resample: bool, generator: Source) -> Outcome:
    """`acceptance` + the residual draw, read back (host ints and floats in the Outcome)."""
    acc = acceptance(mode, drafts, p_draft, q_probs, gamma, generator, with_argmax=True)
    n, first = int(drafts.shape[0]), int(torch.cumprod(acc.accepted.to(torch.long), dim=0).sum())
    assert acc.argmax_q is not None and acc.argmax_q_prob is not None
    rest = (acc.q_draft, acc.ratio, acc.draws, acc.accepted, acc.argmax_q, acc.argmax_q_prob)
    if first == n:
        return Outcome(n, None, None, None, False, *rest)
    resampled, mass, to_q = None, None, False
    if allow_resample:
        if mode == "greedy_exact":
            resampled = int(acc.argmax_q[first])
        else:
            token, mass_t, to_q_t = residual_token(p_probs[first], q_probs[first], generator)
            resampled, mass, to_q = int(token), float(mass_t), bool(to_q_t)
    return Outcome(first, first, resampled, mass, to_q, *rest)
