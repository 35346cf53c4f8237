"""Token-acceptance estimators and the expected number of accepted tokens (docs/algorithm.md, 'Acceptance estimators',
'Expected accepted tokens and the score').

Every function works on whole spans at once: `probs` is `[n, V]`, one draft distribution per span position (after
the same temperature / top-k / top-p transform that produced the drafts), `p_draft` is `[n]`, the probability of
each drafted token. No per-token Python loops.
"""
from __future__ import annotations

import math
from typing import Callable, Sequence

import torch
from torch import Tensor

from .config import DecodeConfig


def _as_float(x: Tensor) -> Tensor:
    # half precision loses the small entropies that the hard thresholds compare against
    return x.float() if x.dtype in (torch.float16, torch.bfloat16) or not x.is_floating_point() else x


def normalized_entropy(probs: Tensor) -> Tensor:
    """H(π)/ln V per row, with 0·log 0 = 0 and V = probs.shape[-1]; clamped to [0, 1]."""
    p = _as_float(probs)
    v = p.shape[-1]
    if v <= 1:  # a one-token vocabulary carries no uncertainty (and ln 1 = 0)
        return p.new_zeros(p.shape[:-1])
    h = torch.special.entr(p).sum(-1) / math.log(v)
    # rounding can push a uniform row a hair above 1, which would break negexp's [e^-β, 1] range
    return h.clamp(0.0, 1.0)


def top2_margin(probs: Tensor) -> Tensor:
    """Top-1 minus top-2 probability per row (top-1 alone when V = 1)."""
    p = _as_float(probs)
    if p.shape[-1] == 1:
        return p[..., 0].clone()
    top = p.topk(2, dim=-1).values
    return top[..., 0] - top[..., 1]


def _hard_margin(cfg: DecodeConfig, probs: Tensor, p_draft: Tensor) -> Tensor:
    return (top2_margin(probs) > cfg.margin_threshold).to(_as_float(probs).dtype)


def _hard_entropy(cfg: DecodeConfig, probs: Tensor, p_draft: Tensor, h: Tensor | None = None) -> Tensor:
    h = normalized_entropy(probs) if h is None else h
    return (h < cfg.entropy_threshold).to(_as_float(probs).dtype)


def _confidence_power(cfg: DecodeConfig, probs: Tensor, p_draft: Tensor) -> Tensor:
    return _as_float(p_draft).clamp(0.0, 1.0).pow(cfg.confidence_power)


def _clipped_linear_margin(cfg: DecodeConfig, probs: Tensor, p_draft: Tensor) -> Tensor:
    return (cfg.margin_scale * top2_margin(probs)).clamp(0.0, 1.0)


def _entropy_negexp(cfg: DecodeConfig, probs: Tensor, p_draft: Tensor, h: Tensor | None = None) -> Tensor:
    return torch.exp(-cfg.negexp_beta * (normalized_entropy(probs) if h is None else h))


def _renyi_2(cfg: DecodeConfig, probs: Tensor, p_draft: Tensor) -> Tensor:
    # Σ π² is the collision probability: the chance two independent draws agree
    p = _as_float(probs)
    return (p * p).sum(-1).clamp(0.0, 1.0)


_ESTIMATORS: dict[str, Callable[[DecodeConfig, Tensor, Tensor], Tensor]] = {
    "hard_margin_threshold": _hard_margin,
    "hard_entropy_threshold": _hard_entropy,
    "soft_confidence_power": _confidence_power,
    "soft_clipped_linear_margin": _clipped_linear_margin,
    "soft_entropy_negexp": _entropy_negexp,
    "soft_renyi_2_entropy": _renyi_2,
}


def acceptance_alphas(cfg: DecodeConfig, probs: Tensor, p_draft: Tensor, entropy: Tensor | None = None) -> Tensor:
    """α_i per span position for cfg.estimator, with that estimator's parameters from cfg (any leading dims: many
    spans of one length at once, each row's values those of its own call).

    `entropy`: `normalized_entropy(probs)` when the caller has it already (the entropy estimators then reuse it).
    """
    if cfg.estimator not in _ESTIMATORS:
        raise ValueError(f"estimator: unknown value {cfg.estimator!r}; allowed: {', '.join(_ESTIMATORS)}")
    if probs.dim() < 2 or p_draft.shape != probs.shape[:-1]:
        raise ValueError(f"acceptance_alphas: expected probs [..., n, V] and p_draft [..., n], got "
                         f"{tuple(probs.shape)} and {tuple(p_draft.shape)}")
    if entropy is not None and cfg.estimator in ("soft_entropy_negexp", "hard_entropy_threshold"):
        return (_entropy_negexp if cfg.estimator == "soft_entropy_negexp" else _hard_entropy)(cfg, probs, p_draft,
                                                                                            entropy)
    return _ESTIMATORS[cfg.estimator](cfg, probs, p_draft)


def expected_accepted_tokens(alphas: Tensor | Sequence[float]) -> float | Tensor:
    """K̂ = Σ_k Π_{i≤k} clip(α_i, 0, 1) over the last dim; 0 for an empty span.

    A tensor gives a tensor on the same device (shape `[...]` for `[..., n]`; 0-d for one span), so the decoder can
    batch it into its single host transfer. A list (as stored in PolicyInputs) gives a Python float.
    """
    if isinstance(alphas, Tensor):
        # float64 so K̂ does not depend on the alphas' dtype; MPS has no float64
        dtype = torch.float32 if alphas.device.type == "mps" else torch.float64
        return torch.cumprod(alphas.to(dtype).clamp(0.0, 1.0), dim=-1).sum(-1)  # an empty span sums to 0
    a = torch.tensor(list(alphas), dtype=torch.float64)
    return float(torch.cumprod(a.clamp(0.0, 1.0), dim=-1).sum())
