"""The static forward backend: one preallocated KV cache, fixed query shapes, static input buffers, CUDA graphs.

Same contract as the dynamic path of `HFModel.forward` (float32 logits; `keep` appended positions stay cached),
but every forward runs over fixed buffers, so that on CUDA each query shape is captured once as a CUDA graph and
replayed for the rest of the model's life:

* **Fixed shapes.** A forward of q <= PAD_LIMIT queries runs at `padded_length(q)` (1, 2, 4, 8, ...) rows: the
  real rows first, then dummy rows (the pad token at position 0) that attend only to their own key, so no row is
  fully masked (a fully masked bool SDPA row gives NaN) and no real row sees them; their logits are dropped. The
  padded shape depends on q alone, so a run's numbers never depend on which shapes were captured before it.
  Longer forwards (a long prompt's prefill) run at their exact length, uncaptured.
* **Static buffers.** Token ids, position ids, the write index and the `[rows, capacity]` mask of each shape live
  in fixed tensors filled in place before the forward; mask columns past the live length are False.
* **Crop is a counter.** New keys/values are written at `cache_len + arange(rows)`; keeping `keep` of them is
  `length += keep` (see static_cache.py). Positions past the live length are scratch.
* **Capacity.** A forward that needs more positions than the storage holds grows it (a copy of the live prefix;
  captured graphs are dropped, and the rest of that decode runs uncaptured), up to `max_capacity`, past which it
  raises `CacheCapacityError` before touching anything. `warmup(block_lengths, max_length)` reserves room and
  captures the graphs up front, so neither happens inside a timed decode (`s2d2.generate` calls it first).
* **A slot per decode, a batch dimension.** The storage holds `slots` sequences (static_cache.py); each
  `StaticCacheHandle` leases one slot, and when every slot is leased `new_cache` returns None and the caller falls
  back to a dynamic cache (slower, never wrong). `forward_batch` runs several handles' forwards as one: the
  members' rows padded to the group's row bucket (`padded_length` of its longest query), the batch padded to the
  next power of two with padding members that write only the scratch entry and attend only to their own keys;
  each member has its own write columns and mask (its own live length). The padded shape is a function of the
  group's shape alone, so on CUDA each (batch bucket, row bucket) is captured once and replayed. Every buffer is
  filled by the same code (`_fill`) whether a graph replays it or the model runs eagerly, and filling reads nothing
  back from the device: a batched forward costs no host sync, whatever its size.
  `warmup(..., batch_size=n)` grows the slot count to min(n, max_slots) while no decode holds the storage.
  Forwards hold the backend's lock: decodes on other threads (a batch beside a lone decode) take turns.

On CPU (or with graphs=False) the very same buffers, padding and masks run eagerly: the tests prove this path
gives the dynamic path's tokens and NFE, and a replayed graph runs exactly these kernels. `compile=True` (opt-in)
puts torch.compile's fused kernels under the same capture, at tens of seconds of compilation per shape.
"""
from __future__ import annotations

import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import Any

import torch

from .static_cache import CacheCapacityError, StaticCacheHandle, StaticKV
from .static_shapes import (PAD_LIMIT, ShapeSlots, check_attention, cut_logits, fill_member, fill_padding,
                            new_shape, next_power_of_two, padded_length, query_shapes)

__all__ = ["PAD_LIMIT", "BackendStats", "StaticBackend", "batch_buckets", "padded_length", "query_shapes"]

MIN_CAPACITY = 256
MAX_SLOTS = 256  # = s2d2.batched.MAX_BATCH_SIZE: never more live sequences than that
DEFAULT_MAX_SLOTS = 64  # how far warmup(batch_size=...) grows the slot count unless max_slots says otherwise


def batch_buckets(batch: int) -> list[int]:
    """The padded batch sizes a group of at most `batch` members can run at: 1, 2, 4, ... up to its bucket."""
    top = next_power_of_two(max(1, int(batch)))
    return [1 << k for k in range(top.bit_length())]


def check_slots(slots: Any, max_slots: Any) -> tuple[int, int]:
    """(slots, max_slots) validated: integers with 1 <= slots <= max_slots <= MAX_SLOTS."""
    for name, v in (("slots", slots), ("max_slots", max_slots)):
        if not isinstance(v, int) or isinstance(v, bool) or not 1 <= v <= MAX_SLOTS:
            raise ValueError(f"{name}: must be an integer in [1, {MAX_SLOTS}], got {v!r}")
    if max_slots < slots:
        raise ValueError(f"max_slots ({max_slots}) must be >= slots ({slots})")
    return slots, max_slots


@dataclass
class BackendStats:
    graph_replays: int = 0
    eager_forwards: int = 0
    batched_forwards: int = 0  # forwards of two or more handles (replayed or eager)
    graphs_captured: int = 0
    capture_seconds: float = 0.0
    reallocations: int = 0
    dynamic_fallbacks: int = 0
    capture_failures: dict[tuple[int, int], str] = field(default_factory=dict)


class StaticBackend:
    """Preallocated KV (one slot per decode) + fixed-shape forwards (+ CUDA graphs) for one transformers causal LM."""

    def __init__(self, model: Any, pad_id: int, attn_implementation: str, graphs: bool | None = None,
                 capacity: int | None = None, max_capacity: int | None = None, compile: bool = False,
                 slots: int = 1, max_slots: int | None = None) -> None:
        if attn_implementation not in ("sdpa", "eager"):
            raise ValueError(f"the static backend needs attn_implementation 'sdpa' or 'eager', "
                             f"not {attn_implementation!r}")
        self.slots, self.max_slots = check_slots(slots, max(slots, DEFAULT_MAX_SLOTS) if max_slots is None
                                                 else max_slots)
        param = next(model.parameters())
        self.model, self.pad_id = model, int(pad_id)
        self.device, self.dtype = param.device, param.dtype
        cuda = self.device.type == "cuda"
        if graphs and not cuda:
            raise ValueError("CUDA graphs need a CUDA device; use graphs=False (eager static forwards) on CPU")
        self.graphs = cuda if graphs is None else bool(graphs)
        positions = int(getattr(model.config, "max_position_embeddings", 4096))
        self.max_capacity = int(max_capacity or positions + PAD_LIMIT)
        self.initial_capacity = min(self.max_capacity, int(capacity or MIN_CAPACITY))
        self.kv: StaticKV | None = None
        self.stats = BackendStats()
        self._cols: torch.Tensor | None = None  # arange(capacity); nothing touches the device before first use
        self._slots: dict[tuple[int, int], ShapeSlots] = {}
        self._lock = threading.RLock()
        self._leases: list[weakref.ref[StaticCacheHandle] | None] = [None] * self.slots
        self._additive = attn_implementation == "eager"
        self._bias_values: tuple[torch.Tensor, torch.Tensor] | None = None  # (0, finfo.min) for eager masks
        self._call = _compiled(model) if compile else model

    # ------------------------------------------------------------------------------------------------------
    # Leases, slots and capacity

    @property
    def capacity(self) -> int:
        return self.kv.capacity if self.kv is not None else 0

    def _holders(self) -> list[StaticCacheHandle]:
        return [h for h in (ref() for ref in self._leases if ref is not None) if h is not None]

    def _leased(self) -> bool:
        return bool(self._holders())

    def _owns(self, handle: Any) -> bool:
        slot = getattr(handle, "slot", -1)
        ref = self._leases[slot] if 0 <= slot < len(self._leases) else None
        return ref is not None and ref() is handle

    def new_cache(self) -> StaticCacheHandle | None:
        """A handle on the lowest free slot, or None while every slot is leased (use a dynamic cache then)."""
        with self._lock:
            free = [i for i, ref in enumerate(self._leases) if ref is None or ref() is None]
            if not free:
                self.stats.dynamic_fallbacks += 1
                return None
            self._reserve(self.initial_capacity, live=0)
            handle = StaticCacheHandle(self, free[0])
            self._leases[free[0]] = weakref.ref(handle)
            return handle

    def release(self, handle: StaticCacheHandle) -> None:
        """End `handle`'s lease now (otherwise it ends when the handle is garbage-collected)."""
        with self._lock:
            if self._owns(handle):
                self._leases[handle.slot] = None

    def reserve_slots(self, slots: int) -> int:
        """Hold min(slots, max_slots) sequences (never fewer than now); the slot count. Fresh storage, so it does
        nothing while a decode holds a slot."""
        with self._lock:
            if not self._leased():
                self._grow_slots(int(slots))
            return self.slots

    def _grow_slots(self, slots: int) -> None:
        slots = min(int(slots), self.max_slots)
        if slots <= self.slots:
            return
        self.slots = slots
        self._leases = [None] * slots
        if self.kv is not None:
            capacity, self.kv = self.kv.capacity, None
            self._reserve(capacity, live=0)

    def _reserve(self, positions: int, live: int) -> None:
        """Make the storage hold `positions` positions per slot (allocate or grow, keeping the first `live`)."""
        if positions > self.max_capacity:
            raise CacheCapacityError(
                f"the static KV cache holds at most {self.max_capacity} positions and this forward needs "
                f"{positions}; shorten the prompt or gen_length, or load the model with backend='dynamic'"
            )
        if self.kv is not None and positions <= self.kv.capacity:
            return
        size = max(positions, next_power_of_two(positions) if self.kv is None else 2 * self.kv.capacity)
        size = min(self.max_capacity, size)
        if self.kv is None:
            self.kv = StaticKV(self.model.config, size, self.dtype, self.device, self.slots,
                               next_power_of_two(self.slots))
        else:
            self.kv.grow(size, live)
            self.stats.reallocations += 1
        self._slots.clear()  # masks and graphs are sized to the old capacity
        self._cols = torch.arange(size, device=self.device)

    def _live(self) -> int:
        return max([h.length for h in self._holders()], default=0)

    # ------------------------------------------------------------------------------------------------------
    # Warm-up: capacity, slots and graphs, outside any timed decode

    def _wanted(self, block_lengths: Any, shapes: Any, batch_size: int) -> list[tuple[int, int]]:
        rows = sorted({padded_length(int(q)) for q in shapes}) if shapes else query_shapes(block_lengths)
        buckets = batch_buckets(min(max(1, int(batch_size)), self.slots))
        return [(b, r) for b in buckets for r in rows]

    def needs_warmup(self, block_lengths: list[int] | tuple[int, ...] = (), batch_size: int = 1) -> bool:
        """True when `warmup` would capture graphs for these block lengths and batch size (CUDA only)."""
        if not self.graphs:
            return False
        if min(int(batch_size), self.max_slots) > self.slots:
            return True
        return any(self._slots.get(k) is None or self._slots[k].graph is None
                   for k in self._wanted(block_lengths, None, batch_size) if k not in self.stats.capture_failures)

    @torch.inference_mode()
    def warmup(self, block_lengths: list[int] | tuple[int, ...] = (), max_length: int | None = None,
               shapes: list[int] | None = None, batch_size: int = 1) -> float:
        """Hold min(batch_size, max_slots) sequences, reserve room for `max_length` positions and capture every
        (batch bucket, row shape) of `block_lengths` (or exactly the padded row counts `shapes`); seconds spent.
        Does nothing while a decode holds the storage.
        """
        with self._lock:
            if self._leased():
                return 0.0
            t0 = time.perf_counter()
            self._grow_slots(int(batch_size))
            wanted = self._wanted(block_lengths, shapes, batch_size)
            longest = int(max_length or 0)  # room for the last forward's padded rows, or a padded prefill
            top = max(r for _, r in wanted)
            self._reserve(max(self.initial_capacity, longest + top, padded_length(longest)), live=0)
            if self.graphs:
                for key in wanted:
                    slots = self._slots_for(*key)
                    if slots.graph is None and key not in self.stats.capture_failures:
                        self._capture(slots)
            return time.perf_counter() - t0

    def _capture(self, slots: ShapeSlots) -> None:
        t0 = time.perf_counter()
        for b in range(slots.batch):  # padding members only: they write the scratch entry (or the unleased slot)
            self._fill_padding(slots, b)
        self._finish(slots)
        try:
            side = torch.cuda.Stream(self.device)
            side.wait_stream(torch.cuda.current_stream(self.device))
            with torch.cuda.stream(side):
                for _ in range(2):  # lazy inits, cuBLAS handles and workspaces happen outside the capture
                    self._run(slots)
            torch.cuda.current_stream(self.device).wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, capture_error_mode="thread_local"):
                logits = self._run(slots)
        except Exception as exc:  # e.g. a host sync inside the model (MoE routing): stay eager for this shape
            self.stats.capture_failures[(slots.batch, slots.rows)] = f"{type(exc).__name__}: {str(exc)[:200]}"
            return
        slots.graph, slots.logits = graph, logits
        self.stats.graphs_captured += 1
        self.stats.capture_seconds += time.perf_counter() - t0

    # ------------------------------------------------------------------------------------------------------
    # The forwards

    def _check(self, handle: Any, input_ids: torch.Tensor, attention: Any, keep: int) -> tuple[int, int]:
        """(q, cache length) of one request, refused before anything changes."""
        if not self._owns(handle):
            raise RuntimeError("this static cache handle was released; take a new one with new_cache()")
        q, cache_len = int(input_ids.shape[0]), handle.length
        if not 0 <= keep <= q:
            raise ValueError(f"keep must be in [0, {q}], got {keep}")
        check_attention(attention, q, cache_len)
        return q, cache_len

    @torch.inference_mode()
    def forward(self, handle: StaticCacheHandle, input_ids: torch.Tensor, positions: torch.Tensor,
                attention: Any, keep: int, last: int | None = None, pick: torch.Tensor | None = None) -> torch.Tensor:
        with self._lock:  # one forward at a time: the shape buffers and the storage's indices are shared
            return self._forward(handle, input_ids, positions, attention, keep, last, pick)

    def _forward(self, handle: StaticCacheHandle, input_ids: torch.Tensor, positions: torch.Tensor,
                 attention: Any, keep: int, last: int | None, pick: torch.Tensor | None) -> torch.Tensor:
        q, cache_len = self._check(handle, input_ids, attention, keep)
        rows = padded_length(q)
        self._reserve(cache_len + rows, live=self._live())
        slots = self._slots_for(1, rows) if rows <= PAD_LIMIT else self._new_slots(1, rows)
        self._fill(slots, 0, handle.slot, cache_len, input_ids, positions, attention, q)
        self._finish(slots, cache_len)
        # exact length (a long prefill): compute only the rows asked for; padded: all rows, as a graph does
        logits = self._execute(slots, (last or 0) if rows > PAD_LIMIT else 0)[0, :q]
        handle.length = cache_len + keep
        return cut_logits(logits, last, pick)

    @torch.inference_mode()
    def forward_batch(self, requests: list[Any]) -> list[torch.Tensor]:
        """Several handles' forwards (each the arguments of `HFModel.forward`, its cache a handle of this backend)
        as one forward at (next power of two of the members, `padded_length` of the longest query); each member's
        logits as `forward` returns them, and each member's `keep` new positions kept in its own slot."""
        with self._lock:
            return self._forward_batch(requests)

    def _forward_batch(self, requests: list[Any]) -> list[torch.Tensor]:
        checked = [self._check(r.cache, r.input_ids, r.attention, r.keep) for r in requests]
        if len({r.cache.slot for r in requests}) < len(requests):
            raise ValueError("forward_batch: two requests on one cache handle")
        batch, rows = next_power_of_two(len(requests)), padded_length(max(q for q, _ in checked))
        self._reserve(max(c for _, c in checked) + rows, live=self._live())
        slots = self._slots_for(batch, rows) if rows <= PAD_LIMIT else self._new_slots(batch, rows)
        for b, (r, (q, c)) in enumerate(zip(requests, checked)):
            self._fill(slots, b, r.cache.slot, c, r.input_ids, r.positions, r.attention, q)
        for b in range(len(requests), batch):
            self._fill_padding(slots, b)
        self._finish(slots, max(c for _, c in checked))
        out = self._execute(slots, 0)
        self.stats.batched_forwards += 1
        results = []
        for b, (r, (q, c)) in enumerate(zip(requests, checked)):
            r.cache.length = c + r.keep
            results.append(cut_logits(out[b, :q], r.last, r.rows))
        return results

    def _execute(self, slots: ShapeSlots, logits_to_keep: int) -> torch.Tensor:
        if slots.graph is not None:
            slots.graph.replay()
            self.stats.graph_replays += 1
            return slots.logits  # type: ignore[return-value]
        self.stats.eager_forwards += 1
        return self._run(slots, logits_to_keep)

    def _run(self, slots: ShapeSlots, logits_to_keep: int = 0) -> torch.Tensor:
        self.kv.write_index = slots.write
        self.kv.slot_index = slots.slot if self.kv.slots > 1 else None
        mask = slots.bias if slots.bias is not None else slots.mask
        out = self._call(input_ids=slots.ids, position_ids=slots.positions, attention_mask=mask[:, None],
                         cache=self.kv, use_cache=True, logits_to_keep=logits_to_keep)
        return out.logits

    def _slots_for(self, batch: int, rows: int) -> ShapeSlots:
        if (batch, rows) not in self._slots:
            self._slots[(batch, rows)] = self._new_slots(batch, rows)
        return self._slots[(batch, rows)]

    def _new_slots(self, batch: int, rows: int) -> ShapeSlots:
        return new_shape(batch, rows, self.capacity, self.device, self.dtype if self._additive else None)

    def _fill(self, slots: ShapeSlots, b: int, slot: int, cache_len: int, ids: torch.Tensor,
              positions: torch.Tensor, attention: Any, q: int) -> None:
        fill_member(slots, b, slot, cache_len, ids, positions, attention, q, self._cols, self.pad_id)

    def _fill_padding(self, slots: ShapeSlots, b: int) -> None:
        """Member b pads the batch, in the scratch entry (with one slot, the unleased storage: only a capture)."""
        fill_padding(slots, b, self.kv.scratch if self.kv.slots > 1 else 0, self._cols, self.pad_id)

    def _finish(self, slots: ShapeSlots, live: int = 0) -> None:
        """The additive copy of the mask (eager attention: 0 where attended, finfo.min elsewhere)."""
        self.kv.live_length = live
        if slots.bias is not None:
            if self._bias_values is None:
                self._bias_values = (torch.zeros((), dtype=self.dtype, device=self.device),
                                     torch.full((), torch.finfo(self.dtype).min, dtype=self.dtype, device=self.device))
            torch.where(slots.mask, *self._bias_values, out=slots.bias)


def _compiled(model: Any) -> Any:
    """torch.compile for fused kernels under our own graph capture (inductor's cudagraphs stay off): opt-in,
    as it costs tens of seconds per shape. One compiled graph per padded (batch, rows) shape, so raise dynamo's
    limit."""
    import torch._dynamo

    torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 128)
    return torch.compile(model, dynamic=False)
