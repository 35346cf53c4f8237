"""The adapter over native transformers causal-LM classes (Qwen3, Qwen3-MoE, Qwen2): the only place that
runs a transformers forward. It exposes one primitive, `forward`, over a `DynamicCache`."""
from __future__ import annotations

from typing import Any

import torch
from transformers import DynamicCache

from .base import Attention, ModelSpec
from .masks import full_mask, to_additive


class HFModel:
    """A native transformers model + tokenizer + the block-diffusion facts the decoder needs."""

    def __init__(self, model: Any, tokenizer: Any, spec: ModelSpec) -> None:
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.spec = spec
        self.attn_implementation = getattr(model.config, "_attn_implementation", None) or "sdpa"

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def dtype(self) -> torch.dtype:
        return next(self.model.parameters()).dtype

    def new_cache(self) -> DynamicCache:
        return DynamicCache(config=self.model.config)

    @torch.inference_mode()
    def forward(
        self,
        cache: DynamicCache,
        input_ids: torch.Tensor,
        positions: torch.Tensor,
        attention: Attention,
        keep: int,
        last: int | None = None,
    ) -> torch.Tensor:
        """Run the model on `input_ids` ([q]) at absolute `positions` ([q]) after the cached tokens.

        `keep` appended tokens stay in the cache (the rest are cropped: a "no-store" forward keeps 0).
        Returns float32 logits [q, V], or the last `last` rows only.
        """
        q = int(input_ids.shape[0])
        cache_len = cache.get_seq_length()
        if isinstance(attention, str) and attention == "full":
            attention = full_mask(cache_len, q, self.device)
        mask = None
        if isinstance(attention, torch.Tensor):
            if tuple(attention.shape) != (q, cache_len + q):
                raise ValueError(f"attention mask shape {tuple(attention.shape)} != {(q, cache_len + q)}")
            # Tensor masks pass through untouched, so only backends that read them correctly are allowed:
            # SDPA (bool, True = attend) and eager (additive). Flex/flash would silently misread them.
            if self.attn_implementation not in ("sdpa", "eager"):
                raise ValueError(
                    f"explicit attention masks need attn_implementation 'sdpa' or 'eager', "
                    f"not {self.attn_implementation!r}"
                )
            mask = attention if self.attn_implementation != "eager" else to_additive(attention, self.dtype)
            mask = mask[None, None]
        out = self.model(
            input_ids=input_ids[None],
            position_ids=positions[None],
            attention_mask=mask,
            cache=cache,
            use_cache=True,
            logits_to_keep=last or 0,
        )
        drop = q - keep
        if drop > 0:
            cache.crop(-drop)
        return out.logits[0].float()
