"""Small-sample statistics for sweep accuracies: Wilson score intervals and McNemar's exact paired test.

At n = 200 one point of accuracy is two problems, so a bare "97 % vs 96.5 %" says little. Every accuracy gets a
95 % Wilson interval (good coverage near 0 and 1, where the normal "p ± 1.96·se" interval breaks down), and two
decoders run on the same problems are compared with McNemar's exact test, which looks only at the problems where
they disagree. Pure Python (math.comb, exact big-integer arithmetic), no scipy.
"""
from __future__ import annotations

import math
from typing import Optional

Z95 = 1.959963984540054  # the standard normal's 97.5th percentile


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion (Wilson 1927; Newcombe 1998, method 3)."""
    if n <= 0 or not 0 <= successes <= n:
        raise ValueError(f"wilson_interval: need 0 <= successes <= n and n > 0, got {successes}/{n}")
    p, z2 = successes / n, z * z
    denom = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
    # The bounds are exactly 0 / 1 when p is; clamp the float rounding either side.
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return low, high


def mcnemar_exact(only_a: int, only_b: int) -> float:
    """Two-sided exact McNemar p-value from the discordant counts.

    `only_a`: problems decoder A got right and B wrong; `only_b`: the reverse. Under "equally accurate" each
    discordant problem is a fair coin, so p = min(1, 2·P(X <= min(only_a, only_b))), X ~ Binomial(only_a + only_b, ½).
    """
    if only_a < 0 or only_b < 0:
        raise ValueError(f"mcnemar_exact: counts must be >= 0, got {only_a}, {only_b}")
    m = only_a + only_b
    if m == 0:
        return 1.0
    tail = sum(math.comb(m, k) for k in range(min(only_a, only_b) + 1))
    return min(1.0, 2 * tail / 2**m)  # exact integers; int / int is correctly rounded, no underflow to NaN


def discordant(correct_a: str, correct_b: str) -> tuple[int, int]:
    """(right only in A, right only in B) from two per-problem strings of '0'/'1' over the same problems."""
    if len(correct_a) != len(correct_b):
        raise ValueError(f"discordant: the two cells cover {len(correct_a)} and {len(correct_b)} problems")
    only_a = sum(a == "1" and b == "0" for a, b in zip(correct_a, correct_b))
    only_b = sum(a == "0" and b == "1" for a, b in zip(correct_a, correct_b))
    return only_a, only_b


def paired_p(correct_a: Optional[str], correct_b: Optional[str]) -> Optional[float]:
    """McNemar's exact p for two cells' per-problem results; None when either is missing or they differ in n."""
    if not correct_a or not correct_b or len(correct_a) != len(correct_b):
        return None
    return mcnemar_exact(*discordant(correct_a, correct_b))
