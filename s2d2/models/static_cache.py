"""The preallocated KV storage of the static backend, and the per-decode handle the decoder holds.

`StaticKV` is what the transformers forward sees: per layer one `[entries, kv_heads, capacity, head_dim]` key and
value buffer, written in place and read whole; the attention mask hides every column that is not live. Its tensors
never move, so CUDA graphs captured over it stay valid for the model's lifetime (until `grow`). Two layouts:

* **One slot** (`slots == 1`, entries = 1): the storage is the forward's batch of one. New rows are written at
  `write_index` ([rows]) and the buffer itself is what attention reads (no copy): the batch-1 path as it always was.
* **Several slots** (entries = slots + 1; the last entry is scratch, owned by nobody). A forward's member b writes
  its rows into entry `slot_index[b]` at columns `write_index[b]` ([B, rows]), then the members' entries are
  gathered (`index_select`) into one shared `[B, ...]` workspace that attention reads. Padding members of a batch
  bucket write into the scratch entry and attend only to their own keys; nothing reads the scratch entry's values
  but those padding rows. One workspace serves every layer: layer l's attention is done before layer l+1 writes.

`StaticCacheHandle` is what `HFModel.new_cache()` returns: one slot's lease, the live length as a host int (the
decoder reads it for every mask, so it must cost no device sync), and `crop(-n)` as a counter, like
`DynamicCache.crop`.

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
        owner = self.owner
        if owner.slot_index is None:  # one slot: the storage is the batch
            index = owner.write_index[0]
            self.keys.index_copy_(2, index, key_states)
            self.values.index_copy_(2, index, value_states)
            return self.keys, self.values
        slots, cols = owner.slot_index, owner.write_index  # [B], [B, rows]
        # entry slots[b], column cols[b, r] <- row r of member b (advanced indices around a slice: [B, rows, H, D])
        self.keys[slots[:, None], :, cols] = key_states.transpose(1, 2)
        self.values[slots[:, None], :, cols] = value_states.transpose(1, 2)
        n = int(slots.shape[0])  # a shape, not a device read
        keys = torch.index_select(self.keys, 0, slots, out=owner.work_keys[:n])
        values = torch.index_select(self.values, 0, slots, out=owner.work_values[:n])
        return keys, values

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
    """Per-model KV storage of fixed capacity and slot count (see the module docstring)."""

    def __init__(self, config: Any, capacity: int, dtype: torch.dtype, device: torch.device, slots: int = 1,
                 batch: int = 1) -> None:
        config = config.get_text_config(decoder=True) if hasattr(config, "get_text_config") else config
        heads = int(config.num_attention_heads)
        head_dim = int(getattr(config, "head_dim", None) or config.hidden_size // heads)
        kv_heads = int(getattr(config, "num_key_value_heads", None) or heads)
        self.slots = int(slots)
        self.batch = int(batch)  # the largest batch bucket the workspace holds (slots > 1)
        self.shape = (1 if self.slots == 1 else self.slots + 1, kv_heads, int(capacity), head_dim)
        self.dtype, self.device = dtype, device
        layers = [StaticKVLayer(self, *self._buffers(self.shape)) for _ in range(int(config.num_hidden_layers))]
        super().__init__(layers=layers)
        self.write_index = torch.zeros(1, 0, dtype=torch.long, device=device)  # [B, rows], set before every forward
        self.slot_index: torch.Tensor | None = None  # [B] entries of the members (slots > 1), set with write_index
        self.work_keys = self.work_values = torch.zeros(0, dtype=dtype, device=device)
        self._workspace()
        self.live_length = 0  # informational (get_seq_length); the handles hold the truth

    @property
    def scratch(self) -> int:
        """The entry padding members write into (several slots only)."""
        return self.slots

    def _workspace(self) -> None:
        if self.slots > 1:
            shape = (self.batch, *self.shape[1:])
            self.work_keys, self.work_values = self._buffers(shape)

    def _buffers(self, shape: tuple[int, ...]) -> tuple[torch.Tensor, torch.Tensor]:
        return (torch.zeros(shape, dtype=self.dtype, device=self.device),
                torch.zeros(shape, dtype=self.dtype, device=self.device))

    @property
    def capacity(self) -> int:
        return self.shape[2]

    @property
    def nbytes(self) -> int:
        work = 2 * self.work_keys.numel() * self.work_keys.element_size()
        return work + sum(2 * layer.keys.numel() * layer.keys.element_size() for layer in self.layers)

    def grow(self, capacity: int, live: int) -> None:
        """New buffers of `capacity` positions holding the first `live` positions of every entry of the old ones."""
        self.shape = (*self.shape[:2], int(capacity), self.shape[3])
        for layer in self.layers:
            keys, values = self._buffers(self.shape)
            keys[:, :, :live].copy_(layer.keys[:, :, :live])
            values[:, :, :live].copy_(layer.values[:, :, :live])
            layer.keys, layer.values = keys, values
        self._workspace()


class StaticCacheHandle:
    """One decode's lease on one slot of a backend's storage: the slot and the live length, kept on the host."""

    def __init__(self, backend: Any, slot: int = 0) -> None:
        self.backend = backend
        self.slot = int(slot)
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
        return f"StaticCacheHandle(slot={self.slot}, length={self.length}, capacity={self.capacity})"
