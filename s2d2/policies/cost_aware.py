"""`cost_aware` (beyond the paper): verify when the expected tokens per second of verifying beat skipping.

The paper's scores charge a verify in forwards (`s = K̂ − c`); on a CPU a 2L verify of 2B queries costs more than a
draft of B, on a GPU both cost about one weight read. This policy prices the step in seconds, from the run's measured
forward costs (s2d2/models/costs.py, frozen per decode and recorded in the trace):

* a skip costs one draft forward, D seconds, and is credited with k tokens: with `cost_skip_value = "prefix"` (the
  default) the span's leading drafts above τ, the ones it decodes without splitting the span a verify would cover
  (confident drafts further on do get committed, but they cut the span, so later verifies accept less); with
  "confident" every pick above τ (N_hi); with "all" every pick;
* a verify costs D + V seconds (V: the verifier forward at this step's query count) and decodes, in expectation,
  E = K̂ + (1 − Π α) tokens: the accepted prefix, plus the resampled token when some position is rejected.

Verify iff E / (D + V) ≥ k / D, i.e. iff the score s = E − k · (D + V) / D ≥ τ_cost: the tokens a verify is
expected to decode beyond what skipping would decode in the same time (τ_cost = 0 compares the two rates). With
"confident" this is the paper's dynamic score s = K̂ − c·N_hi with c = 1 + V/D measured instead of chosen. With
"prefix" or "confident", a step whose skip could only commit drafts below τ (the baseline's errors) always
verifies; "all" is the pure speed rule.
Everything it reads is in `PolicyInputs` (α, K̂ and `costs`), so replay and what-if are exact;
`cost_verify_scale` asks "what if a verify cost this many times as much" of a recorded run (a GPU, where the
verifier's extra queries are nearly free, is a scale below 1).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional

from ..trace.fields import as_float
from ..trace.records import PolicyDecision, PolicyInputs
from .base import Policy, arrow, fmt
from .knob import Knob


COST_SKIP_VALUES = ("confident", "prefix", "all")


@dataclass(frozen=True)
class CostAwareSettings:
    cost_threshold: float
    cost_verify_scale: float
    cost_skip_value: str
    allow_resample: bool


def skip_value(inputs: PolicyInputs, which: str) -> int:
    """The tokens a skip is credited with: every pick ("all"), those above τ ("confident", N_hi), or only the span's
    leading ones above τ ("prefix": what it decodes without splitting the span a later verify would cover)."""
    c = inputs.costs
    assert c is not None
    if which == "all":
        return c.skip_tokens
    return min(inputs.n_hi, c.skip_tokens) if which == "confident" else c.sure_prefix


def expected_verify_tokens(inputs: PolicyInputs, allow_resample: bool) -> tuple[float, float]:
    """(E, Π α): the tokens a verify of the span decodes in expectation, and the chance it accepts the whole span."""
    whole = math.prod(min(max(float(a), 0.0), 1.0) for a in inputs.alphas) if inputs.span_len else 0.0
    tokens = float(inputs.k_hat) + ((1.0 - whole) if allow_resample and inputs.span_len else 0.0)
    floor = inputs.costs.min_tokens if inputs.costs is not None else 0
    return max(tokens, float(floor)), whole


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


class CostAware(Policy):
    name = "cost_aware"
    summary = "verify when the expected tokens per second of verifying beat skipping (measured forward costs)"
    Settings = CostAwareSettings
    knobs = (
        Knob("cost_threshold", "Cost threshold τ_cost", "float", -1e6, 1e6, 0.1, ui=(-4.0, 4.0), short="τ_cost",
             help="verify when a verify's expected tokens beat what skips decode in the same time by this many"),
        Knob("cost_verify_scale", "Verify cost scale", "float", 0.0, 1e3, 0.05, lo_open=True, ui=(0.05, 4.0),
             advanced=True, short="verify cost ×",
             help="multiply the measured verifier cost (what-if: a GPU, where the 2L's extra queries are cheaper)"),
        Knob("cost_skip_value", "A skip's tokens that count", "choice", choices=COST_SKIP_VALUES, advanced=True,
             help="prefix: the span's leading picks above τ (they keep the span whole); confident: every pick above "
                  "τ; all: every pick (pure speed)"),
    )
    scores = True
    uses_costs = True

    @classmethod
    def guides(cls, config: dict[str, Any]) -> dict[str, Optional[float]]:
        return {"threshold": as_float(config.get("cost_threshold"))}

    def decide(self, inputs: PolicyInputs) -> PolicyDecision:
        st, c = self.settings, inputs.costs
        if c is None or inputs.span_len <= 0:
            why = "no span" if inputs.span_len <= 0 else "no forward costs recorded"
            return self._decision(False, -math.inf, f"s = -∞ ({why}) → skip", {"span_len": inputs.span_len})
        tokens, whole = expected_verify_tokens(inputs, st.allow_resample)
        draft, verify = max(c.draft_s, 1e-9), c.verify_s * st.cost_verify_scale
        k = skip_value(inputs, st.cost_skip_value)
        s = tokens - k * (draft + verify) / draft
        ok = s >= st.cost_threshold
        sure = {"confident": " sure", "prefix": " sure in front"}.get(st.cost_skip_value, "")
        reason = (f"verify ≈ {fmt(tokens)} tokens in {ms(draft + verify)} vs skip {k}{sure} in {ms(draft)}: "
                  f"s = {fmt(tokens)} − {k}·{fmt((draft + verify) / draft)} = {fmt(s)} "
                  f"{'≥' if ok else '<'} τ {fmt(st.cost_threshold)} {arrow(ok)}")
        details = {
            "span_len": inputs.span_len, "k_hat": float(inputs.k_hat), "n_hi": inputs.n_hi,
            "whole_span_accepted": whole, "expected_tokens": tokens, "skip_tokens": c.skip_tokens, "skip_value": k,
            "draft_s": draft, "verify_s": verify, "cost_verify_scale": float(st.cost_verify_scale),
            "verify_tokens_per_s": tokens / (draft + verify), "skip_tokens_per_s": c.skip_tokens / draft,
            "score": s, "cost_threshold": float(st.cost_threshold),
        }
        return self._decision(ok, s, reason, details)
