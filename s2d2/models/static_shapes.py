"""The fixed shapes of the static backend (static_backend.py) and the code that fills their buffers in place.

One shape is (batch, rows): `batch` members (a power of two) of `rows` query rows each (`padded_length` of the
longest query). Member b's real rows come first, then dummy rows (the pad token at position 0) that attend only to
their own key; a padding member is all dummy rows, written to the storage's scratch entry. Every buffer is filled
with host ints and device-to-device copies only, so filling never waits for the device, and the same code fills the
buffers a CUDA graph replays and those an eager forward reads.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from .base import QueryMask

PAD_LIMIT = 512  # 2 x the largest block (config.MAX_BLOCK_LENGTH): every decoder forward but a long prefill


def next_power_of_two(n: int) -> int:
    return 1 << max(0, n - 1).bit_length()


def padded_length(q: int) -> int:
    """The fixed row count a q-query forward runs at: the next power of two up to PAD_LIMIT, else q itself."""
    return q if q > PAD_LIMIT else next_power_of_two(q)


def query_shapes(block_lengths: list[int] | tuple[int, ...]) -> list[int]:
    """Padded shapes a decode with these block lengths can use: AR (1, 2), drafts and commits (B), the 2L verify
    or a fused forward (2B), and the shorter causal windows / variable drafts in between."""
    top = padded_length(2 * max([1, *(int(b) for b in block_lengths)]))
    return [1 << k for k in range(top.bit_length()) if 1 << k <= top]


@dataclass
class ShapeSlots:
    """The static inputs (and, once captured, the graph and its output) of one padded (batch, rows) shape."""

    batch: int
    rows: int
    arange: torch.Tensor  # [rows]
    ids: torch.Tensor  # [batch, rows]
    positions: torch.Tensor  # [batch, rows]
    write: torch.Tensor  # [batch, rows] cache column of each row: cache_len + arange
    slot: torch.Tensor  # [batch] storage entry of each member (several slots only)
    mask: torch.Tensor  # [batch, rows, capacity] bool, True = attend
    bias: torch.Tensor | None  # [batch, rows, capacity] additive copy of `mask` (eager attention only)
    graph: Any = None  # torch.cuda.CUDAGraph
    logits: torch.Tensor | None = None  # the graph's output [batch, rows, V]


def new_shape(batch: int, rows: int, capacity: int, device: torch.device,
              bias_dtype: torch.dtype | None) -> ShapeSlots:
    """Zeroed buffers of one (batch, rows) shape over `capacity` cache columns (an additive bias too, for eager)."""
    long = dict(dtype=torch.long, device=device)
    mask = torch.zeros(batch, rows, capacity, dtype=torch.bool, device=device)
    bias = None if bias_dtype is None else torch.zeros(batch, rows, capacity, dtype=bias_dtype, device=device)
    return ShapeSlots(batch, rows, torch.arange(rows, **long), torch.zeros(batch, rows, **long),
                      torch.zeros(batch, rows, **long), torch.zeros(batch, rows, **long),
                      torch.zeros(batch, **long), mask, bias)


def fill_member(slots: ShapeSlots, b: int, slot: int, cache_len: int, ids: torch.Tensor, positions: torch.Tensor,
                attention: Any, q: int, cols: torch.Tensor, pad_id: int) -> None:
    """Fill member b's buffers in place: q real rows, then dummy rows that see only their own key. Host ints
    and device-to-device copies only: nothing here reads the device."""
    rows, cap = slots.rows, int(cols.shape[0])
    write, mask = slots.write[b], slots.mask[b]
    slots.ids[b, :q].copy_(ids)
    slots.positions[b, :q].copy_(positions)
    slots.slot[b].fill_(slot)
    torch.add(slots.arange, cache_len, out=write)
    if isinstance(attention, QueryMask):  # all-True cache columns, then the pattern, written in place
        torch.lt(cols.expand(q, cap), cache_len, out=mask[:q])
        mask[:q, cache_len : cache_len + q].copy_(attention.pattern)
    elif isinstance(attention, torch.Tensor):
        mask[:q, : cache_len + q].copy_(attention)
        mask[:q, cache_len + q :].fill_(False)
    elif attention == "full":
        torch.lt(cols.expand(q, cap), cache_len + q, out=mask[:q])
    else:  # causal: row i sees columns <= cache_len + i
        torch.le(cols.expand(q, cap), write[:q, None], out=mask[:q])
    if q < rows:
        slots.ids[b, q:].fill_(pad_id)
        slots.positions[b, q:].fill_(0)
        torch.eq(cols.expand(rows - q, cap), write[q:, None], out=mask[q:])


def fill_padding(slots: ShapeSlots, b: int, entry: int, cols: torch.Tensor, pad_id: int) -> None:
    """Member b pads the batch: pad tokens at position 0, written to storage entry `entry` at columns 0..rows-1,
    each row seeing its own key only (so no row is fully masked and no real member sees them)."""
    slots.ids[b].fill_(pad_id)
    slots.positions[b].fill_(0)
    slots.slot[b].fill_(entry)
    slots.write[b].copy_(slots.arange)
    torch.eq(cols.expand(slots.rows, int(cols.shape[0])), slots.write[b, :, None], out=slots.mask[b])


def cut_logits(logits: torch.Tensor, last: int | None, pick: torch.Tensor | None) -> torch.Tensor:
    """A member's logits as `HFModel.forward` returns them: the last `last` rows, then the rows picked; float32,
    copied out of the static output buffer (only the rows asked for leave it)."""
    if last:
        logits = logits[-last:]
    if pick is not None:
        return logits.index_select(0, pick).to(torch.float32)
    return logits.to(torch.float32, copy=True)


def check_attention(attention: Any, q: int, cache_len: int) -> None:
    if isinstance(attention, (torch.Tensor, QueryMask)):
        mask = attention.pattern if isinstance(attention, QueryMask) else attention
        want = (q, q) if isinstance(attention, QueryMask) else (q, cache_len + q)
        if tuple(mask.shape) != want:
            raise ValueError(f"attention mask shape {tuple(mask.shape)} != {want}")
        if mask.dtype != torch.bool:
            raise ValueError(f"attention masks are bool (True = attend), got {mask.dtype}")
    elif attention not in ("causal", "full"):
        raise ValueError(f"attention must be 'causal', 'full', a bool mask or a QueryMask, got {attention!r}")
