"""Percentiles of measured times, one rule for every benchmark: the value at rank floor(q * n) of the sorted
samples (p50 of [1, 2] is 2), NaN when there is no sample (printed as "nan", never a made-up 0)."""
from __future__ import annotations


def pct(values: list[float], q: float) -> float:
    """The q-quantile (0 <= q <= 1) of `values` by the rule above."""
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")
