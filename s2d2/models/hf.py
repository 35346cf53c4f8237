"""The adapter over native transformers causal-LM classes (Qwen3, Qwen3-MoE, Qwen2): the only place that
runs a transformers forward. It exposes one primitive, `forward`, over a KV cache from `new_cache()`.

Two backends sit behind that primitive: "dynamic" (a `DynamicCache` that grows and is cropped; any shape) and
"static" (static_backend.py: a preallocated cache of `slots` sequences, fixed query shapes and, on CUDA, one captured
graph per (batch bucket, row bucket) shape). "auto" picks static on CUDA and dynamic elsewhere. Both give the same
tokens and NFE, and both batch (`forward_batch`): static handles share one static forward, dynamic caches one padded
dynamic forward, and a group holding both (a decode that found every slot leased) runs one forward of each.
"""
from __future__ import annotations

from typing import Any

import torch
from transformers import DynamicCache

from ..trace.records import CostTable
from .base import Attention, ForwardRequest, ModelSpec, QueryMask
from .batch_forward import forward_batch
from .costs import CostModel, calibrate, calibration_shapes
from .masks import full_mask, to_additive, widen
from .read_rows import head_logits, may_cut, plan_rows
from .static_backend import PAD_LIMIT, StaticBackend
from .static_cache import StaticCacheHandle

BACKENDS = ("auto", "static", "dynamic")


class HFModel:
    """A native transformers model + tokenizer + the block-diffusion facts the decoder needs."""

    def __init__(self, model: Any, tokenizer: Any, spec: ModelSpec, backend: str = "auto") -> None:
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.spec = spec
        self.attn_implementation = getattr(model.config, "_attn_implementation", None) or "sdpa"
        self.static: StaticBackend | None = None
        self.set_backend(backend)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def dtype(self) -> torch.dtype:
        return next(self.model.parameters()).dtype

    @property
    def backend(self) -> str:
        return "dynamic" if self.static is None else "static"

    def static_unsupported(self) -> str | None:
        """Why the static backend cannot serve this model, or None."""
        if self.attn_implementation not in ("sdpa", "eager"):
            return f"it needs attn_implementation 'sdpa' or 'eager', not {self.attn_implementation!r}"
        config = self.model.config
        kinds = set(getattr(config, "layer_types", None) or ["full_attention"])
        if kinds != {"full_attention"} or getattr(config, "use_sliding_window", False):
            return f"it supports full-attention layers only (this model has {sorted(kinds)})"
        return None

    def set_backend(self, backend: str = "auto", **options: Any) -> None:
        """Choose the forward backend. `options` go to `StaticBackend`: graphs (default: on CUDA), capacity,
        max_capacity, compile (torch.compile under the graphs: fused kernels, tens of seconds per shape), slots
        (sequences the storage holds, default 1) and max_slots (how far `warmup(batch_size=...)` may grow it)."""
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
        why = self.static_unsupported()
        if backend == "auto":
            backend = "static" if self.device.type == "cuda" and why is None else "dynamic"
        if backend == "static" and why is not None:
            raise ValueError(f"backend 'static' cannot run this model: {why}")
        self.static = None
        if backend == "static":
            self.static = StaticBackend(self.model, self.spec.mask_id, self.attn_implementation, **options)
        self.costs = CostModel(PAD_LIMIT if self.static is not None else 0)  # timings are per backend

    # -- measured forward costs (s2d2/models/costs.py): what routing in seconds reads ------------------------------

    def cost(self, kind: str, queries: int) -> float:
        """Seconds one forward of `kind` with `queries` query tokens costs here (robust fit of measured timings)."""
        return self.costs.cost(kind, queries)

    def cost_table(self) -> CostTable:
        """The current cost fits, frozen (a decode routes with this; its trace header records it)."""
        return self.costs.table()

    def calibrate_costs(self, block_lengths: list[int] | tuple[int, ...]) -> float:
        """Time the forwards these block lengths use, unless every such shape has timings already; seconds spent."""
        shapes = calibration_shapes(block_lengths, self.spec.alignment == "shifted")
        if all({self.costs.rows(q) for q in qs} <= self.costs.shapes(kind) for kind, qs in shapes.items()):
            return 0.0
        return calibrate(self, block_lengths)

    def observe_forwards(self, forwards: list[Any]) -> None:
        """Refine the cost fits with a decode's per-forward timings (only pass exact ones)."""
        self.costs.observe_forwards(forwards)

    def new_cache(self) -> Any:
        """A fresh, empty KV cache: the static storage when it is free, else a `DynamicCache`."""
        handle = self.static.new_cache() if self.static is not None else None
        return handle if handle is not None else DynamicCache(config=self.model.config)

    def needs_warmup(self, block_lengths: list[int] | tuple[int, ...] = (), batch_size: int = 1) -> bool:
        """True when `warmup(block_lengths, batch_size=...)` would capture CUDA graphs (seconds, once per model
        and shape)."""
        return self.static is not None and self.static.needs_warmup(block_lengths, batch_size)

    def warmup(self, block_lengths: list[int] | tuple[int, ...] = (), max_length: int | None = None,
               shapes: list[int] | None = None, batch_size: int = 1) -> float:
        """Static backend: hold `batch_size` sequences (up to its max_slots), reserve `max_length` positions and
        capture the shapes of `block_lengths` (or the given query `shapes`) at every batch bucket up to
        `batch_size`; seconds spent. A no-op for the dynamic backend. `s2d2.generate` calls it first,
        `s2d2.generate_batch` with its batch size."""
        if self.static is None:
            return 0.0
        return self.static.warmup(block_lengths, max_length, shapes, batch_size)

    def reserve_slots(self, slots: int) -> int:
        """Static backend: hold `slots` sequences at once (up to its max_slots; only while no decode holds one),
        so a batch's decodes each lease a slot; the slot count. 0 for the dynamic backend (any number batch)."""
        return self.static.reserve_slots(slots) if self.static is not None else 0

    def batch_unsupported(self) -> str | None:
        """Why `forward_batch` cannot run several sequences in one forward here, or None. Both backends batch;
        flash / flex attention cannot, since a batch needs an explicit per-row mask only sdpa and eager read."""
        if self.attn_implementation not in ("sdpa", "eager"):
            return f"it needs attn_implementation 'sdpa' or 'eager', not {self.attn_implementation!r}"
        return None

    @torch.inference_mode()
    def forward_batch(self, requests: list[ForwardRequest]) -> list[torch.Tensor]:
        """Several sequences' forwards (each the arguments of `forward`) as few forwards as their caches allow:
        the static handles' as one static forward (static_backend.py), the DynamicCaches' as one padded forward
        (batch_forward.py); each request's logits, as `forward` gives them. A part of one request runs `forward`
        itself, so a batch of one is the single forward exactly."""
        if len(requests) == 1:
            return [self.forward(*requests[0])]
        why = self.batch_unsupported()
        if why is not None:
            raise ValueError(f"forward_batch: {why}")
        static = [i for i, r in enumerate(requests) if isinstance(r.cache, StaticCacheHandle)]
        dynamic = [i for i in range(len(requests)) if i not in set(static)]
        out: list[torch.Tensor] = [torch.empty(0)] * len(requests)
        for part in (static, dynamic):
            reqs = [requests[i] for i in part]
            if not reqs:
                continue
            if len(reqs) == 1:
                got = [self.forward(*reqs[0])]
            elif part is static:
                if any(r.cache.backend is not self.static for r in reqs):
                    raise ValueError("forward_batch: a static cache handle of another model")
                got = self.static.forward_batch(reqs)
            else:
                got = forward_batch(self.model, self.attn_implementation, self.spec.mask_id, self.dtype, reqs)
            for i, logits in zip(part, got):
                out[i] = logits
        return out

    @torch.inference_mode()
    def forward(
        self,
        cache: Any,
        input_ids: torch.Tensor,
        positions: torch.Tensor,
        attention: Attention,
        keep: int,
        last: int | None = None,
        rows: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Run the model on `input_ids` ([q]) at absolute `positions` ([q]) after the cached tokens.

        `keep` appended tokens stay in the cache (the rest are cropped: a "no-store" forward keeps 0).
        Returns float32 logits [q, V], or the last `last` rows only; `rows` (a device index into those) picks the
        rows wanted. Only the rows read are computed (read_rows.py: the head at the read rows; on the CPU no
        query row that nothing read or kept needs), so a logit may move in its last bits with the rows asked for
        (summation order over another shape), never more.
        """
        if isinstance(cache, StaticCacheHandle):
            return cache.backend.forward(cache, input_ids, positions, attention, keep, last, rows)
        cache_len = cache.get_seq_length()
        plan = plan_rows(ForwardRequest(cache, input_ids, positions, attention, keep, last, rows), cache_len,
                         may_cut(self.model))
        _, input_ids, positions, attention, keep = plan.request[:5]
        q = int(input_ids.shape[0])
        if isinstance(attention, QueryMask):
            if tuple(attention.pattern.shape) != (q, q):
                raise ValueError(f"query mask shape {tuple(attention.pattern.shape)} != {(q, q)}")
            attention = widen(attention.pattern, cache_len)
        elif isinstance(attention, str) and attention == "full":
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
        logits = head_logits(self.model, [plan.reads], input_ids[None], positions[None], mask, cache)
        drop = q - keep
        if drop > 0:
            cache.crop(-drop)
        return (logits[0] if plan.reads is None else logits).float()
