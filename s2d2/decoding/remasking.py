"""Baseline unmasking rules (docs/algorithm.md, 'Remasking rules'), over the still-masked positions of the current
window only.

A rule is split where the device and the host meet. `rule_inputs` computes on the device what the rule needs
from the distributions (the candidates in the rule's order, how many are above τ, how many fit the entropy bound);
the step reads those with its one transfer, and `choose` finishes on the host: which of them, how many, and how
each was chosen ("threshold" for dynamic-threshold picks, "fallback" otherwise). k is clamped to the candidate
count, so a rule can never overwrite a decoded or prompt token (reference defect, docs/algorithm.md,
'Where we deviate from the reference code'). `select` is both in one.
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Union

import torch
from torch import Tensor

RULES = ("low_confidence_static", "low_confidence_dynamic", "sequential", "entropy_bounded")


def rule_inputs(rule: str, p: Tensor, ent: Union[Tensor, Callable[[], Tensor]], tau: float, gamma: float,
                candidates: Optional[Tensor] = None, above: Optional[Tensor] = None) -> dict[str, Tensor]:
    """The rule's device work over the masks (`candidates`: [n] bool, the still-undecided ones; None: all).

    p: draft probabilities of the masks (left to right); ent: their full-distribution entropies (or a function
    giving them: only `entropy_bounded` reads them). Returns "order" (the candidates in the rule's order, then the
    rest; absent for `sequential` over all masks: the masks' own order), "above" (dynamic: candidates with p > τ),
    "eb_below" (entropy_bounded: sorted candidates whose running entropy sum stays below γ). `above`: that count
    when the caller has it already.

    The static, dynamic and sequential rules over all masks (`candidates` None) also take a batch: p [R, N], each
    row one sequence's masks padded with -1 (below any probability, so a pad sorts after every mask, never counts
    above τ, and each row's order and count are its own; s2d2/decoding/lockstep_block.py).
    """
    if rule not in RULES:
        raise ValueError(f"remasking: unknown rule {rule!r}")
    out: dict[str, Tensor] = {}
    if rule == "sequential":
        if candidates is not None:
            ar = torch.arange(p.shape[0], device=p.device)
            out["order"] = torch.argsort(torch.where(candidates, ar, ar + p.shape[0]))
    elif rule == "entropy_bounded":
        # each position's own full-distribution entropy; the reference takes the entropy of the scalar confidence
        # vector, which gives every position the same value (docs/algorithm.md,
        # 'Where we deviate from the reference code')
        ent = ent() if callable(ent) else ent
        order = _candidates_first(torch.argsort(ent, stable=True), candidates)
        below = torch.cumsum(ent[order], dim=0) < gamma  # the candidates come first: their prefix sums are their own
        if candidates is not None:
            below &= torch.arange(p.shape[0], device=p.device) < candidates.sum()
        out["order"], out["eb_below"] = order, below.sum()
    else:
        out["order"] = _candidates_first(torch.argsort(p, descending=True, stable=True), candidates)
        if rule == "low_confidence_dynamic" and above is not None:
            out["above"] = above
        elif rule == "low_confidence_dynamic":
            hi = p > tau
            out["above"] = (hi if candidates is None else hi & candidates).sum(-1)
    return out


def choose(rule: str, k: int, candidates: list[int], got: dict[str, Any],
           topup: bool = False) -> tuple[list[int], str]:
    """The rule's picks (mask indices, in selection order) and how they were chosen, from `rule_inputs` read back.

    candidates: the undecided mask indices, ascending (the ones `rule_inputs` was given)."""
    k = min(k, len(candidates))
    if not candidates or k <= 0:
        return [], "fallback"
    order = got.get("order", candidates)
    if rule == "low_confidence_dynamic" and got["above"] >= k:
        return order[: got["above"]], "threshold"
    if rule == "entropy_bounded":
        n = max(1, got["eb_below"])
        return order[: min(n, k) if topup else n], "fallback"
    return order[:k], "fallback"


def _candidates_first(order: Tensor, candidates: Optional[Tensor]) -> Tensor:
    """`order` with the non-candidates moved to the end (a stable two-key sort: candidate first, then `order`)."""
    if candidates is None:
        return order
    return order[torch.argsort((~candidates[order]).to(torch.uint8), stable=True)]


def select(rule: str, p: Tensor, ent: Tensor, k: int, tau: float, gamma: float,
           topup: bool = False) -> tuple[Tensor, list[str]]:
    """The rule over all the given masks: (picked indices in selection order, how each was chosen)."""
    got = {name: (t.tolist() if t.dim() else int(t)) for name, t in rule_inputs(rule, p, ent, tau, gamma).items()}
    picks, how = choose(rule, k, list(range(int(p.shape[0]))), got, topup)
    return torch.tensor(picks, dtype=torch.long, device=p.device), [how] * len(picks)
