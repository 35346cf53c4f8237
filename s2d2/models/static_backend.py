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
* **One decode at a time.** The storage is leased to one `StaticCacheHandle`; while that handle lives,
  `new_cache` returns None and the caller falls back to a dynamic cache (slower, never wrong).

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

from .base import QueryMask
from .static_cache import CacheCapacityError, StaticCacheHandle, StaticKV

PAD_LIMIT = 512  # 2 x the largest block (config.MAX_BLOCK_LENGTH): every decoder forward but a long prefill
MIN_CAPACITY = 256


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
    """The static inputs (and, once captured, the graph and its output) of one padded query shape."""

    rows: int
    arange: torch.Tensor  # [rows]
    ids: torch.Tensor  # [rows]
    positions: torch.Tensor  # [rows]
    write: torch.Tensor  # [rows] cache slot of each row: cache_len + arange
    mask: torch.Tensor  # [rows, capacity] bool, True = attend
    bias: torch.Tensor | None  # [rows, capacity] additive copy of `mask` (eager attention only)
    graph: Any = None  # torch.cuda.CUDAGraph
    logits: torch.Tensor | None = None  # the graph's output [rows, V]


@dataclass
class BackendStats:
    graph_replays: int = 0
    eager_forwards: int = 0
    graphs_captured: int = 0
    capture_seconds: float = 0.0
    reallocations: int = 0
    dynamic_fallbacks: int = 0
    capture_failures: dict[int, str] = field(default_factory=dict)


class StaticBackend:
    """Preallocated KV + fixed-shape forwards (+ CUDA graphs) for one transformers causal LM."""

    def __init__(self, model: Any, pad_id: int, attn_implementation: str, graphs: bool | None = None,
                 capacity: int | None = None, max_capacity: int | None = None, compile: bool = False) -> None:
        if attn_implementation not in ("sdpa", "eager"):
            raise ValueError(f"the static backend needs attn_implementation 'sdpa' or 'eager', "
                             f"not {attn_implementation!r}")
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
        self._slots: dict[int, ShapeSlots] = {}
        self._lock = threading.RLock()
        self._lease: weakref.ref[StaticCacheHandle] | None = None
        self._additive = attn_implementation == "eager"
        self._bias_values: tuple[torch.Tensor, torch.Tensor] | None = None  # (0, finfo.min) for eager masks
        self._call = _compiled(model) if compile else model

    # ------------------------------------------------------------------------------------------------------
    # Leases and capacity

    @property
    def capacity(self) -> int:
        return self.kv.capacity if self.kv is not None else 0

    def _leased(self) -> bool:
        return self._lease is not None and self._lease() is not None

    def new_cache(self) -> StaticCacheHandle | None:
        """A handle on the storage, or None while another handle holds it (use a dynamic cache then)."""
        with self._lock:
            if self._leased():
                self.stats.dynamic_fallbacks += 1
                return None
            self._reserve(self.initial_capacity, live=0)
            handle = StaticCacheHandle(self)
            self._lease = weakref.ref(handle)
            return handle

    def release(self, handle: StaticCacheHandle) -> None:
        """End `handle`'s lease now (otherwise it ends when the handle is garbage-collected)."""
        with self._lock:
            if self._lease is not None and self._lease() is handle:
                self._lease = None

    def _reserve(self, positions: int, live: int) -> None:
        """Make the storage hold `positions` positions (allocate or grow, keeping the first `live`)."""
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
            self.kv = StaticKV(self.model.config, size, self.dtype, self.device)
        else:
            self.kv.grow(size, live)
            self.stats.reallocations += 1
        self._slots.clear()  # masks and graphs are sized to the old capacity
        self._cols = torch.arange(size, device=self.device)

    # ------------------------------------------------------------------------------------------------------
    # Warm-up: capacity and graphs, outside any timed decode

    def needs_warmup(self, block_lengths: list[int] | tuple[int, ...] = ()) -> bool:
        """True when `warmup` would capture graphs for these block lengths (CUDA only)."""
        if not self.graphs:
            return False
        return any(self._slots.get(q) is None or self._slots[q].graph is None
                   for q in query_shapes(block_lengths) if q not in self.stats.capture_failures)

    @torch.inference_mode()
    def warmup(self, block_lengths: list[int] | tuple[int, ...] = (), max_length: int | None = None,
               shapes: list[int] | None = None) -> float:
        """Reserve room for `max_length` positions and capture every shape of `block_lengths` (or exactly the
        padded row counts `shapes`); seconds spent. Does nothing while a decode holds the storage.
        """
        with self._lock:
            if self._leased():
                return 0.0
            t0 = time.perf_counter()
            shapes = sorted({padded_length(int(q)) for q in shapes}) if shapes else query_shapes(block_lengths)
            longest = int(max_length or 0)  # room for the last forward's padded rows, or a padded prefill
            self._reserve(max(self.initial_capacity, longest + shapes[-1], padded_length(longest)), live=0)
            if self.graphs:
                for rows in shapes:
                    slots = self._slots_for(rows)
                    if slots.graph is None and rows not in self.stats.capture_failures:
                        self._capture(slots)
            return time.perf_counter() - t0

    def _capture(self, slots: ShapeSlots) -> None:
        t0 = time.perf_counter()
        rows = slots.rows
        pad = torch.full((rows,), self.pad_id, dtype=torch.long, device=self.device)
        self._fill(slots, 0, pad, slots.arange, "causal", rows)  # any valid content: the storage is not leased
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
            self.stats.capture_failures[rows] = f"{type(exc).__name__}: {str(exc)[:200]}"
            return
        slots.graph, slots.logits = graph, logits
        self.stats.graphs_captured += 1
        self.stats.capture_seconds += time.perf_counter() - t0

    # ------------------------------------------------------------------------------------------------------
    # The forward

    @torch.inference_mode()
    def forward(self, handle: StaticCacheHandle, input_ids: torch.Tensor, positions: torch.Tensor,
                attention: Any, keep: int, last: int | None = None, pick: torch.Tensor | None = None) -> torch.Tensor:
        if self._lease is None or self._lease() is not handle:
            raise RuntimeError("this static cache handle was released; take a new one with new_cache()")
        q, cache_len = int(input_ids.shape[0]), handle.length
        if not 0 <= keep <= q:
            raise ValueError(f"keep must be in [0, {q}], got {keep}")
        _check_attention(attention, q, cache_len)
        rows = padded_length(q)
        self._reserve(cache_len + rows, live=cache_len)
        slots = self._slots_for(rows) if rows <= PAD_LIMIT else self._new_slots(rows)
        self._fill(slots, cache_len, input_ids, positions, attention, q)
        self.kv.live_length = cache_len
        if slots.graph is not None:
            slots.graph.replay()
            logits = slots.logits[:q]
            self.stats.graph_replays += 1
        elif rows > PAD_LIMIT:  # exact length (a long prefill): compute only the rows asked for
            logits = self._run(slots, last or 0)
            self.stats.eager_forwards += 1
        else:  # padded: all rows, exactly as the shape's captured graph computes them
            logits = self._run(slots)[:q]
            self.stats.eager_forwards += 1
        handle.length = cache_len + keep
        if last:
            logits = logits[-last:]
        if pick is not None:  # only the rows asked for leave the static output buffer
            return logits.index_select(0, pick).to(torch.float32)
        return logits.to(torch.float32, copy=True)

    def _run(self, slots: ShapeSlots, logits_to_keep: int = 0) -> torch.Tensor:
        self.kv.write_index = slots.write
        mask = slots.bias if slots.bias is not None else slots.mask
        out = self._call(input_ids=slots.ids[None], position_ids=slots.positions[None], attention_mask=mask[None, None],
                         cache=self.kv, use_cache=True, logits_to_keep=logits_to_keep)
        return out.logits[0]

    def _slots_for(self, rows: int) -> ShapeSlots:
        if rows not in self._slots:
            self._slots[rows] = self._new_slots(rows)
        return self._slots[rows]

    def _new_slots(self, rows: int) -> ShapeSlots:
        dev, cap = self.device, self.capacity
        long = dict(dtype=torch.long, device=dev)
        mask = torch.zeros(rows, cap, dtype=torch.bool, device=dev)
        bias = torch.zeros(rows, cap, dtype=self.dtype, device=dev) if self._additive else None
        return ShapeSlots(rows, torch.arange(rows, **long), torch.zeros(rows, **long), torch.zeros(rows, **long),
                          torch.zeros(rows, **long), mask, bias)

    def _fill(self, slots: ShapeSlots, cache_len: int, ids: torch.Tensor, positions: torch.Tensor,
              attention: Any, q: int) -> None:
        """Fill one shape's buffers in place: q real rows, then dummy rows that see only their own key."""
        rows, cap, cols = slots.rows, self.capacity, self._cols
        slots.ids[:q].copy_(ids)
        slots.positions[:q].copy_(positions)
        torch.add(slots.arange, cache_len, out=slots.write)
        mask = slots.mask
        if isinstance(attention, QueryMask):  # all-True cache columns, then the pattern, written in place
            torch.lt(cols.expand(q, cap), cache_len, out=mask[:q])
            mask[:q, cache_len : cache_len + q].copy_(attention.pattern)
        elif isinstance(attention, torch.Tensor):
            mask[:q, : cache_len + q].copy_(attention)
            mask[:q, cache_len + q :].fill_(False)
        elif attention == "full":
            torch.lt(cols.expand(q, cap), cache_len + q, out=mask[:q])
        else:  # causal: row i sees columns <= cache_len + i
            torch.le(cols.expand(q, cap), slots.write[:q, None], out=mask[:q])
        if q < rows:
            slots.ids[q:].fill_(self.pad_id)
            slots.positions[q:].fill_(0)
            torch.eq(cols.expand(rows - q, cap), slots.write[q:, None], out=mask[q:])
        if slots.bias is not None:  # 0 where attended, finfo.min elsewhere
            if self._bias_values is None:
                self._bias_values = (torch.zeros((), dtype=self.dtype, device=self.device),
                                     torch.full((), torch.finfo(self.dtype).min, dtype=self.dtype, device=self.device))
            torch.where(mask, *self._bias_values, out=slots.bias)


def _check_attention(attention: Any, q: int, cache_len: int) -> None:
    if isinstance(attention, (torch.Tensor, QueryMask)):
        mask = attention.pattern if isinstance(attention, QueryMask) else attention
        want = (q, q) if isinstance(attention, QueryMask) else (q, cache_len + q)
        if tuple(mask.shape) != want:
            raise ValueError(f"attention mask shape {tuple(mask.shape)} != {want}")
        if mask.dtype != torch.bool:
            raise ValueError(f"attention masks are bool (True = attend), got {mask.dtype}")
    elif attention not in ("causal", "full"):
        raise ValueError(f"attention must be 'causal', 'full', a bool mask or a QueryMask, got {attention!r}")


def _compiled(model: Any) -> Any:
    """torch.compile for fused kernels under our own graph capture (inductor's cudagraphs stay off): opt-in,
    as it costs tens of seconds per shape. One compiled graph per padded shape, so raise dynamo's limit."""
    import torch._dynamo

    torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 32)
    return torch.compile(model, dynamic=False)
