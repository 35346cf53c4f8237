"""A knob: one DecodeConfig option as a policy (or decoder option) declares it, with everything the config
validation, the Run panel, the what-if panel and the figures need to know about it.

The range checks live here too, so DecodeConfig.validate and the knob declarations share one wording of every
error ("name: must be in [lo, hi], got v").
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional

from ..limits import value_text

KINDS = ("int", "float", "choice", "bool")


@dataclass(frozen=True)
class Knob:
    field: str  # the DecodeConfig option it sets (the reference option name)
    label: str  # short UI label, e.g. "Score threshold τ_score"
    kind: str  # "int" | "float" | "choice" | "bool"
    lo: float = 0.0  # valid range, inclusive (lo excluded when lo_open)
    hi: float = 1.0
    step: float = 1.0
    help: str = ""  # one line a user reads next to the control
    choices: tuple[str, ...] = ()
    lo_open: bool = False
    ui: Optional[tuple[float, float]] = None  # slider range when narrower than the valid range
    advanced: bool = False  # valid and documented, but not on the Run panel's short list
    whatif: bool = True  # acts only on recorded policy inputs, so a what-if may change it
    short: str = ""  # compact label (what-if sliders); the label when empty
    optional: bool = False  # None is a value too (off); the Run panel shows it as 0

    @property
    def short_label(self) -> str:
        return self.short or self.label

    @property
    def slider(self) -> tuple[float, float]:
        return self.ui if self.ui is not None else (self.lo, self.hi)

    def check(self, value: Any) -> None:
        """Raise one ValueError naming the field when `value` is outside the knob's range or choices."""
        if value is None and self.optional:
            return
        if self.kind == "choice":
            check_choice(self.field, value, self.choices)
        elif self.kind == "int":
            check_int(self.field, value, int(self.lo), int(self.hi))
        elif self.kind == "float":
            check_float(self.field, value, self.lo, self.hi, self.lo_open)


def check_choice(name: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{name}: unknown value {value_text(value)}; allowed: {', '.join(allowed)}")


def check_int(name: str, value: int, lo: int, hi: int) -> None:
    if not lo <= value <= hi:
        raise ValueError(f"{name}: must be an integer in [{lo}, {hi}], got {value_text(value)}")


def check_float(name: str, value: float, lo: float, hi: float, lo_open: bool = False) -> None:
    try:
        v = float(value)
    except OverflowError:  # an int too large for a float is out of any range
        v = math.inf if value > 0 else -math.inf
    bad = math.isnan(v) or v > hi or v < lo or (lo_open and v == lo)
    if bad:
        left = "(" if lo_open else "["
        raise ValueError(f"{name}: must be in {left}{lo}, {hi}], got {value_text(value)}")


def unique(knobs: "list[Knob] | tuple[Knob, ...]") -> list[Knob]:
    """Knobs in order, each field once (policies share the score knobs)."""
    seen: set[str] = set()
    out = []
    for k in knobs:
        if k.field not in seen:
            seen.add(k.field)
            out.append(k)
    return out
