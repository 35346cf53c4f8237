"""The what-if part of the Compare tab: threshold knobs -> re-decided steps (no model call), and the re-run.

Pure functions of the Compare tab's session state (see components/compare.py); tested directly.
"""
from __future__ import annotations

import html
from typing import Any, Callable, Optional

from s2d2.compare import compare_traces, token_diff
from s2d2.config import DecodeConfig
from s2d2.whatif import what_if

from .canvas import render_canvas
from .compare import _lanes, metrics_table, traces_of
from .replay import _show

# (field, label, lo, hi, step, policies it applies to); the estimator knob applies to every S2D2 policy that scores
WHATIF_KNOBS = [
    ("score_threshold", "τ_score", -10.0, 10.0, 0.1, ("score_threshold",)),
    ("hysteresis_on", "τ_on", -10.0, 10.0, 0.1, ("score_hysteresis",)),
    ("hysteresis_off", "τ_off", -10.0, 10.0, 0.1, ("score_hysteresis",)),
    ("penalty_coef", "penalty c", 0.0, 10.0, 0.1, ("score_threshold", "score_hysteresis")),
    ("min_span_length", "τ_span", 1, 64, 1, ("mask_span_length",)),
    ("ucb_beta", "UCB β", 0.0, 5.0, 0.1, ("contextual_bandit_ucb",)),
    ("negexp_beta", "neg-exp β (estimator)", 0.0, 10.0, 0.1, ("score_threshold", "score_hysteresis")),
]

# -- what-if views -------------------------------------------------------------------------------------------------

def s2d2_lanes(state: Any) -> list[str]:
    return [n for n, t in (state or {}).get("lanes", {}).items() if t["header"]["config"].get("method") == "s2d2"]


def knob_values(state: Any, lane: Optional[str]) -> list[Any]:
    """The recorded value of every what-if knob for a lane (defaults when there is none)."""
    cfg = (state or {}).get("lanes", {}).get(lane, {}).get("header", {}).get("config") if lane else None
    base = DecodeConfig.from_dict(dict(cfg)) if cfg else DecodeConfig()
    return [getattr(base, k[0]) for k in WHATIF_KNOBS]


def knob_changes(trace: Trace, values: list[Any]) -> dict[str, Any]:
    """Only the knobs that apply to the trace's policy (and estimator), cast to the config's types."""
    cfg = trace.header.config
    out: dict[str, Any] = {}
    for (name, _, _, _, _, policies), value in zip(WHATIF_KNOBS, values):
        if cfg.get("policy") not in policies or value is None:
            continue
        if name == "negexp_beta" and cfg.get("estimator") != "soft_entropy_negexp":
            continue
        out[name] = int(round(float(value))) if name == "min_span_length" else float(value)
    return out


def whatif_view(state: Any, lane: Optional[str], *values: Any) -> tuple[str, str]:
    """(summary markdown, step table html) re-deciding the lane's recorded steps under the knob values."""
    traces = traces_of(state)
    if lane not in traces:
        return "Run a comparison with at least one S2D2 lane, then pick it here.", ""
    trace = traces[lane]
    try:
        w = what_if(trace, **knob_changes(trace, list(values)))
    except ValueError as exc:
        return f"⚠ {exc}", ""
    used = ", ".join(f"{k} = {v:g}" for k, v in w.changes.items()) or "none (this policy has no threshold here)"
    return f"{w.summary}\n\nKnobs applied to `{w.policy}`: {used}.", whatif_table(w)


def whatif_table(w: Any) -> str:
    editing = w.config.get("loop") == "editing"  # LLaDA2.x: the edits each recorded step made
    rows = []
    for s in w.steps:
        if s.old_verify is None:
            continue
        cls = "flip" if s.flipped and s.exact else ("unknown" if not s.exact else "")
        mark = "⇄ flips" if s.flipped else ""
        if not s.exact:
            mark = (mark + " · " if mark else "") + "trajectory unknown: re-run"
        edits = f"<td>{s.edits or ''}</td>" if editing else ""
        rows.append(f'<tr class="{cls}"><td>{s.index + 1}</td><td>{s.block}</td><td>{_route(s.old_verify)}</td>'
                    f"<td>{_show(s.old_score)}</td><td>{_route(s.new_verify)}</td><td>{_show(s.new_score)}</td>"
                    f"{edits}<td>{html.escape(mark)}</td></tr>")
    edit_head = "<th>edits</th>" if editing else ""
    head = (f"<tr><th>step</th><th>block</th><th>recorded</th><th>score</th><th>new</th><th>new score</th>{edit_head}"
            "<th></th></tr>")
    return f'<div class="s2d2-whatif-wrap"><table class="s2d2-whatif">{head}{"".join(rows)}</table></div>'


def _route(v: Optional[bool]) -> str:
    return "–" if v is None else ("verify" if v else "skip")


def rerun_whatif(state: Any, lane: Optional[str], *values: Any, load: Optional[Callable[[str], Any]] = None,
                 generate: Optional[Callable[..., Any]] = None) -> tuple[str, Any, str]:
    """Re-run the lane from the start with the new thresholds: (status/diff markdown, metrics rows, canvases)."""
    traces = traces_of(state)
    if lane not in traces:
        return "Pick an S2D2 lane first.", None, ""
    old = traces[lane]
    try:
        w = what_if(old, **knob_changes(old, list(values)))
        new = _lanes(state["model"], state["prompt_ids"], {"re-run": DecodeConfig.from_dict(w.config)},
                     int(state["seed"]), load, generate)["re-run"]
    except ValueError as exc:
        return f"⚠ {exc}", None, ""
    pair = {"recorded": old, "re-run": new}
    comp = compare_traces(pair)
    cols = "".join(f'<div class="s2d2-lane"><h4>{n}</h4>{render_canvas(t, len(t.steps), show_future=True)}</div>'
                   for n, t in pair.items())
    same = comp.lane("re-run").output_ids == comp.lane("recorded").output_ids
    lines = [f"Re-ran {lane} with {w.changes or 'unchanged thresholds'}. What-if predicted: {w.summary}",
             "Outputs: identical token for token." if same else
             f"Outputs differ from output token {token_diff('re-run', old, new).first_index}."]
    lines += [f"* Routing first differs at step {v.step + 1} (verify {v.verify[0]} → {v.verify[1]})."
              for v in comp.divergences]
    status = "\n\n".join(lines)
    return status, metrics_table(comp), f'<div class="s2d2-lanes">{cols}</div>'
