"""The app's operator settings read from S2D2_* environment variables, at call time (tests set them).

A bad value is one ValueError naming the variable and what it accepts; the app refuses to start with it rather than
run with a guess."""
from __future__ import annotations

import os
from typing import Callable, TypeVar

from s2d2.limits import int_text

N = TypeVar("N", int, float)


def _read(name: str, default: N, parse: Callable[[str], N], accepts: str, ok: Callable[[N], bool]) -> N:
    raw = os.environ.get(name, "").strip()
    try:
        value = parse(raw) if raw else default
    except ValueError:
        raise ValueError(f"{name}: expected {accepts}, got {raw[:40]!r}") from None
    if not ok(value):
        shown = int_text(value) if isinstance(value, int) else f"{value:g}"  # a 400-digit int is counted, not printed
        raise ValueError(f"{name}: expected {accepts}, got {shown}")
    return value


def env_number(name: str, default: float, lo: float, hi: float) -> float:
    """A number in [lo, hi] (default when unset or blank)."""
    return _read(name, float(default), float, f"a number in [{lo:g}, {hi:g}]", lambda v: lo <= v <= hi)


def env_int(name: str, default: int, lo: int, hi: int) -> int:
    """A whole number in [lo, hi] (default when unset or blank)."""
    return _read(name, default, int, f"a whole number in [{lo}, {hi}]", lambda v: lo <= v <= hi)


def env_megabytes(name: str, default: int) -> int:
    """A size given in whole MB (at least 1), returned in bytes."""
    return _read(name, default, int, "a whole number of MB, at least 1", lambda v: v >= 1) * 2**20
