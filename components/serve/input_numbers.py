"""Numbers from the UI or an API call, made safe before they drive work or go back to the browser.

A value typed into a box or sent by a script may be anything: a float such as 1e400 (JSON parses it as infinity),
NaN, an int with hundreds of digits, a string, a bool. `as_int` and `as_float` turn it into a bounded number or
None ("a blank box": handlers then leave the view as it is), so no `int(inf)` or `float(10**400)` ever raises deep
in a handler (components/serve/event_guard.py guards the way out: no int beyond 64 bits reaches Gradio's encoder).
"""
from __future__ import annotations

import math
from typing import Any, Optional

INT_BOUND = 2**63 - 1  # the largest int any handler accepts or returns (orjson encodes up to 2**64 - 1)


def as_int(value: Any) -> Optional[int]:
    """A whole number within ±INT_BOUND (a float is rounded, halves up as the browser's number box snaps), or None
    for a blank, junk or unbounded value."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value if -INT_BOUND <= value <= INT_BOUND else None
    number = as_float(value)
    if number is None or abs(number) > INT_BOUND:
        return None
    return math.floor(number + 0.5)


def as_float(value: Any) -> Optional[float]:
    """A finite float, or None for a blank, junk, NaN, infinite or unrepresentable value."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, str):
        value = value.strip()[:64]
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None


def clamp_int(value: Any, lo: int, hi: int, default: int) -> int:
    """as_int clamped to [lo, hi]; `default` for a blank or junk value."""
    number = as_int(value)
    return default if number is None else max(lo, min(hi, number))
