"""The app's operator settings read from S2D2_* environment variables, at call time (tests set them).

A bad value is one ValueError naming the variable and what it accepts; the app refuses to start with it rather than
run with a guess."""
from __future__ import annotations

import os


def env_number(name: str, default: float, lo: float, hi: float) -> float:
    """A number in [lo, hi] (default when unset or blank)."""
    raw = os.environ.get(name, "").strip()
    try:
        value = float(raw) if raw else default
    except ValueError:
        raise ValueError(f"{name}: expected a number in [{lo:g}, {hi:g}], got {raw[:40]!r}") from None
    if not lo <= value <= hi:
        raise ValueError(f"{name}: expected a number in [{lo:g}, {hi:g}], got {value:g}")
    return value


def env_int(name: str, default: int, lo: int, hi: int) -> int:
    """A whole number in [lo, hi] (default when unset or blank)."""
    raw = os.environ.get(name, "").strip()
    try:
        value = int(raw) if raw else default
    except ValueError:
        raise ValueError(f"{name}: expected a whole number in [{lo}, {hi}], got {raw[:40]!r}") from None
    if not lo <= value <= hi:
        raise ValueError(f"{name}: expected a whole number in [{lo}, {hi}], got {value}")
    return value


def env_megabytes(name: str, default: int) -> int:
    """A size given in whole MB (at least 1), returned in bytes."""
    raw = os.environ.get(name, "").strip()
    try:
        value = int(raw) if raw else default
    except ValueError:
        raise ValueError(f"{name}: expected a whole number of MB, got {raw[:40]!r}") from None
    if value < 1:
        raise ValueError(f"{name}: must be at least 1, got {value}")
    return value * 2**20
