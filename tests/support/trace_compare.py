"""Two plain-data traces compared the way batched decodes are checked: ints, strings and bools exactly, floats to a
stated tolerance, wall times and the creation stamp left out (tests/support/golden_cases.py `stable`)."""
from __future__ import annotations

import math
from typing import Any, Optional

from tests.support.golden_cases import stable

# float64: a shared forward differs from a lone one by summation order only (~1e-16 relative)
RTOL, ATOL = 1e-9, 1e-12


def trace_mismatch(a: Any, b: Any, path: str = "trace") -> Optional[str]:
    """Where two traces (Trace objects or their dicts) differ, or None when they agree."""
    if hasattr(a, "to_dict"):
        a, b = stable(a.to_dict()), stable(b.to_dict())
    if isinstance(a, float) and isinstance(b, float):
        same = (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=RTOL, abs_tol=ATOL)
        return None if same else f"{path}: {a!r} != {b!r}"
    if type(a) is not type(b):
        return f"{path}: {a!r:.80} != {b!r:.80}"
    if isinstance(a, dict):
        for k in sorted(set(a) | set(b)):
            got = trace_mismatch(a.get(k, "<missing>"), b.get(k, "<missing>"), f"{path}.{k}")
            if got:
                return got
        return None
    if isinstance(a, list):
        if len(a) != len(b):
            return f"{path}: length {len(a)} != {len(b)}"
        return next((m for i, (x, y) in enumerate(zip(a, b)) if (m := trace_mismatch(x, y, f"{path}[{i}]"))), None)
    return None if a == b else f"{path}: {a!r:.80} != {b!r:.80}"
