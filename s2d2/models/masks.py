"""Attention masks (docs/algorithm.md, 'The 2L verifier', 'AR-like caching',
'Where we deviate from the reference code'). Bool, True = attend.

Every mask of the decoder sees the whole cache, so each is a query pattern `[q, q]` behind all-True cache columns.
The `*_query` functions give that pattern as a `QueryMask` (what the decoder passes to a forward: no
`[q, cache_len + q]` mask is built on the host). A pattern depends only on its shape arguments, so it is built once
per shape and device and shared; nothing ever writes to it ("never mutate a shared mask", docs/algorithm.md,
'AR-like caching': the backends copy or widen it). The `*_mask` functions give the full `[queries, cache_len + queries]`
mask (cache columns first), a fresh tensor on every call.
"""
from __future__ import annotations

from functools import lru_cache

import torch

from .base import QueryMask


def widen(pattern: torch.Tensor, cache_len: int) -> torch.Tensor:
    """The full mask of a query pattern: all-True cache columns, then the pattern (a new tensor)."""
    q = pattern.shape[0]
    return torch.cat([torch.ones(q, cache_len, dtype=torch.bool, device=pattern.device), pattern], dim=1)


def _ij(q: int, device: torch.device | str) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.arange(q, device=device)[:, None], torch.arange(q, device=device)[None, :]


def causal_pattern(q: int, device: torch.device | str = "cpu") -> torch.Tensor:
    i, j = _ij(q, device)
    return j <= i


def draft_pattern(block: int, causal_prefix: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """Block-bidirectional, except the first `causal_prefix` rows (draft_ver) are causal."""
    i, j = _ij(block, device)
    return (j <= i) | (i >= causal_prefix)


def verify_2l_pattern(length: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """The 2L layout (docs/algorithm.md, 'The 2L verifier') over [first half | second half]: first-half row i sees
    first-half j <= i; second-half row L+i sees first-half j < i and itself."""
    i, j = _ij(length, device)
    none = torch.zeros(length, length, dtype=torch.bool, device=device)
    return torch.cat([torch.cat([j <= i, none], dim=1), torch.cat([j < i, j == i], dim=1)], dim=0)


def verify_2l_span_pattern(first: int, span: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """The trimmed 2L layout (`trim_verify`, beyond the paper) over [first half | span MASKs]: the first half is
    causal over `first` positions whose last `span` are the span; span row t (the MASK at the span's position t)
    sees the first half before that position and itself. `span == first` is `verify_2l_pattern(first)`."""
    i, j = _ij(first, device)
    t = torch.arange(span, device=device)[:, None]
    top = torch.cat([j <= i, torch.zeros(first, span, dtype=torch.bool, device=device)], dim=1)
    bottom = torch.cat([j[:, :first].expand(span, first) < first - span + t,
                        torch.eye(span, dtype=torch.bool, device=device)], dim=1)
    return torch.cat([top, bottom], dim=0)


def fused_draft_pattern(tail: int, block: int, causal_tail: bool = True, causal_prefix: int = 0,
                        device: torch.device | str = "cpu") -> torch.Tensor:
    """A commit fused into the next draft (beyond the paper), over [tail | block].

    Tail rows (the finished block's uncached positions) see the tail, causally with cache_ver (else the whole tail,
    as a block-bidirectional commit), never the new block: their KV is exactly what a separate commit would store.
    Block rows see the whole tail and the block as draft rows (`draft_pattern`).
    """
    tail_rows = causal_pattern(tail, device) if causal_tail else torch.ones(tail, tail, dtype=torch.bool, device=device)
    top = torch.cat([tail_rows, torch.zeros(tail, block, dtype=torch.bool, device=device)], dim=1)
    rows = torch.cat([torch.ones(block, tail, dtype=torch.bool, device=device),
                      draft_pattern(block, causal_prefix, device)], dim=1)
    return torch.cat([top, rows], dim=0)


def segments_pattern(segments: tuple[int, ...], device: torch.device | str = "cpu") -> torch.Tensor:
    """Block-causal over consecutive segments of the given lengths: a row sees every column of its own segment and
    of the segments before it. D2F's pipeline forward is this over [blocks to cache | blocks in flight], and its
    first forward over [prompt | first block] (the prompt is one bidirectional segment)."""
    ar = torch.arange(sum(segments), device=device)
    ids = torch.zeros_like(ar)
    edge = 0
    for n in segments[:-1]:  # segment id = how many segment ends lie at or before the position (no host upload)
        edge += n
        ids += ar >= edge
    return ids[:, None] >= ids[None, :]


# -- query masks for the decoder (cached per shape and device) ---------------------------------------------------

@lru_cache(maxsize=1024)
def _shared(kind: str, args: tuple[int, ...], device: str) -> torch.Tensor:
    build = {"draft": draft_pattern, "2l": verify_2l_pattern, "fused": fused_draft_pattern,
             "2l-span": verify_2l_span_pattern,
             "segments": lambda *a, device: segments_pattern(tuple(a), device)}[kind]
    with torch.inference_mode(False):  # a normal tensor even when first built inside inference mode
        return build(*args, device=device)


@lru_cache(maxsize=1024)
def _query(kind: str, args: tuple[int, ...], device: torch.device | str) -> QueryMask:
    """The shared QueryMask of a pattern (frozen, so one object serves every forward of its shape: a batch step
    asks for one per row, and `str(device)` plus a new object per row was host time per row)."""
    return QueryMask(_shared(kind, args, str(device)))


def draft_query(block: int, causal_prefix: int, device: torch.device | str) -> QueryMask:
    return _query("draft", (block, causal_prefix), device)


def verify_2l_query(length: int, device: torch.device | str) -> QueryMask:
    return _query("2l", (length,), device)


def verify_2l_span_query(first: int, span: int, device: torch.device | str) -> QueryMask:
    return _query("2l-span", (first, span), device)


def segments_query(segments: tuple[int, ...], device: torch.device | str) -> QueryMask:
    return _query("segments", tuple(int(n) for n in segments), device)


def fused_draft_query(tail: int, block: int, causal_tail: bool, causal_prefix: int,
                      device: torch.device | str) -> QueryMask:
    return _query("fused", (tail, block, int(causal_tail), causal_prefix), device)


# -- full masks [q, cache_len + q] -------------------------------------------------------------------------------

def causal_mask(cache_len: int, q: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """Row i sees the whole cache and query columns j <= i."""
    return widen(causal_pattern(q, device), cache_len)


def full_mask(cache_len: int, q: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """Every row sees the whole cache and every query token (block-bidirectional)."""
    return torch.ones(q, cache_len + q, dtype=torch.bool, device=device)


def block_causal_mask(
    q: int, block: int, start: int = 0, device: torch.device | str = "cpu", cache_len: int = 0
) -> torch.Tensor:
    """M[i, j] = 1 iff floor((start+i)/B) >= floor((start+j)/B), for a prefill of q tokens at absolute `start`.

    Absolute block ids make it also the Fast-dLLM rule floor(q/bs) >= floor(k/bs) (invariant 11, docs/algorithm.md,
    'Invariants'). With `cache_len` > 0, all-True cache columns come first (cached keys precede `start`, so the rule
    always admits them).
    """
    ids = (torch.arange(q, device=device) + start) // block
    rule = ids[:, None] >= ids[None, :]
    return rule if cache_len == 0 else widen(rule, cache_len)


def draft_mask(cache_len: int, block: int, causal_prefix: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """Draft rows: cache + block-bidirectional, except the first `causal_prefix` rows (draft_ver) are causal."""
    return widen(draft_pattern(block, causal_prefix, device), cache_len)


def fused_draft_mask(cache_len: int, tail: int, block: int, causal_tail: bool = True, causal_prefix: int = 0,
                     device: torch.device | str = "cpu") -> torch.Tensor:
    """`fused_draft_pattern` behind the cache columns: [cache | tail | block]."""
    return widen(fused_draft_pattern(tail, block, causal_tail, causal_prefix, device), cache_len)


def verify_2l_mask(cache_len: int, length: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """The 2L layout (docs/algorithm.md, 'The 2L verifier'): columns [cache | first half | second half]
    (`verify_2l_pattern`)."""
    return widen(verify_2l_pattern(length, device), cache_len)


def to_additive(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Bool (True = attend) -> additive bias for eager attention: 0 where attended, finfo.min elsewhere."""
    bias = torch.zeros(mask.shape, dtype=dtype, device=mask.device)
    return bias.masked_fill(~mask, torch.finfo(dtype).min)
