"""Same tokens, same NFE, same trace: every golden decode (tests/support/golden_cases.py, recorded before the device-side
step) is reproduced byte for byte, wall times aside; and a lean run records exactly the detailed trace's skeleton."""
from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.golden_cases import CASES, bundled_available, load_golden, run_case, stable


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


def where_they_differ(a: Any, b: Any, path: str = "trace") -> str:
    if type(a) is not type(b):
        return f"{path}: {a!r:.80} != {b!r:.80}"
    if isinstance(a, dict):
        for k in sorted(set(a) | set(b)):
            if a.get(k, "<missing>") != b.get(k, "<missing>"):
                return where_they_differ(a.get(k, "<missing>"), b.get(k, "<missing>"), f"{path}.{k}")
    elif isinstance(a, list):
        if len(a) != len(b):
            return f"{path}: length {len(a)} != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            if x != y:
                return where_they_differ(x, y, f"{path}[{i}]")
    return f"{path}: {a!r:.80} != {b!r:.80}"


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_golden_trace(case, golden) -> None:
    if case[1] in ("bundled", "llada2") and not bundled_available(case[1]):
        pytest.skip("a bundled model is not trained yet")
    want = golden[case[0]]
    got = stable(run_case(case, detailed=True).trace.to_dict())
    assert got == want, where_they_differ(got, want)
    lean = stable(run_case(case, detailed=False).trace.to_dict())
    assert lean == lean_view(want), where_they_differ(lean, lean_view(want))
