"""The Sweep tab: accuracy vs cost (NFE per token, wall time per token) from a bench results file.

Pure builders (`pareto_figure`, `results_table`, `load_results_file`) are tested directly; `build_sweep_tab` only
wires them. `python -m components.sweep RESULTS.json [OUT.html]` saves `pareto_html` (both plots, one page) beside a
bench run's results: the library never imports plotly, so `python -m s2d2 bench` writes the data and this the plots.
"""
from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any, Optional

import plotly.graph_objects as go

from s2d2.limits import limits
from s2d2.results_file import read_results
from s2d2.sweep import accuracy_interval, format_p, pareto_frontier, validate_results

from .replay import md_escape
from .traces_io import read_upload

BUNDLED = Path(__file__).resolve().parent.parent / "assets" / "results" / "sweep.json"
METHOD_STYLE = {  # colour, marker, label
    "ar": ("#111827", "star", "AR (B = 1)"),
    "dynamic": ("#2563eb", "circle", "dynamic-threshold baseline"),
    "s2d2": ("#16a34a", "diamond", "S2D2"),
}
AXES = {"nfe": ("nfe_per_token", "NFE per generated token (lower is faster)"),
        "wall": ("wall_per_token", "wall seconds per generated token")}
TABLE_COLUMNS = [("name", "cell"), ("method", "method"), ("accuracy", "accuracy"),
                 ("accuracy_ci", "accuracy 95 % CI"), ("p_vs_ar", "p vs AR (McNemar)"),
                 ("nfe_per_token", "NFE/token"), ("wall_per_token", "wall s/token"),
                 ("speedup_nfe_vs_ar", "speedup vs AR (NFE)"), ("speedup_wall_vs_ar", "speedup vs AR (wall)"),
                 ("mean_acceptance_length", "mean acc. len"), ("draft_acceptance_rate", "draft acc. rate"),
                 ("verify_rate", "verify rate"), ("speedup_wall_vs_baseline", "wall speedup vs best baseline ≥ acc."),
                 ("p_vs_baseline", "p vs that baseline"), ("edits_per_token", "edits/token")]
NO_RESULTS = "No results file yet: run `python -m s2d2 bench ... --out results/` and upload results/results.json."


def pareto_figure(data: dict[str, Any], axis: str = "nfe") -> go.Figure:
    """Accuracy vs cost, one marker set and one frontier line per method; AR drawn as reference lines."""
    key, title = AXES[axis]
    cells = [c for c in data["cells"] if c.get(key) is not None and c.get("accuracy") is not None]
    meta = data.get("meta", {})
    fig = go.Figure()
    fig.update_layout(template="plotly_white", height=380, margin=dict(l=55, r=20, t=50, b=45),
                      title=dict(text=f"Accuracy vs {title.split(' (')[0]} · {_plain(meta.get('model', '?'))} on "
                                      f"{_plain(meta.get('task', '?'))} (n = {_plain(meta.get('n', '?'))})",
                                 font=dict(size=14)),
                      xaxis_title=title, yaxis=dict(title="accuracy", range=accuracy_range(cells)),
                      legend=dict(orientation="h", y=-0.2))
    for method, (colour, symbol, label) in METHOD_STYLE.items():
        pts = [c for c in cells if c["method"] == method]
        if not pts:
            continue
        xs, ys = [float(c[key]) for c in pts], [float(c["accuracy"]) for c in pts]
        cis = [accuracy_interval(c) or (y, y) for c, y in zip(pts, ys)]
        bars = dict(type="data", symmetric=False, array=[hi - y for (_, hi), y in zip(cis, ys)],
                    arrayminus=[y - lo for (lo, _), y in zip(cis, ys)], color=colour, thickness=1, width=3)
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="markers", name=label, text=[_plain(c["name"]) for c in pts],
                                 customdata=cis, error_y=bars,
                                 hovertemplate="%{text}<br>x %{x:.4g}<br>accuracy %{y:.3f} (95 % CI "
                                               "%{customdata[0]:.3f}–%{customdata[1]:.3f})<extra></extra>",
                                 marker=dict(color=colour, symbol=symbol, size=13 if method == "ar" else 9)))
        front = pareto_frontier(list(zip(xs, ys)))
        if method != "ar" and len(front) > 1:
            fig.add_trace(go.Scatter(x=[xs[i] for i in front], y=[ys[i] for i in front], mode="lines",
                                     name=f"{label} Pareto frontier", line=dict(color=colour, dash="dot"),
                                     hoverinfo="skip"))
    ar = next((c for c in cells if c["method"] == "ar"), None)
    if ar is not None:
        fig.add_vline(x=float(ar[key]), line=dict(color="#111827", width=1, dash="dash"))
        fig.add_hline(y=float(ar["accuracy"]), line=dict(color="#111827", width=1, dash="dash"))
        fig.add_annotation(x=float(ar[key]), y=1, yref="paper", text="AR", showarrow=False, xanchor="left",
                           yanchor="top", xshift=4, font=dict(size=11, color="#111827"))
    return fig


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
            f"<h2>S2D2 sweep: accuracy vs speed</h2>{a}{b}<pre>{_escape(meta)}</pre></body></html>")


def _escape(text: str) -> str:
    return html.escape(text)


def _plain(value: Any, limit: int = 60) -> str:
    """Text from a results file made inert for Plotly's HTML-like labels."""
    return html.escape(str(value)[:limit], quote=True)


def results_table(data: dict[str, Any]) -> list[list[Any]]:
    return [[_table_value(c, k) for k, _ in TABLE_COLUMNS] for c in data["cells"]]


def _table_value(c: dict[str, Any], key: str) -> Any:
    if key == "accuracy_ci":
        ci = accuracy_interval(c)
        return "–" if ci is None else f"{ci[0]:.3f}–{ci[1]:.3f}"
    if key in ("p_vs_ar", "p_vs_baseline"):
        return format_p(c.get(key))
    return _cell(c.get(key))


def _cell(v: Any) -> Any:
    if v is None:
        return "–"
    return round(v, 4) if isinstance(v, float) else v


def load_results_file(path: Optional[str | Path]) -> dict[str, Any]:
    """Read (size-bounded) and validate a results.json; ValueError with one readable message."""
    raw = read_upload(str(path) if path else None, "results.json written by `python -m s2d2 bench`")
    try:
        return read_results(raw)
    except ValueError as exc:
        raise ValueError(f"Not a results file: {str(exc)[:300]}") from None


def summary_line(data: dict[str, Any], source: str) -> str:
    """One Markdown line; every value from the file is escaped (a cell name cannot plant a link or code)."""
    m = data.get("meta", {})
    best = max((c for c in data["cells"] if c["method"] == "s2d2" and c.get("speedup_wall_vs_ar")),
               key=lambda c: c["speedup_wall_vs_ar"], default=None)
    e = md_escape
    text = (f"**{e(source)}** · {len(data['cells'])} cells · model {e(m.get('model', '?'), 80)} · task "
            f"{e(m.get('task', '?'), 80)} (n = {e(m.get('n', '?'), 20)}) · {e(m.get('device', '?'), 40)}")
    if best:
        accuracy = "–" if best["accuracy"] is None else f"{best['accuracy']:.3f}"
        text += (f" · fastest S2D2 cell by wall time: {e(best['name'], 80)}, {best['speedup_wall_vs_ar']:.2f}× "
                 f"vs AR at accuracy {accuracy}")
    return text


def sweep_views(path: Optional[str | Path], source: str = "") -> tuple[str, Any, Any, list[list[Any]]]:
    """(status markdown, NFE plot, wall plot, table rows) for a results file; an error leaves plots empty."""
    if not path or not Path(path).is_file():
        return NO_RESULTS, None, None, []
    try:
        data = load_results_file(path)
    except (ValueError, OSError) as exc:
        return f"⚠ {md_escape(exc, 400)}", None, None, []
    return (summary_line(data, source or Path(path).name), pareto_figure(data, "nfe"), pareto_figure(data, "wall"),
            results_table(data))


def build_sweep_tab(ctx: Any = None) -> dict[str, Any]:
    """The Sweep tab; shows the bundled results file when it exists."""
    import gradio as gr

    views = sweep_views(BUNDLED, "bundled results (assets/results/sweep.json)")
    c: dict[str, Any] = {}
    gr.Markdown("Accuracy against cost for every cell of a bench sweep. Lower-left is fast, higher is accurate; "
                "dotted lines are each method's Pareto frontier, dashed lines mark AR. Error bars are 95 % "
                "intervals (Wilson): where two cells' bars overlap, the sweep cannot tell their accuracies apart. "
                "Speedups are per generated token, vs the AR cell (and vs the baseline cell with the fewest forwards at equal or "
                "better accuracy); p is McNemar's exact test on the same problems (small p: a real difference).")
    c["sweep_upload"] = gr.File(label=f"Upload a results.json (≤ {limits().max_upload_mb:g} MB)", file_types=[".json"],
                                height=120)
    c["sweep_status"] = gr.Markdown(views[0], elem_id="sweep-status")
    with gr.Row():
        c["sweep_nfe"] = gr.Plot(views[1], label="Accuracy vs NFE per token", elem_id="sweep-nfe")
        c["sweep_wall"] = gr.Plot(views[2], label="Accuracy vs wall time per token", elem_id="sweep-wall")
    c["sweep_table"] = gr.Dataframe(views[3], headers=[label for _, label in TABLE_COLUMNS], interactive=False,
                                    label="Cells", elem_id="sweep-table")
    c["sweep_upload"].upload(lambda f: sweep_views(f, "uploaded file"), c["sweep_upload"],
                             [c["sweep_status"], c["sweep_nfe"], c["sweep_wall"], c["sweep_table"]],
                             api_name="load_sweep")
    if ctx is not None and hasattr(ctx, "c"):
        ctx.c.update(c)
    return c


def main(argv: Optional[list[str]] = None) -> int:
    """`python -m components.sweep RESULTS.json [OUT.html]`: write both plots of a bench run as one HTML page."""
    import argparse
    import sys

    ap = argparse.ArgumentParser(prog="python -m components.sweep", description=main.__doc__)
    ap.add_argument("results", help="a results.json written by `python -m s2d2 bench`")
    ap.add_argument("out", nargs="?", help="where to write the page (default: pareto.html beside the results)")
    args = ap.parse_args(argv)
    out = Path(args.out) if args.out else Path(args.results).with_name("pareto.html")
    try:
        page = pareto_html(load_results_file(args.results))
        out.write_text(page, encoding="utf-8")
    except (ValueError, OSError) as exc:
        print(f"error: {str(exc)[:300]}", file=sys.stderr)
        return 2
    print(f"written: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
