"""Compare: 2-4 configurations on one prompt and seed, aligned by block (the pure part of the Compare tab).

Handlers are pure functions of plain values (session state is {"prompt_ids", "seed", "model", "lanes": {name:
trace dict}}) that return {view name: value}, tested directly. The layout and wiring are in
components/compare_tab.py; the what-if handlers in components/whatif_view.py (which builds on this module).
"""
from __future__ import annotations

import html
import json
import re
from typing import Any, Callable, Optional

import plotly.graph_objects as go

from s2d2.compare import PREFILL_BLOCK, Comparison, compare_traces, forward_blocks
from s2d2.config import DecodeConfig, preset
from s2d2.limits import check_seed
from s2d2.trace import Trace

from .canvas import render_canvas
from .figures import KIND_COLOURS
from .numbers import as_int
from .run_panel import RunStopped, check_config, check_prompt, record_lanes
from .state_store import STORE
from .traces_io import parsed, remember_parsed, trace_json
from .trace_index import show_value

OFF = "(off)"
MAX_LANES = 4
DEFAULT_LANES = ["ar", "dynamic-baseline", "sdar-config-a", OFF]
COMPARE_CSS = """
.s2d2-lanes{display:grid;grid-template-columns:repeat(auto-fit,minmax(min(260px,100%),1fr));gap:12px}
.s2d2-lane{border:1px solid #e5e7eb;border-radius:6px;padding:6px}
.s2d2-lane h4{margin:0 0 4px 0}
.s2d2-whatif-wrap{max-height:420px;overflow:auto}
.s2d2-whatif td,.s2d2-whatif th{padding:2px 6px;border-bottom:1px solid #eee;font-size:.9em}
.s2d2-whatif tr.flip td{background:#fee2e2;font-weight:600}
.s2d2-whatif tr.unknown td{color:#9ca3af;background:#f9fafb}
"""


# -- lanes from UI values ---------------------------------------------------------------------------------------

def parse_overrides(text: Any) -> dict[str, Any]:
    """"acceptance=greedy_exact policy=always" (spaces, commas or newlines) -> typed option values."""
    out: dict[str, Any] = {}
    for pair in [p for p in re.split(r"[\s,;]+", str(text or "").strip()) if p]:
        if "=" not in pair:
            raise ValueError(f"custom settings: expected KEY=VALUE, got {pair!r}")
        key, raw = pair.split("=", 1)
        try:
            out[key] = json.loads(raw)
        except json.JSONDecodeError:
            out[key] = raw
        except RecursionError:
            raise ValueError(f"custom settings: the value of {key[:40]!r} is nested too deeply") from None
    return out


def lane_configs(presets_: list[Any], overrides: list[Any], gen_length: Any) -> dict[str, DecodeConfig]:
    """Named configurations for the lanes that are on; one ValueError naming the lane and the problem."""
    configs: dict[str, DecodeConfig] = {}
    length = as_int(gen_length)
    if length is None:
        raise ValueError("Generation length: expected a whole number")
    for i, (name, extra) in enumerate(zip(presets_, overrides)):
        if not name or name == OFF:
            continue
        try:
            options = parse_overrides(extra)
            if "gen_length" in options:
                raise ValueError("gen_length is set for every lane by the Generation length slider")
            cfg = check_config(preset(str(name)[:100], gen_length=length, **options))
        except (ValueError, TypeError, OverflowError) as exc:
            raise ValueError(f"lane {i + 1}: {exc}") from None
        configs[f"{i + 1}·{name}{'*' if str(extra or '').strip() else ''}"] = cfg
    if not 2 <= len(configs) <= MAX_LANES:
        raise ValueError(f"turn on 2 to {MAX_LANES} lanes (now {len(configs)})")
    return configs


def run_compare(prompt: str, model_name: str, seed: Any, gen_length: Any, *lane_values: Any,
                load: Optional[Callable[[str], Any]] = None, generate: Optional[Callable[..., Any]] = None
                ) -> tuple[str, Optional[dict[str, Any]]]:
    """Run every lane on the prompt: (status markdown, new state or None on error). Same caps as Run: prompt
    characters, tokens, seconds (all lanes together), and the Stop button (nothing is compared after a Stop)."""
    problem = check_prompt(prompt)
    if problem:
        return f"⚠ {problem}", None
    try:
        seed = check_seed(seed)
        configs = lane_configs(list(lane_values[:MAX_LANES]), list(lane_values[MAX_LANES:]), gen_length)
        traces = decode_lanes(model_name, prompt, configs, seed, load, generate)
    except RunStopped as exc:
        return f"⏹ {exc}", None
    except (ValueError, TypeError, OverflowError) as exc:
        return f"⚠ {exc}", None
    first = next(iter(traces.values()))
    state = {"prompt_ids": first.header.prompt_ids, "seed": int(seed), "model": model_name, **lanes_state(traces)}
    return f"Ran {len(traces)} lanes on the same prompt with seed {int(seed)}.", state


def lanes_state(traces: dict[str, Trace]) -> dict[str, Any]:
    """The lanes as session state: their headers (the what-if reads configs from them) and a handle to the traces'
    JSON in the state store (components/state_store.py: compressed, under the visitors' byte budgets)."""
    text = "{" + ",".join(f"{json.dumps(n)}:{trace_json(t)}" for n, t in traces.items()) + "}"
    key = STORE.put(text)
    remember_parsed(key, dict(traces), len(text))
    return {"key": key, "lanes": {n: {"header": t.to_dict()["header"]} for n, t in traces.items()}}


def decode_lanes(model_name: str, prompt: Any, configs: dict[str, DecodeConfig], seed: int,
                 load: Optional[Callable[[str], Any]], generate: Optional[Callable[..., Any]]) -> dict[str, Trace]:
    """Decode every lane; through the GPU-decorated `record_lanes` (time cap, Stop) unless a test injects load /
    generate. ValueError with the message of a failed lane; RunStopped after the job's Stop."""
    plain = {n: c.to_dict() for n, c in configs.items()}
    if load is None and generate is None:
        out = {}
        for event in record_lanes(prompt, model_name, plain, seed):
            if event["kind"] == "error":
                raise ValueError(event["message"])
            if event["kind"] == "stopped":
                raise RunStopped(event["message"])
            if event["kind"] == "done":
                out = event["traces"]
    else:
        out = _decode_lanes(prompt, model_name, plain, seed, load or _load, generate or _generate)
    return {n: Trace.from_dict(t) for n, t in out.items()}


def _load(name: str) -> Any:
    from .run_panel import get_model

    return get_model(name)


def _generate(*args: Any, **kwargs: Any) -> Any:
    from s2d2.api import generate

    return generate(*args, **kwargs)


def _decode_lanes(prompt: Any, model_name: str, configs: dict[str, dict[str, Any]], seed: int,
                  load: Callable[[str], Any], generate: Callable[..., Any]) -> dict[str, dict[str, Any]]:
    model = load(model_name)
    return {n: generate(model, prompt, DecodeConfig.from_dict(c), seed=seed).trace.to_dict()
            for n, c in configs.items()}


# -- views ------------------------------------------------------------------------------------------------------

NO_RUN = ("No comparison yet: pick 2–4 lanes and press **▶ Run all lanes**. Every lane decodes the same prompt with "
          "the same seed; the lanes, their forwards on one shared axis and their metrics appear here.")
VIEW_OUT = ["cmp_lanes_html", "cmp_nfe", "cmp_wall", "cmp_metrics", "cmp_diff"]


def traces_of(state: Any) -> dict[str, Trace]:
    if not isinstance(state, dict) or not isinstance(state.get("lanes"), dict):
        return {}
    if "key" not in state:  # lanes kept whole (states written before the store)
        return {n: Trace.from_dict(t) for n, t in state["lanes"].items()}
    hit = parsed(state["key"])
    if hit is not None:
        return hit
    text = STORE.get(state["key"])
    if text is None:  # dropped by the store's budgets: no comparison to show
        return {}
    traces = {n: Trace.from_dict(t) for n, t in json.loads(text).items()}
    remember_parsed(state["key"], traces, len(text))
    return traces


def answer_blocks(comp: Comparison) -> dict[int, int]:
    """Reader's block number (0 = the prompt prefill, 1 = the first aligned block holding answer tokens) -> index
    into comp.blocks."""
    out: dict[int, int] = {}
    first = min((b.index for b in comp.blocks if b.index != PREFILL_BLOCK), default=0)
    for i, b in enumerate(comp.blocks):
        out[0 if b.index == PREFILL_BLOCK else b.index - first + 1] = i
    return out


def block_label(comp: Comparison, number: int) -> str:
    b = comp.blocks[answer_blocks(comp)[number]]
    if b.index == PREFILL_BLOCK:
        return "the prompt prefill (block 0)"
    return f"answer block {number} (positions {b.start}–{b.start + b.length - 1}, {comp.grid} positions per block)"


def block_html(comp: Comparison, traces: dict[str, Trace], number: int) -> str:
    """One column per lane: what it spent in answer block `number` and its canvas after its last step there."""
    block = comp.blocks[answer_blocks(comp)[number]]
    cols = []
    for name, trace in traces.items():
        lb = block.lanes[name]
        kinds = ", ".join(f"{k} {v}" for k, v in lb.nfe_by_kind.items()) or "none"
        info = (f"{lb.nfe} forwards ({kinds}) · {len(lb.steps)} steps · {len(lb.commits)} tokens committed")
        cols.append(f'<div class="s2d2-lane"><h4>{html.escape(name)}</h4><div>{html.escape(info)}</div>'
                    f'{render_canvas(trace, lb.last_step)}</div>')
    note = ("Lanes are aligned by block position (steps inside a block are not equivalent across methods). "
            f"Showing {block_label(comp, number)}.")
    return f'<p>{html.escape(note)}</p><div class="s2d2-lanes">{"".join(cols)}</div>'


def lanes_figure(comp: Comparison, traces: dict[str, Trace], number: int, axis: str = "nfe") -> go.Figure:
    """Every forward of every lane on one shared axis (NFE or cumulative forward wall time), by kind."""
    sel = comp.blocks[answer_blocks(comp)[number]].index
    pts: dict[str, dict[str, list[Any]]] = {}
    for name, trace in traces.items():
        wall = 0.0
        for f, blk in zip(trace.forwards, forward_blocks(trace, comp.grid)):
            wall += f.wall_s
            p = pts.setdefault(f.kind, {"x": [], "y": [], "size": [], "text": []})
            p["x"].append(f.nfe_after if axis == "nfe" else round(wall, 6))
            p["y"].append(name)
            p["size"].append(13 if blk == sel else 6)
            p["text"].append(f"{name}: {f.kind}, step {f.step}, {f.query_tokens} query tokens")
    title = "NFE (forwards so far)" if axis == "nfe" else "forward wall time so far (s)"
    fig = go.Figure()
    # Legend above the plot, axis title below it: the two never overlap, whatever the number of lanes.
    fig.update_layout(template="plotly_white", height=150 + 45 * len(traces), margin=dict(l=110, r=20, t=80, b=50),
                      title=dict(text=f"Every forward of every lane: {title.split(' (')[0]}<br>"
                                      "<sup>big markers: the selected block</sup>", font=dict(size=13), y=0.98,
                                 yanchor="top"),
                      xaxis_title=title, legend=dict(orientation="h", x=0, y=1.0, yanchor="bottom"))
    for kind, p in pts.items():
        fig.add_trace(go.Scatter(x=p["x"], y=p["y"], mode="markers", name=kind, text=p["text"], hoverinfo="text",
                                 marker=dict(color=KIND_COLOURS.get(kind, "#444"), size=p["size"], symbol="square")))
    fig.update_yaxes(categoryorder="array", categoryarray=list(traces)[::-1])
    return fig


METRIC_ROWS = [
    ("nfe", "NFE"), ("tokens_per_forward", "tokens per forward"), ("wall_seconds", "wall time (s)"),
    ("speedup_nfe", "speedup vs AR (NFE/token)"), ("speedup_wall", "speedup vs AR (wall/token)"),
    ("mean_acceptance_length", "mean acceptance length (vLLM)"), ("draft_acceptance_rate", "draft acceptance rate"),
    ("verify_rate", "verify rate"), ("query_tokens", "query tokens"), ("generated_tokens", "generated tokens"),
    ("edits_per_token", "edits per token (self-correction)"),
]


def metrics_rows(comp: Comparison) -> list[list[Any]]:
    rows = [[label] + [show_value(getattr(m, key)) for m in comp.lanes] for key, label in METRIC_ROWS]
    rows.append(["output equals AR"] + [_equal(m.equals_ar) for m in comp.lanes])
    return rows


def metrics_table(comp: Comparison) -> dict[str, Any]:
    """gr.Dataframe value with the lane names as column headers."""
    return {"headers": ["metric"] + [m.name for m in comp.lanes], "data": metrics_rows(comp)}


def _equal(v: Optional[bool]) -> str:
    return "– (no AR lane)" if v is None else ("✓ token for token" if v else "✗ differs")


def _routed(v: Optional[bool]) -> str:
    return "ends (no step)" if v is None else ("verifies" if v else "skips")


def divergence_text(comp: Comparison, traces: dict[str, Trace], d: Any) -> str:
    """What differs at the first step where two S2D2 lanes part: the routing decision, the block each works in (an
    earlier step committed a different number of tokens), or the number of steps."""
    a, b = d.lanes
    ba, bb = (d.block[0] - traces[a].blocks[0].index + 1, d.block[1] - traces[b].blocks[0].index + 1) \
        if traces[a].blocks and traces[b].blocks else d.block
    if d.verify[0] != d.verify[1] and None not in d.verify:
        what = f"**{a}** {_routed(d.verify[0])} and **{b}** {_routed(d.verify[1])}"
    elif None in d.verify:
        done = a if d.verify[0] is None else b
        what = f"**{done}** has already finished while the other lane still works"
    else:
        what = (f"both {'verify' if d.verify[0] else 'skip'}, but **{a}** is in its answer block {ba} and **{b}** in "
                f"its answer block {bb}: earlier steps committed different numbers of tokens")
    return f"* Step {d.step + 1} is the first where **{a}** and **{b}** differ: {what}."


def diff_markdown(comp: Comparison, traces: Optional[dict[str, Trace]] = None) -> str:
    lines = [comp.reference_note + "."]
    for d in comp.diffs:
        lines.append(f"* **{d.lane}** first differs from AR at output token {d.first_index}: AR "
                     f"`{d.ar_ids[d.first_index:d.first_index + 5]}` vs `{d.lane_ids[d.first_index:d.first_index + 5]}`"
                     f" — AR text {json.dumps(d.ar_text[:80])}, lane text {json.dumps(d.lane_text[:80])}")
    for v in comp.divergences:
        lines.append(divergence_text(comp, traces or {}, v) if traces else
                     f"* Routing: **{v.lanes[0]}** and **{v.lanes[1]}** first differ at step {v.step + 1}.")
    return "\n".join(lines)


def compare_views(state: Any, number: Any = 1) -> dict[str, Any]:
    """The lanes at answer block `number` (clamped; a blank box changes nothing)."""
    if number is None:
        return {}
    traces = traces_of(state)
    if not traces:
        return {"cmp_lanes_html": f"<p>{NO_RUN}</p>"}
    comp = compare_traces(traces)
    numbers = answer_blocks(comp)
    try:
        k = int(round(float(number)))
    except (TypeError, ValueError, OverflowError):
        return {}
    k = max(min(numbers), min(k, max(numbers)))
    return {"cmp_lanes_html": block_html(comp, traces, k), "cmp_nfe": lanes_figure(comp, traces, k, "nfe"),
            "cmp_wall": lanes_figure(comp, traces, k, "wall"), "cmp_metrics": metrics_table(comp),
            "cmp_diff": diff_markdown(comp, traces)}


def block_range(state: Any) -> tuple[int, int]:
    """(lowest, highest) block number of a comparison: 0 with a prefill row, else 1; (1, 1) without one."""
    traces = traces_of(state)
    if not traces:
        return 1, 1
    numbers = answer_blocks(compare_traces(traces))
    return min(numbers), max(numbers)
