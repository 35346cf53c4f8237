"""The preallocated KV storage of the static backend, and the per-decode handle the decoder holds.

`StaticKV` is what the transformers forward sees: one `[1, kv_heads, capacity, head_dim]` key and value buffer per
layer, written in place at `write_index` (a device tensor the backend fills before each forward) and read whole;
the attention mask hides every column that is not live. Its tensors never move, so CUDA graphs captured over it
stay valid for the model's lifetime (until `grow`).

`StaticCacheHandle` is what `HFModel.new_cache()` returns: the live length as a host int (the decoder reads it
for every mask, so it must cost no device sync), and `crop(-n)` as a counter, like `DynamicCache.crop`.

Why not transformers' `StaticCache` (checked in 5.24's cache_utils.py): its layers append at a device-side counter
(`cumulative_length`) that every layer advances inside the forward, so the host cannot know the live length
without a sync; a write past `max_cache_len` is an out-of-range `index_copy_` on the device (on CUDA a device-side
assert that ends the process) rather than a check; and it cannot place the padded dummy rows of a fixed-shape
forward. What we share with it: full-buffer reads, crop as a counter, and a mask sized to the whole buffer.
"""
from __future__ import annotations

from typing import Any

import torch
from transformers.cache_utils import Cache, CacheLayerMixin


class CacheCapacityError(ValueError):
    """A forward needs more cache positions than the static backend may hold."""


class StaticKVLayer(CacheLayerMixin):
    """One layer's keys and values; `update` writes the new rows at the owner's `write_index`."""

    is_compileable = True
    is_croppable = True
    is_sliding = False

    def __init__(self, owner: "StaticKV", keys: torch.Tensor, values: torch.Tensor) -> None:
        super().__init__()
        self.owner = owner
        self.keys, self.values = keys, values
        self.device = keys.device
        self.is_initialized = True

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        pass  # allocated up front by StaticKV

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any,
               **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        index = self.owner.write_index
        self.keys.index_copy_(2, index, key_states)
        self.values.index_copy_(2, index, value_states)
        return self.keys, self.values

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        return self.keys.shape[2], 0

    def get_seq_length(self) -> int:
        return self.owner.live_length

    def get_max_length(self) -> int:
        return self.keys.shape[2]

    def crop(self, tokens_to_remove: int) -> None:
        raise RuntimeError("crop the StaticCacheHandle, not the storage")

    def reset(self) -> None:
        pass  # stale rows are masked, never read


class StaticKV(Cache):
    """Per-model KV storage of fixed capacity (see the module docstring)."""

    def __init__(self, config: Any, capacity: int, dtype: torch.dtype, device: torch.device) -> None:
        config = config.get_text_config(decoder=True) if hasattr(config, "get_text_config") else config
        heads = int(config.num_attention_heads)
        head_dim = int(getattr(config, "head_dim", None) or config.hidden_size // heads)
        kv_heads = int(getattr(config, "num_key_value_heads", None) or heads)
        self.shape = (1, kv_heads, int(capacity), head_dim)
        self.dtype, self.device = dtype, device
        layers = [StaticKVLayer(self, *self._buffers(self.shape)) for _ in range(int(config.num_hidden_layers))]
        super().__init__(layers=layers)
        self.write_index = torch.arange(0, device=device)  # set by the backend before every forward
        self.live_length = 0  # informational (get_seq_length); the handle holds the truth

    def _buffers(self, shape: tuple[int, ...]) -> tuple[torch.Tensor, torch.Tensor]:
        return (torch.zeros(shape, dtype=self.dtype, device=self.device),
                torch.zeros(shape, dtype=self.dtype, device=self.device))

    @property
    def capacity(self) -> int:
        return self.shape[2]

    @property
    def nbytes(self) -> int:
        return sum(2 * layer.keys.numel() * layer.keys.element_size() for layer in self.layers)

    def grow(self, capacity: int, live: int) -> None:
        """New buffers of `capacity` positions holding the first `live` positions of the old ones."""
        self.shape = (*self.shape[:2], int(capacity), self.shape[3])
        for layer in self.layers:
            keys, values = self._buffers(self.shape)
            keys[:, :, :live].copy_(layer.keys[:, :, :live])
            values[:, :, :live].copy_(layer.values[:, :, :live])
            layer.keys, layer.values = keys, values


class StaticCacheHandle:
    """One decode's lease on a backend's storage: the live length, kept on the host."""

    def __init__(self, backend: Any) -> None:
        self.backend = backend
        self.length = 0

    def get_seq_length(self) -> int:
        return self.length

    @property
    def capacity(self) -> int:
        return self.backend.capacity

    def crop(self, tokens_to_remove: int) -> None:
        """Drop the last `-tokens_to_remove` positions (negative, like `DynamicCache.crop`): a counter, no copy."""
        n = int(tokens_to_remove)
        if n > 0 or -n > self.length:
            raise ValueError(f"crop({n}): pass minus the number of positions to drop (at most {self.length})")
        self.length += n

    def __repr__(self) -> str:
        return f"StaticCacheHandle(length={self.length}, capacity={self.capacity})"
