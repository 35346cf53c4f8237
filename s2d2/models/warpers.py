"""The sampling transform (temperature, top-k, top-p) as transformers' own logits warpers.

transformers is imported only under s2d2/models/, so the decoder's sampling (s2d2/decoding/sampling.py) reaches the
warpers through here. The warpers ignore `input_ids`; they are built once per setting, cached, and applied in generate()'s order.
"""
from __future__ import annotations

from functools import lru_cache

import torch
from transformers.generation.logits_process import (LogitsProcessor, TemperatureLogitsWarper, TopKLogitsWarper,
                                                     TopPLogitsWarper)

__all__ = ["warp_logits"]

_NO_IDS = torch.empty(0, dtype=torch.long)


@lru_cache(maxsize=32)
def _warpers(temperature: float, top_k: int, top_p: float) -> tuple[LogitsProcessor, ...]:
    chain: list[LogitsProcessor] = []
    if temperature != 1.0:
        chain.append(TemperatureLogitsWarper(temperature))
    if top_k > 0:
        chain.append(TopKLogitsWarper(top_k))  # clamps k to the vocabulary; ties at the k-th value survive
    if top_p < 1.0:
        chain.append(TopPLogitsWarper(top_p))  # smallest set with mass >= top_p; the top token always survives
    return tuple(chain)


def warp_logits(logits: torch.Tensor, temperature: float, top_k: int, top_p: float) -> torch.Tensor:
    """[n, V] float logits -> the same logits with temperature applied and the tokens outside top-k / top-p at
    -inf (the order generate() applies them: temperature, top-k, top-p)."""
    for warper in _warpers(float(temperature), int(top_k), float(top_p)):  # not LogitsProcessorList: it inspects
        logits = warper(_NO_IDS, logits)  # every processor's signature on every call
    return logits
