"""Same tokens, same NFE, same trace: every golden decode (tests/support/golden_cases.py, recorded before the device-side
step) is reproduced, wall times aside: tokens, positions, NFE, forward kinds and query counts, every decision and its
kind, accept / reject / resample outcomes exactly, recorded floats to the one tolerance of tests/support/recorded_floats.py
(they differ in the last bits between CPU kernel paths); a lean run records the detailed trace's skeleton. No
recorded decision of a golden case lies within that tolerance of its threshold (tests/support/golden_margins.py), so the
tolerance cannot hide a flipped decision."""
from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.golden_cases import CASES, bundled_available, load_golden, run_case, stable
from tests.support.golden_margins import Decision, decisions
from tests.support.recorded_floats import ATOL, RTOL, first_disagreement


@pytest.fixture(scope="module")
def golden() -> dict[str, Any]:
    return load_golden()


def lean_view(trace: dict[str, Any]) -> dict[str, Any]:
    """What `detailed=False` keeps of a detailed trace: no per-mask drafts, verification rows or token strings."""
    d = json.loads(json.dumps(trace))
    d["detailed"] = False
    d["header"]["prompt_tokens"] = []
    d["footer"]["output_tokens"] = []
    for s in d["steps"]:
        s["drafts"] = []
        for c in s["commits"]:
            c["text"] = ""
        for e in s.get("edits", []):
            e["old_text"] = e["new_text"] = ""
        if s["verification"] is not None:
            s["verification"]["positions"] = []
            s["verification"]["resampled_text"] = ""
    return d


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_golden_trace(case, golden) -> None:
    if case[1] in ("bundled", "llada2") and not bundled_available(case[1]):
        pytest.skip("a bundled model is not trained yet")
    want = golden[case[0]]
    got = stable(run_case(case, detailed=True).trace.to_dict())
    diff = first_disagreement(got, want)
    assert diff is None, diff
    lean = stable(run_case(case, detailed=False).trace.to_dict())
    diff = first_disagreement(lean, lean_view(want))
    assert diff is None, diff


@pytest.mark.parametrize("name", sorted(load_golden()))
def test_golden_decisions_lie_beyond_the_tolerance(name, golden) -> None:
    """Each recorded decision compared two floats further apart than the tolerance lets either move."""
    # a case may record none (diff-seq-sampled: sequential order, sampled drafts, no verifier)
    close = [(d.where, d.value, d.threshold) for d in decisions(golden[name]) if not d.safe]
    assert not close, f"{name}: within rel {RTOL}, abs {ATOL} of the threshold: {close[:5]}"


def test_the_margin_check_and_the_comparison_can_fail() -> None:
    """A decision on the edge is reported, and so is a float beyond the tolerance or a flipped token."""
    assert not Decision("u vs r", 0.5, 0.5 + 2e-6).safe and Decision("u vs r", 0.5, 0.5 + 1e-3).safe
    assert first_disagreement({"u": 0.5}, {"u": 0.5 + 1e-7}) is None
    assert "beyond" in first_disagreement({"u": 0.5}, {"u": 0.5001})
    assert first_disagreement({"token": 3}, {"token": 4}) == "trace.token: 3 != 4"
    assert first_disagreement({"how": "accepted"}, {"how": "resampled"}) is not None
    assert first_disagreement([1.0], [1]) is not None  # a float is never an int
    edge = {"header": {"config": {"temperature": 1.0, "remasking": "sequential", "always_check_high_conf": False,
                                  "confidence_threshold": 0.9, "ratio_threshold": None}},
            "steps": [{"drafts": [], "commits": [], "decision": None,
                       "verification": {"mode": "paper", "first_reject": None,
                                        "positions": [{"u": 0.3, "ratio": 0.3000001}]}}]}
    assert [d.safe for d in decisions(edge)] == [False]
    assert sum(1 for t in load_golden().values() for _ in decisions(t)) > 3000  # the goldens' decisions are found
