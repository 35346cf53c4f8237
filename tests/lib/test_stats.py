"""s2d2.sweeps.stats: Wilson intervals and McNemar's exact test against published and hand-computed values."""
from __future__ import annotations

import math

import pytest

from s2d2.sweeps.stats import discordant, mcnemar_exact, paired_p, wilson_interval


@pytest.mark.parametrize("k, n, low, high", [
    # Newcombe (1998), Statistics in Medicine 17:857, Table I, method 3 (score interval without correction)
    (81, 263, 0.2553, 0.3662),
    (15, 148, 0.0624, 0.1605),
    (0, 20, 0.0, 0.1611),
    (1, 29, 0.0061, 0.1718),
    # by hand: p = 1/2, n = 10 -> centre 0.5, half-width 1.96·sqrt(0.025 + 0.0096) / 1.384
    (5, 10, 0.2366, 0.7634),
])
def test_wilson_interval_matches_published_values(k, n, low, high):
    lo, hi = wilson_interval(k, n)
    assert lo == pytest.approx(low, abs=5e-5) and hi == pytest.approx(high, abs=5e-5)


def test_wilson_interval_edges_and_symmetry():
    assert wilson_interval(0, 10)[0] == 0.0 and wilson_interval(10, 10)[1] == 1.0
    lo, hi = wilson_interval(3, 40)
    lo2, hi2 = wilson_interval(37, 40)
    assert lo == pytest.approx(1 - hi2) and hi == pytest.approx(1 - lo2)
    lo, hi = wilson_interval(194, 200)  # 97 %: asymmetric, pulled towards 1/2, inside [0, 1]
    assert lo < 0.97 < hi < 1 and 0.97 - lo > hi - 0.97
    for bad in ((1, 0), (-1, 5), (6, 5)):
        with pytest.raises(ValueError):
            wilson_interval(*bad)


@pytest.mark.parametrize("only_a, only_b, p", [
    (0, 0, 1.0),
    (5, 5, 1.0),  # an even split: no evidence either way
    (0, 5, 2 / 32),
    (1, 6, 2 * (1 + 7) / 128),  # C(7, 0) + C(7, 1)
    (2, 8, 2 * (1 + 10 + 45) / 1024),
    # Fagerland, Lydersen & Laake (2013), BMC Med Res Methodol 13:91: 1 vs 7 discordant pairs, exact p = 0.070
    (1, 7, 0.0703125),
])
def test_mcnemar_exact_small_counts(only_a, only_b, p):
    assert mcnemar_exact(only_a, only_b) == pytest.approx(p)
    assert mcnemar_exact(only_b, only_a) == pytest.approx(p)


def test_mcnemar_exact_large_counts_do_not_underflow_and_match_the_normal_limit():
    p = mcnemar_exact(600, 719)  # 1,319 discordant problems: 2**1319 is far beyond a float
    z = (719 - 600 - 1) / math.sqrt(1319)  # continuity-corrected normal approximation
    assert p == pytest.approx(math.erfc(z / math.sqrt(2)), rel=0.05)
    assert 0 < p < 0.01
    assert mcnemar_exact(0, 1319) == 0.0 and mcnemar_exact(700, 700) == 1.0
    with pytest.raises(ValueError):
        mcnemar_exact(-1, 3)


def test_paired_counts_from_per_problem_strings():
    assert discordant("1100", "1010") == (1, 1)
    assert discordant("1111", "0000") == (4, 0)
    assert paired_p("1111100000", "0000000000") == pytest.approx(2 / 32)
    assert paired_p(None, "01") is None and paired_p("011", "01") is None
    with pytest.raises(ValueError):
        discordant("1", "10")
