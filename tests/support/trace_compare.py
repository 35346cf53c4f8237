"""Two traces compared the way batched decodes are checked: ints, strings and bools exactly, floats to the float64
bound below, wall times and the creation stamp left out (tests/support/golden_cases.py `stable`). The comparison
itself is the suite's one (tests/support/recorded_floats.py `first_disagreement`), with a tighter tolerance."""
from __future__ import annotations

from typing import Any, Optional

from tests.support.golden_cases import stable
from tests.support.recorded_floats import first_disagreement

# float64: a shared forward differs from a lone one by summation order only (~1e-16 relative)
FLOAT64 = (1e-9, 1e-12)  # (relative, absolute)


def trace_mismatch(a: Any, b: Any, path: str = "trace", tol: tuple[float, float] = FLOAT64) -> Optional[str]:
    """Where two traces (Trace objects, or their plain dicts) differ, or None when they agree."""
    if hasattr(a, "to_dict"):
        a, b = stable(a.to_dict()), stable(b.to_dict())
    return first_disagreement(a, b, path, tol)
