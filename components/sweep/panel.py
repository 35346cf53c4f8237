"""The Sweep tab: accuracy vs cost (forwards per token, wall time per token) from a bench results file, picked
from the shipped sweeps (components/sweep/offered_files.py says which files) or uploaded, under a headline that puts S2D2
beside the cheapest baseline as accurate (components/sweep/verdict.py).

Pure builders (`pareto_figure` in components/sweep/pareto.py, `results_table`, `load_results_file`) are tested
directly; `build_sweep_tab` only wires them. `python -m components.sweep.panel RESULTS.json [OUT.html]` saves
`pareto_html` (both plots, one page) beside a bench run's results: the library never imports plotly, so
`python -m s2d2 bench` writes the data and this the plots.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from s2d2.sweeps.agreement import format_equals_ar
from s2d2.limits import limits
from s2d2.sweeps.grid import accuracy_interval, format_p

from components.escape import md_text
from components.sweep.pareto import pareto_figure, pareto_html  # noqa: F401  (re-exported: the tab's public builders)
from components.sweep.offered_files import RESULTS_DIR, load_results_file, shipped_sweeps
from components.sweep.verdict import RULE, verdict
from components.views.plural import plural

BUNDLED = RESULTS_DIR / "sweep.json"  # the SDAR-architecture tiny model's sweep; more are discovered beside it
TABLE_COLUMNS = [("name", "cell"), ("method", "method"), ("accuracy", "accuracy"),
                 ("accuracy_ci", "accuracy 95 % CI"), ("p_vs_ar", "p vs AR (McNemar)"),
                 ("nfe_per_token", "forwards/token"), ("wall_per_token", "wall ms/token"),
                 ("speedup_nfe_vs_ar", "speedup vs AR (forwards)"), ("speedup_wall_vs_ar", "speedup vs AR (wall)"),
                 ("mean_acceptance_length", "mean acc. len"), ("draft_acceptance_rate", "draft acc. rate"),
                 ("verify_rate", "verify rate"), ("speedup_wall_vs_baseline", "wall speedup vs best baseline ≥ acc."),
                 ("p_vs_baseline", "p vs that baseline"), ("edits_per_token", "edits/token"),
                 ("equals_ar", "output = AR (problems)")]
NO_RESULTS = "No results file yet: run `python -m s2d2 bench ... --out results/` and upload results/results.json."


def results_table(data: dict[str, Any]) -> list[list[Any]]:
    return [[_table_value(c, k) for k, _ in TABLE_COLUMNS] for c in data["cells"]]


def _table_value(c: dict[str, Any], key: str) -> Any:
    if key == "accuracy_ci":
        ci = accuracy_interval(c)
        return "–" if ci is None else f"{ci[0]:.3f}–{ci[1]:.3f}"
    if key in ("p_vs_ar", "p_vs_baseline"):
        return format_p(c.get(key))
    if key == "equals_ar":
        return format_equals_ar(c)
    return _cell(c.get(key), key)


def _cell(v: Any, key: str = "") -> Any:
    """A value with the precision it has: speedups to 2 decimals, wall time in ms to 2 digits, rates to 3."""
    if v is None:
        return "–"
    if not isinstance(v, float):
        return v
    if key.startswith("speedup"):
        return f"{v:.2f}×"
    if key == "wall_per_token":
        return f"{1000 * v:.2g}"
    return round(v, 3)


def summary_line(data: dict[str, Any], source: str) -> str:
    """The headline: what the file measured, then S2D2 beside the cheapest baseline as accurate, and whether S2D2
    wins (components/sweep/verdict.py). Every value from the file is escaped (a cell name cannot plant a link)."""
    m = data.get("meta", {})
    e = md_text
    text = (f"**{e(source)}** · {plural(len(data['cells']), 'cell')} · model {e(m.get('model', '?'), 80)} · task "
            f"{e(m.get('task', '?'), 80)} (n = {e(m.get('n', '?'), 20)}) · {e(m.get('device', '?'), 40)}")
    said = verdict(data["cells"], m)
    return f"{text}\n\n{said}" if said else text


def sweep_views(path: Optional[str | Path], source: str = "") -> tuple[str, Any, Any, list[list[Any]]]:
    """(status markdown, forwards plot, wall plot, table rows) for a results file; an error leaves plots empty."""
    if not path or not Path(path).is_file():
        return NO_RESULTS, None, None, []
    try:
        data = load_results_file(path)
    except (ValueError, OSError) as exc:
        return f"⚠ {md_text(exc, 400)}", None, None, []
    return (summary_line(data, source or Path(path).name), pareto_figure(data, "nfe"), pareto_figure(data, "wall"),
            results_table(data))


LEAD = ("Accuracy against cost for every cell of a bench sweep. **Upper-left is ideal**: fewer forwards (or "
        "seconds) per generated token, higher accuracy.")
HOW_TO_READ = ("Dotted lines are each method's Pareto frontier, dashed lines mark AR, and the cells the line above "
               "the plots compares are labelled and ringed. Error bars are 95 % intervals (Wilson): where two cells' "
               f"bars overlap, the sweep cannot tell their accuracies apart. {RULE} Speedups in the table are per "
               "generated token, vs the AR cell (and vs the baseline cell with the fewest forwards at equal or better "
               "accuracy); p is McNemar's exact test on the same problems (small p: a real difference). Wall times "
               "come from one run of each cell on a shared machine: forwards are exact.")
INTRO = f"{LEAD} {HOW_TO_READ}"  # the whole explanation (the tab shows the lead, the rest one tap away)


def build_sweep_tab(ctx: Any = None, sweeps: Optional[dict[str, Path]] = None) -> dict[str, Any]:
    """The Sweep tab: a pick of every shipped sweep (components/sweep/offered_files.py; default: those beside BUNDLED),
    the first one shown, and an upload box for your own."""
    import gradio as gr

    sweeps = shipped_sweeps(BUNDLED.parent) if sweeps is None else sweeps
    first = next(iter(sweeps), None)
    views = sweep_views(sweeps[first], first) if first else sweep_views(None)
    c: dict[str, Any] = {}
    gr.Markdown(LEAD, elem_id="sweep-intro")  # the verdict and the plots come before the fine print (phone-first)
    with gr.Row():
        c["sweep_pick"] = gr.Dropdown(list(sweeps), value=first, label="Shipped sweep", elem_id="sweep-pick",
                                      scale=2, min_width=280, visible=bool(sweeps))
        # Any file type reaches the handler, which says what the box takes (no browser toast, no stale message).
        # A button, as the Replay tab's upload: Gradio's file box opens an upload-progress stream whose close()
        # logs "Method not implemented." in the browser console on every upload.
        c["sweep_upload"] = gr.UploadButton(f"⬆ …or upload a results.json (≤ {limits().max_upload_mb:g} MB)",
                                            scale=1, min_width=240, elem_id="sweep-upload")
    c["sweep_status"] = gr.Markdown(views[0], elem_id="sweep-status")
    with gr.Accordion("How to read the plots and the table", open=False, elem_id="sweep-how"):
        gr.Markdown(HOW_TO_READ)
    with gr.Row():
        c["sweep_nfe"] = gr.Plot(views[1], label="Accuracy vs forwards per token", elem_id="sweep-nfe", min_width=320,
                                 show_label=False)  # the figure's own title says it (a badge would cover it)
        c["sweep_wall"] = gr.Plot(views[2], label="Accuracy vs wall time per token", elem_id="sweep-wall",
                                  min_width=320, show_label=False)
    c["sweep_table"] = gr.Dataframe(views[3], headers=[label for _, label in TABLE_COLUMNS], interactive=False,
                                    label="Cells", elem_id="sweep-table")
    outputs = [c["sweep_status"], c["sweep_nfe"], c["sweep_wall"], c["sweep_table"]]
    c["sweep_pick"].input(lambda label: sweep_views(sweeps.get(label), label) if label in sweeps else gr.skip(),
                          c["sweep_pick"], outputs, api_visibility="private")
    c["sweep_upload"].upload(lambda f: sweep_views(f, "uploaded file"), c["sweep_upload"], outputs,
                             api_name="load_sweep")
    if ctx is not None and hasattr(ctx, "c"):
        ctx.c.update(c)
    return c


def main(argv: Optional[list[str]] = None) -> int:
    """`python -m components.sweep.panel RESULTS.json [OUT.html]`: write both plots of a bench run as one HTML page."""
    import argparse
    import sys

    ap = argparse.ArgumentParser(prog="python -m components.sweep.panel", description=main.__doc__)
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
