"""The acceptance-per-position metrics (s2d2/metrics.py) equal their definition: at position i, the share of
verified drafts that accepted more than i tokens (and, conditional, of those whose span reached past i)."""
from __future__ import annotations

import pytest

from s2d2.metrics import trace_metrics
from tests.support.golden_cases import CASES, run_case


def _by_definition(trace):
    verified = [s for s in trace.steps if s.verification is not None]
    accepted = [s.verification.accepted_len for s in verified]
    spans = [s.span[1] for s in verified]
    longest = max(spans, default=0)
    plain = [sum(a > i for a in accepted) / len(verified) for i in range(longest)]
    conditional = [sum(a > i for a in accepted) / max(1, sum(s > i for s in spans)) for i in range(longest)]
    return plain, conditional


SPECULATIVE = [c for c in CASES if c[1] in ("aligned", "shifted") and c[4].get("method") == "s2d2"]


@pytest.mark.parametrize("case", SPECULATIVE, ids=[c[0] for c in SPECULATIVE])
def test_acceptance_per_position_is_its_definition(case):
    _checked(case)


def _checked(case) -> list[float]:
    trace = run_case(case).trace
    got = trace_metrics(trace)
    plain, conditional = _by_definition(trace)
    assert got["acceptance_per_position"] == plain
    assert got["conditional_acceptance_per_position"] == conditional
    return plain


def test_the_cases_cut_some_drafts_short():
    """Not only all-or-nothing acceptance: some case has a position where some drafts stopped and others went on."""
    shares = [v for case in SPECULATIVE for v in _checked(case)]
    assert any(0 < v < 1 for v in shares)
