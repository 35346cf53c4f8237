"""How a test compares a float it recorded earlier (a golden trace, a reference logit) with one computed now.

Discrete content (ints, strings, bools, None, list lengths, dict keys) must match exactly. A float must match to
the one tolerance below: |got - want| <= ATOL + RTOL * |want|. Why a tolerance at all: the last bits of a float32
result depend on which CPU kernels PyTorch dispatches to (AVX-512, AVX2, the default path, another architecture),
so a byte-for-byte golden holds only on the machine that recorded it. Measured on the golden decodes, AVX-512 (the
recording) against ATEN_CPU_CAPABILITY=avx2 and =default: at most 2.7e-5 absolute on K-hat (~22, 1.2e-6 relative)
and 3.4e-6 on a top-2 margin (a difference of two probabilities, 8e-6 relative); no difference uses more than 0.16
of the tolerance below, which leaves room for other CPUs. A tolerance may never hide a flipped decision:
tests/lib/test_golden_traces.py asserts that every recorded decision of a golden case (tests/support/golden_margins.py) lies
further than this tolerance from its threshold.
"""
from __future__ import annotations

import math
from typing import Any, Optional

RTOL = 1e-4
ATOL = 1e-5


TOL = (RTOL, ATOL)  # (relative, absolute); a test with another bound (float64 batching) passes its own


def slack(x: float, tol: tuple[float, float] = TOL) -> float:
    """How far a recorded float may move between kernel paths: ATOL + RTOL * |x|."""
    return tol[1] + tol[0] * abs(x)


def floats_close(got: float, want: float, tol: tuple[float, float] = TOL) -> bool:
    """Equal within the tolerance (infinities and NaN only equal to themselves)."""
    if math.isnan(want) or math.isinf(want):
        return math.isnan(got) if math.isnan(want) else got == want
    return abs(got - want) <= slack(want, tol)


def first_disagreement(got: Any, want: Any, path: str = "trace", tol: tuple[float, float] = TOL) -> Optional[str]:
    """The path and values of the first difference of two JSON-like values (None: they agree), discrete content
    exactly and floats within `tol` (relative, absolute)."""
    if isinstance(got, float) and isinstance(want, float):
        return None if floats_close(got, want, tol) else f"{path}: {got!r} != {want!r} (beyond rel {tol[0]}, abs {tol[1]})"
    if type(got) is not type(want):
        return f"{path}: {got!r:.80} != {want!r:.80}"
    if isinstance(got, dict):
        if set(got) != set(want):
            return f"{path}: keys {sorted(set(got) ^ set(want))} only on one side"
        return next((d for k in sorted(got) if (d := first_disagreement(got[k], want[k], f"{path}.{k}", tol))), None)
    if isinstance(got, (list, tuple)):
        if len(got) != len(want):
            return f"{path}: length {len(got)} != {len(want)}"
        return next((d for i, (x, y) in enumerate(zip(got, want))
                     if (d := first_disagreement(x, y, f"{path}[{i}]", tol))), None)
    return None if got == want else f"{path}: {got!r:.80} != {want!r:.80}"


def tensors_close(got: Any, want: Any) -> bool:
    """torch tensors: same shape and dtype, every element within the tolerance."""
    import torch

    return got.shape == want.shape and got.dtype == want.dtype and torch.allclose(got, want, rtol=RTOL, atol=ATOL)
