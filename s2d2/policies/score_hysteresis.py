"""`score_hysteresis`: an ON/OFF switch on the score (docs/algorithm.md, 'Routing policies'). The state persists across
steps and blocks.

OFF → ON when s > τ_on (≥ when not strict); ON → OFF when s < τ_off. Verify iff the new state is ON. The reference
experiments use the strict comparison, the paper's figure writes ≥: `hysteresis_strict` chooses, and the trace
records which.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from ..trace.fields import as_float
from ..trace.records import PolicyDecision, PolicyInputs
from .base import Policy, arrow, fmt
from .knob import Knob
from .score import SCORE_KNOBS, score, score_details, score_expression


@dataclass(frozen=True)
class ScoreHysteresisSettings:
    hysteresis_on: float
    hysteresis_off: float
    hysteresis_strict: bool
    score_type: str
    penalty_coef: float


def _state(is_on: bool) -> str:
    return "ON" if is_on else "OFF"


class ScoreHysteresis(Policy):
    name = "score_hysteresis"
    summary = "switch verification ON when s > τ_on, OFF when s < τ_off"
    Settings = ScoreHysteresisSettings
    knobs = (
        Knob("hysteresis_on", "Hysteresis τ_on", "float", -1e9, 1e9, 0.1, ui=(-10.0, 10.0),
             short="τ_on", help="while OFF, switch ON (and verify) when the score rises above this"),
        Knob("hysteresis_off", "Hysteresis τ_off", "float", -1e9, 1e9, 0.1, ui=(-10.0, 10.0),
             short="τ_off", help="while ON, switch OFF (and skip) when the score falls below this; must be ≤ τ_on"),
        Knob("hysteresis_strict", "Strict > for τ_on", "bool", advanced=True,
             help="switch ON at s > τ_on (the reference experiments) instead of s ≥ τ_on (the paper's figure)"),
        *SCORE_KNOBS,
    )
    scores = True

    @classmethod
    def check(cls, cfg: Any) -> None:
        if not cfg.hysteresis_off <= cfg.hysteresis_on:
            raise ValueError(
                f"hysteresis_off: must be <= hysteresis_on ({cfg.hysteresis_on}), got {cfg.hysteresis_off}"
            )

    @classmethod
    def guides(cls, config: dict[str, Any]) -> dict[str, Optional[float]]:
        return {"on": as_float(config.get("hysteresis_on")), "off": as_float(config.get("hysteresis_off"))}

    def reset(self) -> None:
        self.is_on = False

    def decide(self, inputs: PolicyInputs) -> PolicyDecision:
        st = self.settings
        on, off, strict = st.hysteresis_on, st.hysteresis_off, st.hysteresis_strict
        s = score(st, inputs.k_hat, inputs.n_hi, inputs.span_len)
        before = self.is_on
        if not before:  # OFF: switch ON above τ_on (strict > as in the reference experiments, or ≥)
            self.is_on = s > on if strict else s >= on
            ops = (">", "≤") if strict else ("≥", "<")
            test = f"{ops[0] if self.is_on else ops[1]} τ_on {fmt(on)}"
        else:  # ON: switch OFF below τ_off
            self.is_on = not s < off
            test = f"{'≥' if self.is_on else '<'} τ_off {fmt(off)}"
        expr = score_expression(st, inputs.k_hat, inputs.n_hi, inputs.span_len, s)
        was, now = _state(before), _state(self.is_on)
        reason = f"{was}: {expr} {test} {arrow(self.is_on)} ({now})"
        details = {
            **score_details(st, inputs, s),
            "state_before": was,
            "state_after": now,
            "band": [float(off), float(on)],
            "hysteresis_on": float(on),
            "hysteresis_off": float(off),
            "strict": strict,
            "on_comparison": ">" if strict else ">=",
        }
        return self._decision(self.is_on, s, reason, details)
