"""Estimator calibration: the predicted accepted length K̂ against the accepted length K, per verify call.

K̂ = Σₖ Πᵢ≤ₖ αᵢ is what the routing policy believed before it paid for the verifier forward; K is what the verifier
then accepted. Points on the diagonal were predicted exactly; points below it were over-predicted (the drafter was
confident, the verifier disagreed). Pure: lists from the trace, a Plotly figure, a sentence.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import plotly.graph_objects as go

from s2d2.trace import Trace

from components.views.trace_index import fmt, index_of


@dataclass(frozen=True)
class Calibration:
    step: list[int]  # 1-based step numbers of the verify calls that recorded K̂
    k_hat: list[float]
    accepted: list[int]
    span: list[int]

    @property
    def mae(self) -> Optional[float]:
        return sum(abs(a - b) for a, b in zip(self.k_hat, self.accepted)) / len(self.step) if self.step else None

    @property
    def bias(self) -> Optional[float]:
        return sum(a - b for a, b in zip(self.k_hat, self.accepted)) / len(self.step) if self.step else None

    def worst(self) -> Optional[int]:
        """Index (into the lists) of the call with the largest |K̂ − K|."""
        if not self.step:
            return None
        return max(range(len(self.step)), key=lambda i: abs(self.k_hat[i] - self.accepted[i]))


def calibration(trace: Trace) -> Calibration:
    rows = [(s.index + 1, s.policy_inputs.k_hat, s.verification.accepted_len, s.span[1]) for s in trace.steps
            if s.verification is not None and s.policy_inputs is not None]
    return Calibration([r[0] for r in rows], [round(r[1], 4) for r in rows], [r[2] for r in rows],
                       [r[3] for r in rows])


def calibration_figure(trace: Trace) -> go.Figure:
    """K̂ (x) against K (y), one point per verify call, the diagonal K = K̂, the worst call ringed."""
    c = calibration(trace)
    top = max([*c.k_hat, *c.accepted, *c.span, 1])
    fig = go.Figure()
    fig.update_layout(template="plotly_white", height=360, margin=dict(l=50, r=20, t=60, b=50),
                      title=dict(text="Predicted K̂ vs accepted K, one point per verify call<br><sup>on the line: "
                                      "predicted exactly · below it: the verifier accepted fewer</sup>",
                                 font=dict(size=13)),
                      xaxis=dict(title="predicted K̂ (before the verifier ran)", range=[-0.5, top + 1]),
                      # (room above the top point for its "step N" label, which sits over it)
                      yaxis=dict(title="accepted K (what the verifier kept)", range=[-0.5, top + 2]),
                      legend=dict(orientation="h", y=-0.25))
    fig.add_trace(go.Scatter(x=[0, top + 1], y=[0, top + 1], mode="lines", name="K = K̂",
                             line=dict(color="#94a3b8", dash="dash")))
    fig.add_trace(go.Scatter(x=c.k_hat, y=c.accepted, mode="markers+text", name="verify calls",
                             text=[f"step {s}" for s in c.step], textposition="top center",
                             customdata=c.span, hovertemplate="K̂ %{x:.2f}, K %{y}, span %{customdata}<extra></extra>",
                             marker=dict(color="#7c3aed", size=11), cliponaxis=False))
    w = c.worst()
    if w is not None:
        fig.add_trace(go.Scatter(x=[c.k_hat[w]], y=[c.accepted[w]], mode="markers", name="largest miss",
                                 marker=dict(color="rgba(0,0,0,0)", size=22, line=dict(color="#dc2626", width=3))))
    return fig


def calibration_text(trace: Trace) -> str:
    """One paragraph with the numbers of this trace."""
    c = calibration(trace)
    if not c.step:
        return "This run made no verify call, so there is nothing to calibrate."
    w = c.worst()
    assert w is not None
    rec = trace.steps[c.step[w] - 1]
    v = rec.verification
    why = ""
    if v is not None and v.first_reject is not None and v.first_reject < len(v.positions) and c.k_hat[w] > c.accepted[w]:
        r = v.positions[v.first_reject]
        why = (f" There the drafter was sure of its draft at position {r.position} (p = {fmt(r.p)}), so K̂ counted "
               f"it and everything after it, but the verifier rejected it (q = {fmt(r.q, 5)}): a confident wrong "
               "draft is exactly what an estimator built on the drafter's own confidence cannot see.")
    bias = c.bias or 0.0
    lean = "over-predicts" if bias > 0 else ("under-predicts" if bias < 0 else "is unbiased")
    answer = index_of(trace).answer_block(rec.block)
    return (f"Before each verify call the policy predicted K̂; the verifier then accepted K. Over this run's "
            f"{len(c.step)} verify calls the mean |K̂ − K| is {fmt(c.mae, 2)} tokens and K̂ {lean} by "
            f"{fmt(abs(bias), 2)} on average. The largest miss is step {c.step[w]} (answer block {answer}): "
            f"K̂ = {fmt(c.k_hat[w], 2)}, K = {c.accepted[w]}.{why}")
