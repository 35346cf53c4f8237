"""`contextual_bandit_ucb`: UCB1 per context bucket (span, progress, entropy bins) over skip / verify
(docs/algorithm.md, 'Routing policies').

The reward is tokens per forward (decoded / 2 for a verify step, decoded / 1 for a skip); ties verify, so the first
visit to a bucket verifies and the next one skips.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional

from ..trace.fields import as_float
from ..trace.records import PolicyDecision, PolicyInputs
from .base import SKIP, VERIFY, Policy, arrow, fmt
from .knob import Knob

UCB_ENTROPY_SCOPES = ("span", "masks")


@dataclass(frozen=True)
class UCBSettings:
    ucb_beta: float
    ucb_span_bins: int
    ucb_progress_bins: int
    ucb_entropy_bins: int


def ucb_bin(v: float, lo: float, hi: float, n: int) -> int:
    """bin(v; lo, hi, n) = min(n−1, max(0, ⌊(clip(v,lo,hi)−lo)/(hi−lo)·n⌋)); 0 if n ≤ 1 or hi ≤ lo (docs/algorithm.md,
    'Routing policies')."""
    if n <= 1 or hi <= lo or math.isnan(v):  # NaN (e.g. the mean of an empty set) falls in the first bin
        return 0
    x = min(max(v, lo), hi)
    return min(n - 1, max(0, math.floor((x - lo) / (hi - lo) * n)))


def _bins_knob(field: str, label: str) -> Knob:
    return Knob(field, label, "int", 1, 64, 1, ui=(1, 8), advanced=True, help="context bins of the bandit")


class ContextualBanditUCB(Policy):
    name = "contextual_bandit_ucb"
    summary = "learn per context bucket whether verifying pays (UCB1 on tokens per forward)"
    Settings = UCBSettings
    knobs = (
        Knob("ucb_beta", "UCB β", "float", 0.0, 1e6, 0.1, ui=(0.0, 5.0),
             short="UCB β", help="exploration bonus: larger tries the less-visited action more often"),
        _bins_knob("ucb_span_bins", "UCB span bins"),
        _bins_knob("ucb_progress_bins", "UCB progress bins"),
        _bins_knob("ucb_entropy_bins", "UCB entropy bins"),
        Knob("ucb_entropy_scope", "UCB entropy over", "choice", choices=UCB_ENTROPY_SCOPES, advanced=True,
             whatif=False, help="mean entropy over the first span or over all masks (changes what is recorded)"),
    )
    score_label = ": UCB verify − UCB skip, ∞ = unvisited"

    @classmethod
    def guides(cls, config: dict[str, Any]) -> dict[str, Optional[float]]:
        return {"threshold": 0.0}

    @classmethod
    def plotted_score(cls, details: dict[str, Any], inputs: Optional[PolicyInputs]) -> Optional[float]:
        ucb = details.get("ucb")
        if not isinstance(ucb, dict):
            return None
        v, k = as_float(ucb.get("verify")), as_float(ucb.get("skip"))
        if v is None or k is None or math.isinf(v) or math.isinf(k):
            return None
        return round(v - k, 6)

    def reset(self) -> None:
        st = self.settings
        self.n_buckets = st.ucb_span_bins * st.ucb_progress_bins * st.ucb_entropy_bins
        self.t = 0
        self.counts = {a: [0] * self.n_buckets for a in (SKIP, VERIFY)}
        self.sums = {a: [0.0] * self.n_buckets for a in (SKIP, VERIFY)}

    def bins(self, inputs: PolicyInputs) -> list[int]:
        st = self.settings
        span = ucb_bin(max(1, inputs.span_len), 1, inputs.window_len, st.ucb_span_bins)
        prog = ucb_bin(inputs.progress, 0.0, 1.0, st.ucb_progress_bins)
        ent = ucb_bin(inputs.mean_entropy, 0.0, 1.0, st.ucb_entropy_bins)
        return [span, prog, ent]

    def bucket(self, bins: list[int]) -> int:
        span, prog, ent = bins
        return (span * self.settings.ucb_progress_bins + prog) * self.settings.ucb_entropy_bins + ent

    def value(self, action: str, b: int) -> float:
        """R/n + β·sqrt(ln t / n); +∞ when unvisited; no bonus while ln t ≤ 0."""
        n = self.counts[action][b]
        if n == 0:
            return math.inf
        log_t = math.log(self.t) if self.t > 0 else 0.0
        bonus = self.settings.ucb_beta * math.sqrt(log_t / n) if log_t > 0 else 0.0
        return self.sums[action][b] / n + bonus

    def decide(self, inputs: PolicyInputs) -> PolicyDecision:
        self.t += 1  # the clock ticks at every decision, learned from or not
        bins = self.bins(inputs)
        b = self.bucket(bins)
        u_skip, u_verify = self.value(SKIP, b), self.value(VERIFY, b)
        verify = u_verify >= u_skip  # ties (incl. both unvisited) verify
        counts = {a: self.counts[a][b] for a in (SKIP, VERIFY)}
        means = {a: (self.sums[a][b] / counts[a] if counts[a] else 0.0) for a in (SKIP, VERIFY)}
        op = "≥" if verify else "<"
        reason = (f"t={self.t} bucket {b} {tuple(bins)}: UCB verify {fmt(u_verify)} (n={counts[VERIFY]}) "
                  f"{op} UCB skip {fmt(u_skip)} (n={counts[SKIP]}) {arrow(verify)}")
        st = self.settings
        details = {
            "t": self.t, "bins": bins, "n_bins": [st.ucb_span_bins, st.ucb_progress_bins, st.ucb_entropy_bins],
            "bucket": b, "counts": counts, "means": means, "ucb": {SKIP: u_skip, VERIFY: u_verify},
            "ucb_beta": float(st.ucb_beta), "span_len": inputs.span_len, "window_len": inputs.window_len,
            "progress": float(inputs.progress), "mean_entropy": float(inputs.mean_entropy),
            "k_hat": float(inputs.k_hat), "n_hi": inputs.n_hi,
        }
        return self._decision(verify, None, reason, details)

    def learn(self, decision: PolicyDecision, reward: float) -> None:
        b = decision.details["bucket"]
        action = VERIFY if decision.verify else SKIP
        self.counts[action][b] += 1
        self.sums[action][b] += float(reward)
