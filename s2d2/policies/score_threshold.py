"""`score_threshold`: verify iff the score s = K̂ − c(·N_hi) reaches τ_score (docs/algorithm.md, 'Routing policies')."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from ..trace.fields import as_float
from ..trace.records import PolicyDecision, PolicyInputs
from .base import Policy, arrow, fmt
from .knob import Knob
from .score import SCORE_KNOBS, score, score_details, score_expression


@dataclass(frozen=True)
class ScoreThresholdSettings:
    score_threshold: float
    score_type: str
    penalty_coef: float


class ScoreThreshold(Policy):
    name = "score_threshold"
    summary = "verify iff s = K̂ − c (static) or K̂ − c·N_hi (dynamic) ≥ τ_score"
    Settings = ScoreThresholdSettings
    knobs = (
        Knob("score_threshold", "Score threshold τ_score", "float", -1e9, float("inf"), 0.1, ui=(-10.0, 10.0),
             short="τ_score", help="verify when the expected accepted tokens minus the penalty reach this value"),
        *SCORE_KNOBS,
    )
    scores = True

    def decide(self, inputs: PolicyInputs) -> PolicyDecision:
        st = self.settings
        tau = st.score_threshold
        s = score(st, inputs.k_hat, inputs.n_hi, inputs.span_len)
        verify = s >= tau
        op = "≥" if verify else "<"
        expr = score_expression(st, inputs.k_hat, inputs.n_hi, inputs.span_len, s)
        reason = f"{expr} {op} τ {fmt(tau)} {arrow(verify)}"
        details = {**score_details(st, inputs, s), "score_threshold": float(tau)}
        return self._decision(verify, s, reason, details)

    def always_verifies(self) -> bool:
        """K̂ >= 0 for any span, so a static score K̂ − c never falls below −c (SDAR Config-B: c = 0, τ = 0)."""
        st = self.settings
        return st.score_type == "difference_static" and st.score_threshold <= -st.penalty_coef

    @classmethod
    def guides(cls, config: dict[str, Any]) -> dict[str, Optional[float]]:
        return {"threshold": as_float(config.get("score_threshold"))}
