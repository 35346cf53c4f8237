"""The tour's live τ_score control: the recorded steps re-decided at a new score threshold (s2d2/whatif.py).

Honest as the what-if panel: decisions up to and including the first flip are exact; after it the run would have
drafted and committed differently, so later markers are hollow ("unknown: needs a new run"). Pure: a figure built
from Python lists and one paragraph, both from the trace and the threshold.
"""
from __future__ import annotations

import math
from typing import Any, Optional

import plotly.graph_objects as go

from s2d2.trace import Trace
from s2d2.trace.fields import as_float
from s2d2.whatif import WhatIf, what_if

from components.views.plural import plural
from components.views.figures import step_ticks
from components.views.trace_index import decisive, index_of


def can_move(trace: Trace) -> bool:
    """The control applies to an S2D2 run routed by score_threshold that recorded its policy inputs."""
    cfg = trace.header.config
    return (cfg.get("method") == "s2d2" and cfg.get("policy") == "score_threshold"
            and any(s.policy_inputs is not None for s in trace.steps))


def recorded_tau(trace: Trace) -> float:
    return float(trace.header.config.get("score_threshold") or 0.0)


def tau_range(trace: Trace) -> tuple[float, float]:
    """A slider range covering every recorded score and the recorded threshold, in whole numbers."""
    scores = [s for s in (_score(w) for w in trace.steps) if s is not None] + [recorded_tau(trace)]
    return float(math.floor(min(scores)) - 1), float(math.ceil(max(scores)) + 1)


def _score(rec: Any) -> Optional[float]:
    value = as_float(rec.decision.score) if rec.decision is not None else None
    return value if value is not None and math.isfinite(value) else None


def clamp_tau(trace: Trace, tau: Any) -> float:
    lo, hi = tau_range(trace)
    try:
        value = float(tau)
    except (TypeError, ValueError):
        return recorded_tau(trace)
    return recorded_tau(trace) if math.isnan(value) else max(lo, min(hi, value))


def route_series(trace: Trace, w: WhatIf) -> dict[str, list[Any]]:
    """Per routed step: step number, score, the new decision, whether it is exact and whether it flipped."""
    out: dict[str, list[Any]] = {"step": [], "score": [], "verify": [], "exact": [], "flipped": []}
    for s, row in zip(trace.steps, w.steps):
        if row.new_verify is None:
            continue
        out["step"].append(s.index + 1)
        out["score"].append(_score(s))
        out["verify"].append(bool(row.new_verify))
        out["exact"].append(bool(row.exact))
        out["flipped"].append(bool(row.flipped))
    return out


def route_figure(trace: Trace, tau: float, step: Optional[int] = None) -> go.Figure:
    """Scores against the threshold line at `tau`; filled markers where the decision is exact, hollow after the
    first flip, the first flip ringed; the vertical line marks scrubber value `step`."""
    w = what_if(trace, score_threshold=tau)
    d = route_series(trace, w)
    fig = go.Figure()
    fig.update_layout(template="plotly_white", height=330, margin=dict(l=50, r=20, t=50, b=60),
                      title=dict(text=f"Routing at τ_score = {tau:g}: verify iff s ≥ τ_score", font=dict(size=13)),
                      xaxis_title="step", yaxis_title="score s", legend=dict(orientation="h", y=-0.3))
    fig.add_trace(go.Scatter(x=d["step"], y=d["score"], mode="lines", name="score s", line=dict(color="#64748b")))
    groups = (("verify", True, True, "triangle-up", "#16a34a"), ("skip", False, True, "x", "#6b7280"),
              ("unknown after the first flip", None, False, "circle-open", "#9ca3af"))
    for name, verify, exact, symbol, colour in groups:
        pick = [i for i in range(len(d["step"])) if d["exact"][i] == exact and (verify is None or
                                                                              d["verify"][i] == verify)]
        fig.add_trace(go.Scatter(x=[d["step"][i] for i in pick], y=[d["score"][i] for i in pick], mode="markers",
                                 name=name, marker=dict(color=colour, symbol=symbol, size=12)))
    first = w.first_flip
    if first is not None:
        fig.add_trace(go.Scatter(x=[first + 1], y=[_score(trace.steps[first])], mode="markers", name="first flip",
                                 marker=dict(color="rgba(0,0,0,0)", size=24, line=dict(color="#dc2626", width=3))))
    shapes = [dict(type="line", xref="paper", x0=0, x1=1, y0=tau, y1=tau, line=dict(color="#dc2626", dash="dash"))]
    if step:
        shapes.append(dict(type="line", xref="x", x0=step, x1=step, yref="paper", y0=0, y1=1,
                           line=dict(color="#4f46e5", width=2)))
    fig.update_layout(shapes=shapes)
    fig.update_xaxes(**step_ticks(len(trace.steps)))
    return fig


def route_text(trace: Trace, tau: float) -> str:
    """What the threshold does to the recorded decisions, exact up to the first flip."""
    w = what_if(trace, score_threshold=tau)
    verifies = sum(1 for r in w.steps if r.new_verify)
    skips = sum(1 for r in w.steps if r.new_verify is False)
    if w.first_flip is None:
        same = "the recorded threshold" if tau == recorded_tau(trace) else f"τ_score = {tau:g}"
        return (f"At {same} every recorded decision stands: {verifies} verify, {skips} skip — the plot is the run "
                "as recorded.")
    s = trace.steps[w.first_flip]
    row = w.steps[w.first_flip]
    score = _score(s)
    s_txt, t_txt = decisive(score, tau) if score is not None else ("–", f"{tau:g}")
    op = "≥" if row.new_verify else "<"
    new, old = ("verify", "skip") if row.new_verify else ("skip", "verify")
    later = len(w.flipped) - 1
    more = (f" {plural(later, 'later recorded step')} would flip too, but after the first flip they are only what the "
            "recorded path implies." if later else "")
    answer = index_of(trace).answer_block(s.block)
    return (f"At τ_score = {tau:g}, step {s.index + 1} (answer block {answer}) would **{new}** instead of {old} "
            f"(s = {s_txt} {op} {t_txt}). That is the first flip: steps before it are exactly as recorded; from it on "
            f"the run would have drafted and committed differently, so the later markers are hollow — what they would "
            f"do needs a new run (Run or Compare tab).{more}")
