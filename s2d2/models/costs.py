"""Measured forward costs: what one forward of each kind costs on this device and model, by query count.

Routing in forwards (the penalty c of `s = K̂ − c`, UCB's "a verify costs 2") treats every forward alike, but a 2L
verify queries 2B tokens and on a CPU it costs more than a draft of B. The cost model measures instead:

* **Calibrated during warm-up** (`calibrate`): a few timed forwards of every kind a configuration uses (draft,
  verify, commit, commit+draft) at a few query counts, on a scratch cache, each shape run once untimed first.
* **Refined online** (`CostModel.observe_forwards`): every decode's own per-forward timings (the recorder's) join
  the samples, when they are exact (always on a CPU; on CUDA only with a synchronizing, detailed trace).
* **Robust to noise.** Each (kind, query count) keeps its last WINDOW timings and contributes their median; a kind's
  cost is a Theil–Sen line through those medians (slope = the median of the pairwise slopes, intercept = the median
  residual), so one slow forward from a busy machine moves nothing.

`CostModel.table()` freezes the fits into a `CostTable` (s2d2/trace/records.py): a decode routes with that frozen
table, the trace header stores it, and every routing decision is a pure function of it and the recorded inputs, so
what-if and replay stay exact. The cache length is not a variable of the fit: at the shapes a decode uses it moves a
forward's cost far less than the query count does (a 2L verify's attention and MLP rows are what cost).

On the static backend a forward of q queries runs at `padded_length(q)` rows, so samples and look-ups use the
padded count (`CostTable.padded_up_to`).
"""
from __future__ import annotations

import statistics
import time
from collections import deque
from typing import Any, Iterable, Optional

import torch

from ..trace.records import FORWARD_KINDS, CostTable, ForwardCost
from .masks import draft_query, fused_draft_query, verify_2l_query
from .static_cache import StaticCacheHandle

WINDOW = 64  # timings kept per (kind, query count)
CALIBRATION_REPS = 5  # timed forwards per shape during warm-up (after one untimed), round-robin over shapes

__all__ = ["CostModel", "theil_sen", "calibrate", "calibration_shapes", "WINDOW"]


def theil_sen(points: list[tuple[int, float]]) -> tuple[float, float]:
    """(intercept, slope) of a robust line through (x, y) points: the median pairwise slope (>= 0: a forward never
    gets cheaper with more queries) and the median residual (>= 0). One point: a flat line through it."""
    xs = sorted({x for x, _ in points})
    if len(xs) < 2:
        return max(0.0, statistics.median(y for _, y in points)), 0.0
    slopes = [(y2 - y1) / (x2 - x1) for i, (x1, y1) in enumerate(points) for x2, y2 in points[i + 1:] if x2 != x1]
    slope = max(0.0, statistics.median(slopes))
    return max(0.0, statistics.median(y - slope * x for x, y in points)), slope


class CostModel:
    """Per-kind timing samples and their robust linear fits in the query count."""

    def __init__(self, padded_up_to: int = 0, window: int = WINDOW) -> None:
        self.padded_up_to = int(padded_up_to)
        self.window = window
        self._samples: dict[tuple[str, int], deque[float]] = {}

    def rows(self, queries: int) -> int:
        """The rows a forward of `queries` queries really runs (padded on the static backend)."""
        q = int(queries)
        return 1 << max(0, q - 1).bit_length() if 0 < q <= self.padded_up_to else q

    def observe(self, kind: str, queries: int, seconds: float) -> None:
        if kind not in FORWARD_KINDS or queries <= 0 or not 0 < seconds < 3600:
            return
        key = (kind, self.rows(queries))
        if key not in self._samples:
            self._samples[key] = deque(maxlen=self.window)
        self._samples[key].append(float(seconds))

    def observe_forwards(self, forwards: Iterable[Any]) -> None:
        """Add a decode's forward records (anything with kind, query_tokens, wall_s)."""
        for f in forwards:
            self.observe(f.kind, f.query_tokens, f.wall_s)

    def samples(self, kind: str) -> int:
        return sum(len(v) for (k, _), v in self._samples.items() if k == kind)

    def shapes(self, kind: str) -> set[int]:
        """The (padded) query counts of `kind` with at least one timing."""
        return {q for (k, q), v in self._samples.items() if k == kind and v}

    def fit(self, kind: str) -> Optional[ForwardCost]:
        """The robust line of one kind (None without timings)."""
        points = [(q, statistics.median(v)) for (k, q), v in sorted(self._samples.items()) if k == kind and v]
        if not points:
            return None
        base, slope = theil_sen(points)
        return ForwardCost(kind, min(base, 3600.0), min(slope, 3600.0), self.samples(kind))

    def table(self) -> CostTable:
        """The current fits, frozen (what a decode routes with and its trace records)."""
        fits = [f for f in (self.fit(k) for k in FORWARD_KINDS) if f is not None]
        if not fits:
            return CostTable.nominal()
        return CostTable("measured", self.padded_up_to, fits)

    def cost(self, kind: str, queries: int) -> float:
        """Seconds of one forward of `kind` with `queries` query tokens, from the current fits."""
        return self.table().cost(kind, queries)


def calibration_shapes(block_lengths: Iterable[int], shifted: bool) -> dict[str, list[int]]:
    """The (kind, query count) shapes the warm-up times for these block lengths: a draft of the whole block and of
    its undecided halves and quarters (kv_reuse drafts shrink), the verifier of each, a commit of the whole block and
    of a short tail, and a fused commit+draft."""
    shapes: dict[str, set[int]] = {k: set() for k in ("draft", "verify", "commit", "commit+draft")}
    for B in {int(b) for b in block_lengths if int(b) > 1}:
        parts = sorted({B, max(1, B // 2), max(1, B // 4)})
        shapes["draft"].update(parts)
        shapes["verify"].update(p if shifted else 2 * p for p in parts)
        shapes["commit"].update({B, max(1, B // 4)})
        shapes["commit+draft"].update({B + max(1, B // 4), 2 * B})
    names = {"verify": "verify_causal" if shifted else "verify_2l"}
    return {names.get(k, k): sorted(v) for k, v in shapes.items() if v}


def calibrate(model: Any, block_lengths: Iterable[int], reps: int = CALIBRATION_REPS) -> float:
    """Time `reps` forwards of every calibration shape after a short causal prefix (one untimed call first) into
    `model.costs`; seconds spent. Needs the model's forward, new_cache and spec (an HFModel)."""
    t0 = time.perf_counter()
    shifted = model.spec.alignment == "shifted"
    shapes = calibration_shapes(block_lengths, shifted)
    if not shapes:
        return 0.0
    dev, mask_id = model.device, model.spec.mask_id
    prefix = min(2 * max(max(v) for v in shapes.values()), 64)
    cache = model.new_cache()
    if getattr(model, "static", None) is not None and not isinstance(cache, StaticCacheHandle):
        return 0.0  # a decode holds the static storage: its dynamic fallback would time the wrong backend
    ids = (torch.arange(prefix, device=dev) * 7 + 11) % max(1, mask_id)
    model.forward(cache, ids, torch.arange(prefix, device=dev), "causal", keep=prefix)
    calls = [(kind, q, _forward_of(model, cache, kind, q, prefix)) for kind, counts in shapes.items() for q in counts]
    for _, _, call in calls:  # first-call costs (allocations, lazy inits) are not what a decode pays
        call()
    for _ in range(reps):  # round-robin: a burst of load on a shared machine hits every shape alike
        for kind, q, call in calls:
            _sync(dev)
            start = time.perf_counter()
            call()
            _sync(dev)
            model.costs.observe(kind, q, time.perf_counter() - start)
    calls.clear()  # the closures hold the cache: drop them with it (a static lease ends with its handle)
    del cache
    return time.perf_counter() - t0


def _forward_of(model: Any, cache: Any, kind: str, q: int, c: int) -> Any:
    """One forward of `kind` with q queries after c cached positions, shaped as the decoder shapes it; anything
    it stores is cropped again, so the cache keeps its length."""
    dev, mask_id = model.device, model.spec.mask_id
    ids = torch.full((q,), mask_id, dtype=torch.long, device=dev)
    ids[: q // 2] = (torch.arange(q // 2, device=dev) * 5 + 3) % max(1, mask_id)
    pos = torch.arange(c, c + q, device=dev)
    if kind == "draft":
        return lambda: model.forward(cache, ids, pos, draft_query(q, 0, dev), keep=0)
    if kind == "verify_2l":
        half = q // 2
        return lambda: model.forward(cache, ids, torch.cat([pos[:half], pos[:half]]), verify_2l_query(half, dev),
                                     keep=0, last=half)
    if kind in ("commit", "verify_causal"):
        keep = q if kind == "commit" else 0
        return lambda: (model.forward(cache, ids, pos, "causal", keep=keep, last=1), _crop(cache, keep))
    tail = q // 3 if q > 2 else 1  # commit+draft: [tail | block], tail kept
    mask = fused_draft_query(tail, q - tail, True, 0, dev)
    return lambda: (model.forward(cache, ids, pos, mask, keep=tail), _crop(cache, tail))


def _crop(cache: Any, n: int) -> None:
    if n > 0:
        cache.crop(-n)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
