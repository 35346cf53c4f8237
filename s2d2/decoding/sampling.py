"""logits -> distribution -> tokens, with one transform shared by draft, verifier and residual (docs/algorithm.md,
'Sampling a draft', 'Where we deviate from the reference code')."""
from __future__ import annotations

import torch

from ..config import DecodeConfig
from ..models.warpers import warp_logits
from .draws import Source, categorical


def decision_dtype(device: torch.device) -> torch.dtype:
    """The dtype of every probability a decision reads: float64, except on MPS, which has none (float32 there)."""
    return torch.float32 if device.type == "mps" else torch.float64


def token_distribution(logits: torch.Tensor, cfg: DecodeConfig, mask_id: int, owned: bool = False) -> torch.Tensor:
    """Probabilities [n, V] after the mask logit is set to -inf and the sampling transform is applied.

    Greedy decoding uses T = 1 with no top-k / top-p, so p is the model's own probability of the argmax.
    Computed in float64 from the model's logits (`decision_dtype`; float32 logits widen exactly): a float32 softmax
    rounds differently on each CPU kernel set (ATen's AVX-512, AVX2 and default paths differ by up to ~1e-6 near
    p = 1), so two drafts' confidences that are 5e-7 apart would rank one way here and the other way on another CPU
    or in the page's decoder (s2d2_web/decoding/sampling.js, float64 Numbers). In float64 the paths agree to ~1e-15
    (docs/page-decoder.md, 'What is identical').
    `owned`: `logits` is a fresh tensor nobody else reads, so it may be overwritten (no copy when already wide).
    """
    dtype = decision_dtype(logits.device)
    writable = owned and logits.dtype == dtype and (torch.is_inference_mode_enabled() or not logits.is_inference())
    logits = logits if writable else logits.to(dtype, copy=True)
    logits[:, mask_id].fill_(-torch.inf)  # the mask token is never a draft, a verifier pick or a residual draw
    if not cfg.do_sample:
        return torch.softmax(logits, dim=-1)
    logits = warp_logits(logits, cfg.temperature, cfg.top_k, cfg.top_p)
    return torch.softmax(logits, dim=-1)


def draw_tokens(probs: torch.Tensor, cfg: DecodeConfig, generator: Source, kind: str = "draft") -> torch.Tensor:
    """Argmax (first index on ties) when greedy, else one sample per row from the decode's random source (`kind`:
    the draw site, which keys the counter generator's draws)."""
    if not cfg.do_sample:
        return torch.argmax(probs, dim=-1)
    return categorical(generator, probs, kind)


def draw_with_probs(probs: torch.Tensor, cfg: DecodeConfig,
                    generator: Source) -> tuple[torch.Tensor, torch.Tensor]:
    """`draw_tokens` and each drawn token's probability. Greedy takes both from one max (its index is argmax's,
    the first on ties; its value is the probability there)."""
    if not cfg.do_sample:
        p, tokens = probs.max(dim=-1)
        return tokens, p
    tokens = draw_tokens(probs, cfg, generator)
    return tokens, probs.gather(-1, tokens[:, None]).squeeze(-1)


def entropy(probs: torch.Tensor) -> torch.Tensor:
    """Shannon entropy in nats per row, with 0 log 0 = 0."""
    return -(probs * torch.log(probs.clamp_min(1e-30))).sum(-1)
