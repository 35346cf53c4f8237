"""KV reuse — beyond the paper (`kv_reuse`, off in every paper preset; needs `cache_ver` and `draft_ver`).

With `cache_ver` the cache holds exactly the causal KV of every committed position, and with `draft_ver` the
block's decoded prefix is causal in every draft. Any causal row of a forward whose input token is final therefore
computes exactly the KV a causal commit would store:

* the first half of the 2L verifier (and the causal verifier of right-shifted models) is `[cache | x̃]` causal, so
  its row i is the causal KV of x̃_i. After the acceptance test we keep the rows [ctx.cached, j), where j ends the
  longest block prefix whose tokens equal what the verifier read (the accepted prefix: not the resampled token,
  whose verifier input was the rejected draft), and crop the rest (a DynamicCache crops from the end; the first
  half is appended first);
* a draft's causal decoded-prefix rows (draft_ver) are kept the same way.

Later forwards of the block then query only positions [ctx.cached, B) over cache c + cached: their logits at the
mask positions equal the full forward's in exact arithmetic (tested ≤ 1e-10 in float64), and the commit processes
only the block's uncached tail (none at all when the last verify accepted the block's end).

Right-shifted models read the logit that drafts position i from row i-1, so one row before the first undecided
position (and the block's last row, whose logit opens the next block) always stays uncached.

The cache object needs `get_seq_length()` and `crop(-n)`; a DynamicCache has both.
"""
from __future__ import annotations

from .context import StepContext


def kept_prefix_rows(ctx: StepContext, prefix: int) -> int:
    """How many of a draft's leading causal rows (decoded, final tokens) to keep in the cache."""
    if not ctx.cfg.kv_reuse:
        return 0
    return prefix if ctx.aligned else max(0, prefix - 1)


def remember_verified(ctx: StepContext, end: int) -> None:
    """Note that the verifier read the block's [0, end); its rows [ctx.cached, end) are in the cache until settled."""
    if ctx.cfg.kv_reuse:
        ctx.seen_end = end


def settle_verified_rows(ctx: StepContext, j: int) -> None:
    """After the step's updates: keep the verifier rows of the prefix that still equals what it read (block positions
    [0, j), which the step computes on the host from what it decoded); crop the rest."""
    if ctx.seen_end is None:
        return
    end, k = ctx.seen_end, ctx.cached
    ctx.seen_end = None
    keep = j if ctx.aligned else j - 1  # shifted: the row before the first undecided position stays a query
    keep = max(k, min(keep, end))
    drop_rows(ctx.cache, end - keep)
    ctx.cached = keep


def drop_rows(cache: object, n: int) -> None:
    """Remove the last n cached positions."""
    if n > 0:
        cache.crop(-n)  # type: ignore[attr-defined]
