"""One transformers forward over several sequences' KV caches: what a batched decode (s2d2/decoding/batch.py) runs.

Each request is exactly the arguments of `HFModel.forward` (its own `DynamicCache`, query ids, absolute positions,
attention, keep, last, rows). The batch is padded, never truncated:

* **Cache columns.** Sequence i's cached keys/values fill columns [0, c_i) of a [N, H, C, D] stack (C = max c_i);
  columns [c_i, C) are zeros that no row of i attends. Keys carry their rotary position already, so where they sit
  in the stack changes nothing.
* **Query rows.** Sequence i's q_i queries fill rows [0, q_i) of [N, Q] (Q = max q_i) at their own positions, each
  row seeing its own cache columns and its own query pattern (the request's mask, widened to the stack). Rows
  [q_i, Q) are dummy tokens (the mask id at position 0) that see only their own key, so no row is fully masked (a
  fully masked bool SDPA row gives NaN) and no real row sees them; their logits and keys are dropped.
* **Rows run and read.** Each request is planned as the single forward plans it (read_rows.py `plan_rows`: on the
  CPU without the query rows nothing read or kept needs), and the head runs once, over the read rows of every
  sequence gathered from the padded batch: no logit is computed for a dummy row or a row nobody reads.
* **After the forward.** The first `keep_i` new keys of each sequence are appended to its own cache (nothing else
  of the stack is kept); its logits are its read rows, in the order `last` and `rows` ask for them.

A masked column contributes an exact zero to its row's softmax, so a row's value differs from the single forward's
only by the kernels' summation order over a different shape (float round-off: ~1e-16 relative in float64).
"""
from __future__ import annotations

from typing import Any, Optional

import torch
from transformers import DynamicCache

from .base import ForwardRequest, QueryMask
from .masks import causal_pattern, to_additive
from .read_rows import head_logits, may_cut, plan_rows


def request_mask(req: ForwardRequest, cache_len: int) -> tuple[Optional[torch.Tensor], torch.Tensor]:
    """(cache part [q, cache_len] or None when all-True, query pattern [q, q]) of a request's attention."""
    q, device = int(req.input_ids.shape[0]), req.input_ids.device
    att = req.attention
    if isinstance(att, QueryMask):
        if tuple(att.pattern.shape) != (q, q):
            raise ValueError(f"query mask shape {tuple(att.pattern.shape)} != {(q, q)}")
        return None, att.pattern
    if isinstance(att, str):
        if att == "full":
            return None, torch.ones(q, q, dtype=torch.bool, device=device)
        if att == "causal":
            return None, causal_pattern(q, device)
        raise ValueError(f"attention: {att!r} is not 'causal', 'full', a mask or a QueryMask")
    if tuple(att.shape) != (q, cache_len + q):
        raise ValueError(f"attention mask shape {tuple(att.shape)} != {(q, cache_len + q)}")
    return (att[:, :cache_len] if cache_len else None), att[:, cache_len:]


def batch_mask(requests: list[ForwardRequest], lengths: list[int], Q: int, C: int,
               device: torch.device) -> torch.Tensor:
    """The [N, 1, Q, C + Q] bool mask of the padded batch (module docstring)."""
    n = len(requests)
    mask = torch.zeros(n, Q, C + Q, dtype=torch.bool, device=device)
    for i, (req, c) in enumerate(zip(requests, lengths)):
        q = int(req.input_ids.shape[0])
        cache_part, pattern = request_mask(req, c)
        if c:
            mask[i, :q, :c] = True if cache_part is None else cache_part
        mask[i, :q, C : C + q] = pattern
        pad = torch.arange(q, Q, device=device)
        mask[i, pad, C + pad] = True  # a dummy row sees its own key only
    return mask[:, None]


def stacked_cache(model: Any, caches: list[Any], lengths: list[int], C: int) -> Any:
    """A fresh DynamicCache holding every sequence's cache in [0, c_i) of a zero-padded [N, H, C, D] stack."""
    batch = DynamicCache(config=model.config)
    if C == 0:
        return batch
    ref = next(c for c, n in zip(caches, lengths) if n)
    for layer, ref_layer in enumerate(ref.layers):
        k0, v0 = ref_layer.keys, ref_layer.values
        keys = k0.new_zeros((len(caches), k0.shape[1], C, k0.shape[3]))
        values = v0.new_zeros((len(caches), v0.shape[1], C, v0.shape[3]))
        for i, (cache, n) in enumerate(zip(caches, lengths)):
            if n:
                keys[i, :, :n] = cache.layers[layer].keys[0]
                values[i, :, :n] = cache.layers[layer].values[0]
        target = batch.layers[layer]
        target.lazy_initialization(keys, values)
        target.keys, target.values = keys, values  # as update() would leave them, without its copy
    return batch


def forward_batch(model: Any, attn_implementation: str, mask_id: int, dtype: torch.dtype,
                  requests: list[ForwardRequest]) -> list[torch.Tensor]:
    """Run `requests` as one forward of `model` (a transformers causal LM); each request's float32 logits, as
    `HFModel.forward` would return them (its read rows), and each request's `keep` new positions appended to its
    own cache. The logits are views of one [rows read, V] tensor."""
    device = requests[0].input_ids.device
    lengths = [int(r.cache.get_seq_length()) for r in requests]
    cut = may_cut(model)
    plans = [plan_rows(r, c, cut) for r, c in zip(requests, lengths)]
    run = [p.request for p in plans]
    qs = [int(r.input_ids.shape[0]) for r in run]
    Q, C = max(qs), max(lengths)
    ids = torch.full((len(run), Q), mask_id, dtype=torch.long, device=device)
    pos = torch.zeros((len(run), Q), dtype=torch.long, device=device)
    for i, (r, q) in enumerate(zip(run, qs)):
        ids[i, :q] = r.input_ids
        pos[i, :q] = r.positions
    mask = batch_mask(run, lengths, Q, C, device)
    if attn_implementation == "eager":
        mask = to_additive(mask, dtype)
    cache = stacked_cache(model, [r.cache for r in requests], lengths, C)
    reads = [torch.arange(q, device=device) if p.reads is None else p.reads for p, q in zip(plans, qs)]
    logits = head_logits(model, reads, ids, pos, mask, cache).float()
    for i, r in enumerate(requests):
        if r.keep > 0:
            for layer, stacked in enumerate(cache.layers):
                r.cache.update(stacked.keys[i : i + 1, :, C : C + r.keep], stacked.values[i : i + 1, :, C : C + r.keep],
                               layer)
    return list(logits.split([int(at.shape[0]) for at in reads]))
