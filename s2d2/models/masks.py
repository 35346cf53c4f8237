"""Attention masks, built fresh for every call and never mutated (spec §3.4, §3.8, §9).

All masks are bool with True = attend, shape [queries, cache_len + queries]; the columns are the cached
positions followed by the query tokens.
"""
from __future__ import annotations

import torch


def causal_mask(cache_len: int, q: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """Row i sees the whole cache and query columns j <= i."""
    rows = torch.arange(q, device=device)[:, None]
    cols = torch.arange(q, device=device)[None, :]
    return torch.cat([torch.ones(q, cache_len, dtype=torch.bool, device=device), cols <= rows], dim=1)


def full_mask(cache_len: int, q: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """Every row sees the whole cache and every query token (block-bidirectional)."""
    return torch.ones(q, cache_len + q, dtype=torch.bool, device=device)


def block_causal_mask(
    q: int, block: int, start: int = 0, device: torch.device | str = "cpu", cache_len: int = 0
) -> torch.Tensor:
    """M[i, j] = 1 iff floor((start+i)/B) >= floor((start+j)/B), for a prefill of q tokens at absolute `start`.

    Absolute block ids make it also the Fast-dLLM rule floor(q/bs) >= floor(k/bs) (§8.11). With `cache_len`
    > 0, all-True cache columns come first (cached keys precede `start`, so the rule always admits them).
    """
    ids = (torch.arange(q, device=device) + start) // block
    rule = ids[:, None] >= ids[None, :]
    if cache_len == 0:
        return rule
    return torch.cat([torch.ones(q, cache_len, dtype=torch.bool, device=device), rule], dim=1)


def draft_mask(cache_len: int, block: int, causal_prefix: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """Draft rows: cache + block-bidirectional, except the first `causal_prefix` rows (draft_ver) are causal."""
    mask = full_mask(cache_len, block, device)
    if causal_prefix > 0:
        rows = torch.arange(causal_prefix, device=device)[:, None]
        cols = torch.arange(block, device=device)[None, :]
        mask[:causal_prefix, cache_len:] = cols <= rows
    return mask


def fused_draft_mask(cache_len: int, tail: int, block: int, causal_tail: bool = True, causal_prefix: int = 0,
                     device: torch.device | str = "cpu") -> torch.Tensor:
    """A commit fused into the next draft (beyond the paper): columns [cache | tail | block].

    Tail rows (the finished block's uncached positions) see the cache and the tail, causally with cache_ver (else
    the whole tail, as a block-bidirectional commit), never the new block: their KV is exactly what a separate
    commit would store. Block rows see the cache, the whole tail and the block as draft rows (`draft_mask`).
    """
    top = torch.cat([causal_mask(cache_len, tail, device) if causal_tail else full_mask(cache_len, tail, device),
                     torch.zeros(tail, block, dtype=torch.bool, device=device)], dim=1)
    rows = draft_mask(cache_len + tail, block, causal_prefix, device)
    return torch.cat([top, rows], dim=0)


def verify_2l_mask(cache_len: int, length: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """The 2L layout (§3.4): columns [cache | first half | second half].

    First-half row i: cache, first-half j <= i. Second-half row L+i: cache, first-half j < i, and itself.
    """
    n = length
    i = torch.arange(n, device=device)[:, None]
    j = torch.arange(n, device=device)[None, :]
    cache = torch.ones(2 * n, cache_len, dtype=torch.bool, device=device)
    first = torch.cat([j <= i, torch.zeros(n, n, dtype=torch.bool, device=device)], dim=1)
    second = torch.cat([j < i, j == i], dim=1)
    return torch.cat([cache, torch.cat([first, second], dim=0)], dim=1)


def to_additive(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Bool (True = attend) -> additive bias for eager attention: 0 where attended, finfo.min elsewhere."""
    bias = torch.zeros(mask.shape, dtype=dtype, device=mask.device)
    return bias.masked_fill(~mask, torch.finfo(dtype).min)
