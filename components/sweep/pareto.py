"""The Sweep tab's accuracy-vs-cost plots: one marker set and one dotted Pareto frontier per method, AR as dashed
reference lines, and the cells the headline names labelled (components/sweep/verdict.py). Upper-left is ideal:
fewer forwards (or seconds) per token, higher accuracy. Tall enough to read, and laid out for a phone too: a short
title, the legend at the bottom of the figure below the axis title, never over it."""
from __future__ import annotations

import html
import json
import math
from typing import Any

import plotly.graph_objects as go

from s2d2.sweeps.grid import accuracy_interval, pareto_frontier, validate_results

from components.sweep.verdict import best_match

METHOD_STYLE = {  # colour, marker, label
    "ar": ("#111827", "star", "AR (B = 1)"),
    "dynamic": ("#2563eb", "circle", "dynamic-threshold baseline"),
    "s2d2": ("#16a34a", "diamond", "S2D2"),
}
AXES = {"nfe": ("nfe_per_token", "forwards per generated token", "forwards"),
        "wall": ("wall_per_token", "wall seconds per generated token", "wall time")}
HEIGHT = 560


def _plain(value: Any, limit: int = 60) -> str:
    """Text from a results file made inert for Plotly's HTML-like labels."""
    return html.escape(str(value)[:limit], quote=True)


def pareto_figure(data: dict[str, Any], axis: str = "nfe") -> go.Figure:
    """Accuracy vs cost for every cell of a results file."""
    key, xtitle, short = AXES[axis]
    cells = [c for c in data["cells"] if c.get(key) is not None and c.get("accuracy") is not None]
    meta = data.get("meta", {})
    fig = go.Figure()
    fig.update_layout(template="plotly_white", height=HEIGHT, margin=dict(l=55, r=15, t=70, b=130),
                      title=dict(text=f"Accuracy vs {short} per token<br><sup>{_plain(meta.get('model', '?'))} on "
                                      f"{_plain(meta.get('task', '?'))}, n = {_plain(meta.get('n', '?'))} · "
                                      "upper-left is ideal</sup>", font=dict(size=14), x=0, xanchor="left", y=1,
                                 yref="container",
                                 yanchor="top", pad=dict(t=10, l=8)),
                      # log x: the cells crowd at a few tenths of a forward per token; a log axis spreads them
                      xaxis=dict(title=f"{xtitle}<br>(log scale; fewer is faster)", type="log", automargin=True),
                      yaxis=dict(title="accuracy", range=accuracy_range(cells)),
                      legend=dict(orientation="h", x=0, xanchor="left", y=0, yref="container", yanchor="bottom"))
    for method, style in METHOD_STYLE.items():
        _method_traces(fig, [c for c in cells if c["method"] == method], key, method, style)
    _ar_lines(fig, next((c for c in cells if c["method"] == "ar"), None), key)
    _label_named(fig, cells, key)
    _line_keys(fig, cells)
    ticks = log_ticks([float(c[key]) for c in cells])
    if ticks:  # plain numbers (0.2, 0.3, 0.5, 1), not the log axis's bare mantissas ("2 3 … 9 1")
        fig.update_xaxes(tickvals=ticks, ticktext=[f"{t:g}" for t in ticks])
    return fig


def log_ticks(xs: list[float]) -> list[float]:
    """1-2-3-5 ticks covering the data (positive values only)."""
    pos = [x for x in xs if x > 0]
    if not pos:
        return []
    lo, hi = min(pos) / 1.15, max(pos) * 1.15
    first = math.floor(math.log10(lo))
    return [round(m * 10 ** e, 12) for e in range(first, math.ceil(math.log10(hi)) + 1) for m in (1, 2, 3, 5)
            if lo <= m * 10 ** e <= hi]


def _method_traces(fig: go.Figure, pts: list[dict[str, Any]], key: str, method: str, style: tuple) -> None:
    if not pts:
        return
    colour, symbol, label = style
    xs, ys = [float(c[key]) for c in pts], [float(c["accuracy"]) for c in pts]
    cis = [accuracy_interval(c) or (y, y) for c, y in zip(pts, ys)]
    bars = dict(type="data", symmetric=False, array=[hi - y for (_, hi), y in zip(cis, ys)],
                arrayminus=[y - lo for (lo, _), y in zip(cis, ys)], color=colour, thickness=1, width=3)
    fig.add_trace(go.Scatter(x=xs, y=ys, mode="markers", name=label, text=[_plain(c["name"]) for c in pts],
                             customdata=cis, error_y=bars,
                             hovertemplate="%{text}<br>x %{x:.4g}<br>accuracy %{y:.3f} (95 % CI "
                                           "%{customdata[0]:.3f}–%{customdata[1]:.3f})<extra></extra>",
                             marker=dict(color=colour, symbol=symbol, size=13 if method == "ar" else 9, opacity=0.8)))
    front = pareto_frontier(list(zip(xs, ys)))
    if method != "ar" and len(front) > 1:  # named for hover and tests; the text above the plot explains the dots
        fig.add_trace(go.Scatter(x=[xs[i] for i in front], y=[ys[i] for i in front], mode="lines",
                                 name=f"{label} Pareto frontier", line=dict(color=colour, dash="dot"),
                                 hoverinfo="skip", showlegend=False))


def _line_keys(fig: go.Figure, cells: list[dict[str, Any]]) -> None:
    """Legend entries (no data) for the lines and rings the plot draws, so the picture carries its own key (walk:
    the dotted, dashed and ringed marks were explained only behind a tap)."""
    keys = []
    if any(f.name.endswith("Pareto frontier") for f in fig.data if f.name):
        keys.append(("dotted: a method's best trade-offs (Pareto frontier)", dict(color="#64748b", dash="dot"), None))
    if any(c["method"] == "ar" for c in cells):
        keys.append(("dashed: AR's cost and accuracy", dict(color="#111827", width=1, dash="dash"), None))
    if any(f.name.startswith("named: ") for f in fig.data if f.name):
        keys.append(("ringed: the cells compared above the plot", None,
                     dict(size=13, color="rgba(0,0,0,0)", line=dict(color="#475569", width=2))))
    for name, line, marker in keys:
        fig.add_trace(go.Scatter(x=[None], y=[None], name=name, mode="lines" if line else "markers", line=line,
                                 marker=marker, hoverinfo="skip"))


def _ar_lines(fig: go.Figure, ar: Any, key: str) -> None:
    if ar is None:
        return
    fig.add_vline(x=float(ar[key]), line=dict(color="#111827", width=1, dash="dash"))
    fig.add_hline(y=float(ar["accuracy"]), line=dict(color="#111827", width=1, dash="dash"))


def _label_named(fig: go.Figure, cells: list[dict[str, Any]], key: str) -> None:
    """Label AR and the two cells the headline compares (ringed), so the picture shows what the text says."""
    m = best_match(cells)
    ar = next((c for c in cells if c["method"] == "ar"), None)
    labels = [(m.s2d2, "#16a34a", -36, True), (m.baseline, "#2563eb", 36, True)] if m and m.baseline else []
    labels += [(ar, "#111827", -30, False)] if ar is not None else []
    for cell, colour, ay, ring in labels:
        x, y = float(cell[key]), float(cell["accuracy"])
        # annotation coordinates on a log axis are log10 of the value (shapes and traces take the value itself)
        fig.add_annotation(x=math.log10(x), y=y, text=_plain(cell["name"], 40), showarrow=True, arrowhead=0,
                           arrowcolor=colour, ax=0, ay=ay, font=dict(size=11, color=colour),
                           bgcolor="rgba(255,255,255,0.85)")
        if ring:
            fig.add_trace(go.Scatter(x=[x], y=[y], mode="markers", hoverinfo="skip", showlegend=False,
                                     name=f"named: {_plain(cell['name'])}",
                                     marker=dict(size=17, color="rgba(0,0,0,0)", line=dict(color=colour, width=2))))


def accuracy_range(cells: list[dict[str, Any]]) -> list[float]:
    """A y range that fits the data and its error bars (with a margin), not 0-1: 0.63-0.98 should fill the plot,
    not its top 15 %."""
    ys = [float(c["accuracy"]) for c in cells]
    if not ys:
        return [-0.03, 1.03]
    bars = [accuracy_interval(c) or (y, y) for c, y in zip(cells, ys)]
    lo, hi = min(b[0] for b in bars), max(b[1] for b in bars)
    pad = max(0.02, 0.08 * (hi - lo))
    return [max(-0.03, lo - pad), min(1.03, hi + pad)]


def pareto_html(data: dict[str, Any]) -> str:
    """Both plots in one self-contained HTML page (plotly.js inlined once)."""
    validate_results(data)
    a = pareto_figure(data, "nfe").to_html(full_html=False, include_plotlyjs=True)
    b = pareto_figure(data, "wall").to_html(full_html=False, include_plotlyjs=False)
    meta = json.dumps(data.get("meta", {}), indent=1)
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>S2D2 sweep</title></head><body>"
            f"<h2>S2D2 sweep: accuracy vs speed</h2>{a}{b}<pre>{html.escape(meta)}</pre></body></html>")
