"""`mask_span_length` (the reference default): verify iff the first mask span has at least τ_span positions."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from ..trace.fields import as_float
from ..trace.records import PolicyDecision, PolicyInputs
from .base import Policy, arrow
from .knob import Knob


@dataclass(frozen=True)
class MaskSpanLengthSettings:
    min_span_length: int


class MaskSpanLength(Policy):
    name = "mask_span_length"
    summary = "verify iff the first mask span has ≥ τ_span positions (τ_span = 1: always)"
    Settings = MaskSpanLengthSettings
    knobs = (
        Knob("min_span_length", "Min span length τ_span", "int", 1, 1_000_000, 1, ui=(1, 64),
             short="τ_span", help="verify when the first run of masks is at least this long; 1 = always, > B = never"),
    )
    score_label = ": span length"

    def decide(self, inputs: PolicyInputs) -> PolicyDecision:
        tau = self.settings.min_span_length
        verify = inputs.span_len >= tau
        op = "≥" if verify else "<"
        reason = f"span |C| = {inputs.span_len} {op} τ_span {tau} {arrow(verify)}"
        return self._decision(verify, None, reason, {"span_len": inputs.span_len, "min_span_length": tau})

    def always_verifies(self) -> bool:
        return self.settings.min_span_length <= 1  # a step with masks has a span of at least 1

    @classmethod
    def guides(cls, config: dict[str, Any]) -> dict[str, Optional[float]]:
        return {"threshold": as_float(config.get("min_span_length"))}

    @classmethod
    def plotted_score(cls, details: dict[str, Any], inputs: Optional[PolicyInputs]) -> Optional[float]:
        if "span_len" in details:
            return as_float(details.get("span_len"))
        return float(inputs.span_len) if inputs is not None else None
