"""Wall-time figures that can be compared across lanes, and how far to trust them.

A single decode's wall time on a shared machine is noise: the first lane pays the model's warm-up, and a busy
moment lands on whichever lane runs then (one Compare run printed 22.9× and the next 0.076× for the same lanes).
So lanes are timed in interleaved rounds after a warm-up round that is not counted (lane 1, 2, 3, then 1, 2, 3
again: a slow spell hits every lane alike), each lane's figure is the median of its timed runs, and its noise is
the spread of those runs. A ratio of two lanes is trusted only when both were timed at least twice and its noise
is at most MAX_NOISE; otherwise it is not shown as a number.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Optional

MIN_RUNS = 2  # timed runs a lane needs before its spread (its noise) means anything
MAX_NOISE = 0.25  # a wall ratio whose relative noise exceeds this is reported as "too noisy", not as a number


@dataclass(frozen=True)
class WallStats:
    """The timed runs of one lane (seconds, warm-up excluded)."""

    runs: tuple[float, ...]

    @property
    def median(self) -> Optional[float]:
        return statistics.median(self.runs) if self.runs else None

    @property
    def noise(self) -> Optional[float]:
        """Relative half-range of the runs, (max − min) / (2 · median); None with fewer than MIN_RUNS runs."""
        m = self.median
        if len(self.runs) < MIN_RUNS or not m:
            return None
        return (max(self.runs) - min(self.runs)) / (2 * m)


def ratio_noise(a: WallStats, b: WallStats) -> Optional[float]:
    """Relative noise of median(a) / median(b): the two lanes' noises added (None when either is unknown)."""
    if a.noise is None or b.noise is None:
        return None
    return a.noise + b.noise


def trusted(noise: Optional[float]) -> bool:
    return noise is not None and noise <= MAX_NOISE


def median_index(values: list[float]) -> int:
    """Index of the run whose value is the (lower) median: the run a view shows as "the median run"."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    return order[(len(order) - 1) // 2]
