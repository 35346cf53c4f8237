"""Baseline unmasking rules (§2.6), over the still-masked positions of the current window only.

`select` returns indices into the candidate list, in selection order, and how each was chosen
("threshold" for dynamic-threshold picks, "fallback" otherwise). k is clamped to the candidate count, so a
rule can never overwrite a decoded or prompt token (reference defect, §9).
"""
from __future__ import annotations

import torch


def select(
    rule: str,
    p: torch.Tensor,
    ent: torch.Tensor,
    k: int,
    tau: float,
    gamma: float,
    topup: bool = False,
) -> tuple[torch.Tensor, list[str]]:
    """p: draft probabilities of the candidates (left to right); ent: their full-distribution entropies."""
    n = int(p.shape[0])
    k = min(k, n)
    if n == 0 or k <= 0:
        return torch.zeros(0, dtype=torch.long, device=p.device), []
    if rule == "sequential":
        return torch.arange(k, device=p.device), ["fallback"] * k
    by_conf = torch.argsort(p, descending=True, stable=True)
    if rule == "low_confidence_static":
        return by_conf[:k], ["fallback"] * k
    if rule == "low_confidence_dynamic":
        above = int((p > tau).sum())
        if above >= k:
            return by_conf[:above], ["threshold"] * above
        return by_conf[:k], ["fallback"] * k
    if rule == "entropy_bounded":
        return _entropy_bounded(ent, k, gamma, topup)
    raise ValueError(f"remasking: unknown rule {rule!r}")


def _entropy_bounded(ent: torch.Tensor, k: int, gamma: float, topup: bool) -> tuple[torch.Tensor, list[str]]:
    """Lowest-entropy positions while the running entropy sum stays below gamma (at least one).

    Uses each position's own full-distribution entropy; the reference takes the entropy of the scalar
    confidence vector, which gives every position the same value (§9).
    """
    order = torch.argsort(ent, stable=True)
    prefix = torch.cumsum(ent[order], dim=0)
    n = max(1, int((prefix < gamma).sum()))
    if topup:
        n = min(n, k)
    return order[:n], ["fallback"] * n
