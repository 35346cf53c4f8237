"""logits -> distribution -> tokens, with one transform shared by draft, verifier and residual (docs/algorithm.md,
'Sampling a draft', 'Where we deviate from the reference code')."""
from __future__ import annotations

import torch

from ..config import DecodeConfig
from ..models.warpers import warp_logits
from .draws import Source, categorical


def token_distribution(logits: torch.Tensor, cfg: DecodeConfig, mask_id: int, owned: bool = False) -> torch.Tensor:
    """Probabilities [n, V] after the mask logit is set to -inf and the sampling transform is applied.

    Greedy decoding uses T = 1 with no top-k / top-p, so p is the model's own probability of the argmax.
    `owned`: `logits` is a fresh float32 tensor nobody else reads, so it may be overwritten (no copy).
    """
    writable = owned and logits.dtype == torch.float32 and (torch.is_inference_mode_enabled()
                                                            or not logits.is_inference())
    logits = logits if writable else logits.float().clone()
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
