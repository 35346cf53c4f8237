"""The what-if part of the Compare tab: threshold knobs -> re-decided steps (no model call), and the re-run.

Pure functions of the Compare tab's session state (see components/compare/lanes.py) returning {view name: value};
tested directly. Only the knobs of the chosen lane's policy (and estimator) are shown.
"""
from __future__ import annotations

import html
import math
from typing import Any, Callable, Optional

from s2d2.compare import compare_traces, token_diff
from s2d2.config import DecodeConfig
from s2d2.trace import Trace
from s2d2.whatif import knob_specs, what_if

from components.views.canvas import legend_for, render_canvas
from components.compare.lanes import decode_lanes, divergence_text, traces_of
from components.compare.lane_metrics import metrics_table
from components.compare.lane_names import lane_title, lane_titles
from components.run.workers import RunStopped
from components.views.trace_index import show_value

# The words a knob goes by here when the registry's short label is not a symbol the page defines (the Metrics tab's
# symbol list: τ_score, penalty c, K̂, ...), with the line under its slider that says what it does.
PLAIN_KNOBS = {"negexp_beta": ("entropy weight β", "how fast K̂ falls for drafts the model is unsure of: a larger "
                                                   "β expects fewer drafts to pass (recomputed from the drafts)")}
# (field, label, lo, hi, step, policies it applies to), read from the policy registry (s2d2.whatif.knob_specs)
WHATIF_KNOBS = [(k.field, PLAIN_KNOBS.get(k.field, (k.short_label,))[0], *k.slider, k.step, users)
                for k, users in knob_specs()]
# Knobs a step's score is compared with (the rest weigh the score or its inputs): a printed score must be true
# against these
THRESHOLDS = ("score_threshold", "hysteresis_on", "hysteresis_off", "cost_threshold")
_INT_KNOBS = {k.field for k, _ in knob_specs() if k.kind == "int"}

# -- what-if views -------------------------------------------------------------------------------------------------

def s2d2_lanes(state: Any) -> list[str]:
    return [n for n, t in (state or {}).get("lanes", {}).items() if t["header"]["config"].get("method") == "s2d2"]


def s2d2_choices(state: Any) -> list[tuple[str, str]]:
    """The what-if's lane choices: (the lane's title, its key)."""
    lanes = (state or {}).get("lanes", {})
    return [(lane_title(n, lanes[n]["header"]["config"]), n) for n in s2d2_lanes(state)]


def knob_info(name: str) -> Optional[str]:
    """The line under a knob's slider, for a knob whose label is not a symbol the page defines."""
    plain = PLAIN_KNOBS.get(name)
    return plain[1] if plain else None


def knob_values(state: Any, lane: Optional[str]) -> list[Any]:
    """The recorded value of every what-if knob for a lane (defaults when there is none)."""
    cfg = (state or {}).get("lanes", {}).get(lane, {}).get("header", {}).get("config") if lane else None
    base = DecodeConfig.from_dict(dict(cfg)) if cfg else DecodeConfig()
    return [getattr(base, k[0]) for k in WHATIF_KNOBS]


KNOB_OUT = [f"wi_{k[0]}" for k in WHATIF_KNOBS]


def applies(name: str, policies: tuple[str, ...], cfg: dict[str, Any]) -> bool:
    """Does the what-if knob `name` change anything for a trace with this config?"""
    if cfg.get("method") != "s2d2" or cfg.get("policy") not in policies:
        return False
    return name != "negexp_beta" or cfg.get("estimator") == "soft_entropy_negexp"


def knob_updates(state: Any, lane: Optional[str]) -> dict[str, Any]:
    """Each what-if knob set to the lane's recorded value, shown only when it applies to the lane's policy."""
    import gradio as gr

    cfg = (state or {}).get("lanes", {}).get(lane, {}).get("header", {}).get("config", {}) if lane else {}
    return {f"wi_{k[0]}": gr.update(value=v, visible=applies(k[0], k[5], cfg))
            for k, v in zip(WHATIF_KNOBS, knob_values(state, lane))}


def knob_changes(trace: Trace, values: list[Any]) -> dict[str, Any]:
    """Only the knobs that apply to the trace's policy (and estimator), cast to the config's types."""
    cfg = trace.header.config
    out: dict[str, Any] = {}
    for (name, _, _, _, _, policies), value in zip(WHATIF_KNOBS, values):
        if value is None or not applies(name, policies, cfg):
            continue
        out[name] = int(round(float(value))) if name in _INT_KNOBS else float(value)
    return out


def changes_words(trace: Trace, changes: dict[str, Any]) -> str:
    """The thresholds a re-run changes, in the panel's own labels: "τ_score = −5 (recorded: 0)"; only those that
    differ from the recorded run, or "the recorded thresholds" when none does."""
    cfg, labels = trace.header.config, {name: label for name, label, *_ in WHATIF_KNOBS}
    said = [f"{labels.get(k, k)} = {_num(v)} (recorded: {_num(cfg.get(k))})"
            for k, v in changes.items() if cfg.get(k) is None or float(cfg[k]) != float(v)]
    return ", ".join(said) if said else "the recorded thresholds"


def _num(v: Any) -> str:
    return "–" if v is None else f"{v:g}".replace("-", "−") if isinstance(v, (int, float)) else str(v)


def whatif_view(state: Any, lane: Optional[str], *values: Any) -> dict[str, str]:
    """{"wi_summary", "wi_table"}: the lane's recorded steps re-decided under the knob values."""
    traces = traces_of(state)
    if lane not in traces:
        return {"wi_summary": "Run a comparison with at least one S2D2 lane, then pick it here.", "wi_table": ""}
    trace = traces[lane]
    try:
        w = what_if(trace, **knob_changes(trace, list(values)))
    except ValueError as exc:
        return {"wi_summary": f"⚠ {exc}", "wi_table": ""}
    labels = {name: label for name, label, *_ in WHATIF_KNOBS}
    used = ", ".join(f"{labels.get(k, k)} = {_num(v)}" for k, v in w.changes.items())
    used = f"Thresholds used: {used}." if used else "This lane's policy has no threshold to move."
    first = trace.blocks[0].index if trace.blocks else 0
    return {"wi_summary": f"{w.summary}\n\n{used}", "wi_table": whatif_table(w, first, trace.header.config)}


def score_text(value: Any, refs: list[float], digits: int = 3, most: int = 6) -> str:
    """A score as the table prints it, true as printed: with `digits` decimals, or more (up to `most`) when fewer
    would print it equal to a threshold in `refs` it differs from, or print a non-zero score as zero; never "-0.000"
    (a zero prints unsigned, a minus sign is "−"). A score still ambiguous at `most` decimals prints in full."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        return show_value(value)
    value = float(value) + 0.0  # −0.0 -> 0.0
    refs = [float(r) for r in refs if isinstance(r, (int, float)) and math.isfinite(r)]
    for d in range(digits, most + 1):
        text = f"{value:.{d}f}"
        hidden = float(text) == 0.0 and value != 0.0
        if not hidden and all(text != f"{r:.{d}f}" or value == r for r in refs):
            break
    else:
        text = f"{value:.1e}" if abs(value) < 10 ** -most else repr(value)
    if float(text) == 0.0 and value == 0.0:
        text = text.lstrip("-")
    return text.replace("-", "−")


def _thresholds(cfg: dict[str, Any]) -> list[float]:
    """The thresholds a step's score is compared with under this config (those of its policy)."""
    return [cfg[name] for name, _, _, _, _, policies in WHATIF_KNOBS
            if name in THRESHOLDS and cfg.get("policy") in policies and cfg.get(name) is not None]


def whatif_table(w: Any, first_block: int = 0, recorded: Optional[dict[str, Any]] = None) -> str:
    """One row per routed step; blocks numbered as a reader counts them (1 = the first answer block). A trace of the
    editing loop (LLaDA2.x) adds the edits each step made, and its edit-only steps (no masks left, not routed).
    Scores print true against their thresholds (score_text): the recorded one against `recorded` (the trace's
    config; the what-if's own when not given), the new one against the what-if's."""
    editing = w.config.get("loop") == "editing"
    old_refs, new_refs = _thresholds(recorded if recorded is not None else w.config), _thresholds(w.config)
    rows, marks = [], []
    for s in w.steps:
        if s.old_verify is None and not (editing and s.edits):
            continue
        cls = "flip" if s.flipped and s.exact else ("unknown" if not s.exact else "")
        mark = "⇄ flips" if s.flipped else ""
        if not s.exact:
            mark = (mark + " · " if mark else "") + "trajectory unknown: re-run"
        edits = f"<td>{s.edits or ''}</td>" if editing else ""
        marks.append(mark)
        rows.append(f'<tr class="{cls}"><td>{s.index + 1}</td><td>{s.block - first_block + 1}</td>'
                    f"<td>{_route(s.old_verify)}</td><td>{score_text(s.old_score, old_refs)}</td>"
                    f"<td>{_route(s.new_verify)}</td><td>{score_text(s.new_score, new_refs)}</td>{edits}")
    noted = any(marks)  # the note column only when a row has a note (an empty column read as a broken table)
    rows = [row + (f"<td>{html.escape(mark)}</td>" if noted else "") + "</tr>" for row, mark in zip(rows, marks)]
    edit_head = "<th>edits</th>" if editing else ""
    head = (f"<tr><th>step</th><th>block</th><th>recorded</th><th>score</th><th>new</th><th>new score</th>{edit_head}"
            + ("<th>note</th>" if noted else "") + "</tr>")
    return f'<div class="s2d2-whatif-wrap"><table class="s2d2-whatif">{head}{"".join(rows)}</table></div>'


def _route(v: Optional[bool]) -> str:
    return "–" if v is None else ("verify" if v else "skip")


def rerun_whatif(state: Any, lane: Optional[str], *values: Any, load: Optional[Callable[[str], Any]] = None,
                 generate: Optional[Callable[..., Any]] = None) -> dict[str, Any]:
    """Re-run the lane from the start with the new thresholds: {"wi_status", "wi_metrics", "wi_side"}."""
    traces = traces_of(state)
    if lane not in traces:
        return {"wi_status": "Pick an S2D2 lane first."}
    old = traces[lane]
    try:
        w = what_if(old, **knob_changes(old, list(values)))
        new = decode_lanes(state["model"], state["prompt_ids"], {"re-run": DecodeConfig.from_dict(w.config)},
                           int(state["seed"]), load, generate, timed_rounds=0)[0]["re-run"]
    except RunStopped as exc:
        return {"wi_status": f"■ {exc}"}
    except ValueError as exc:
        return {"wi_status": f"⚠ {exc}"}
    pair = {"recorded": old, "re-run": new}
    ar = next((n for n, t in traces.items() if t.header.config.get("method") == "ar"), None)
    # The comparison's AR lane joins the table, so speedups and "output equals AR" are about the lanes on screen.
    comp = compare_traces({**pair, lane_titles(traces)[ar]: traces[ar]} if ar else pair)
    cols = "".join(f'<div class="s2d2-lane"><h4>{n}</h4>{render_canvas(t, len(t.steps), show_future=True)}</div>'
                   for n, t in pair.items())
    same = comp.lane("re-run").output_ids == comp.lane("recorded").output_ids
    lines = [f"Re-ran {lane_titles(traces)[lane]} with {changes_words(old, w.changes)}. What-if predicted: {w.summary}",
             "Outputs: identical token for token." if same else
             f"Outputs differ from output token {token_diff('re-run', old, new).first_index}.",
             "Wall time is left out: the re-run was not timed together with the recorded lane (forwards are exact)."]
    lines += [divergence_text(comp, pair, v) for v in comp.divergences]
    status = "\n\n".join(lines)
    import gradio as gr

    return {"wi_status": status, "wi_metrics": gr.Dataframe(metrics_table(comp, wall=False), visible=True),
            "wi_side": f'<div class="s2d2-lanes">{cols}</div>{legend_for(cols)}'}
