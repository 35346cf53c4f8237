"""The Compare tab: 2-4 configurations on one prompt and seed, aligned by block, plus the honest what-if.

Handlers are pure functions of plain values (session state is {"prompt_ids", "seed", "model", "lanes": {name:
trace dict}}) and are tested directly; `build_compare_tab` only lays out and wires them. The what-if handlers
live in components/whatif_view.py.
"""
from __future__ import annotations

import html
import json
import re
from typing import Any, Callable, Optional

import plotly.graph_objects as go

from s2d2.compare import PREFILL_BLOCK, Comparison, compare_traces, forward_blocks
from s2d2.config import DecodeConfig, preset, presets
from s2d2.trace import Trace

from .canvas import render_canvas
from .figures import KIND_COLOURS
from .replay import _show
from .run_panel import _GPU, MAX_RUN_SECONDS, gpu_duration

OFF = "(off)"
MAX_LANES = 4
DEFAULT_LANES = ["ar", "dynamic-baseline", "sdar-config-a", OFF]
COMPARE_CSS = """
.s2d2-lanes{display:grid;grid-template-columns:repeat(auto-fit,minmax(260px,1fr));gap:12px}
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
    return out


def lane_configs(presets_: list[Any], overrides: list[Any], gen_length: Any) -> dict[str, DecodeConfig]:
    """Named configurations for the lanes that are on; one ValueError naming the lane and the problem."""
    configs: dict[str, DecodeConfig] = {}
    for i, (name, extra) in enumerate(zip(presets_, overrides)):
        if not name or name == OFF:
            continue
        try:
            cfg = preset(str(name), gen_length=int(gen_length), **parse_overrides(extra))
        except (ValueError, TypeError) as exc:
            raise ValueError(f"lane {i + 1}: {exc}") from None
        configs[f"{i + 1}·{name}{'*' if str(extra or '').strip() else ''}"] = cfg
    if not 2 <= len(configs) <= MAX_LANES:
        raise ValueError(f"turn on 2 to {MAX_LANES} lanes (now {len(configs)})")
    return configs


def run_compare(prompt: str, model_name: str, seed: Any, gen_length: Any, *lane_values: Any,
                load: Optional[Callable[[str], Any]] = None, generate: Optional[Callable[..., Any]] = None
                ) -> tuple[str, Optional[dict[str, Any]]]:
    """Run every lane on the prompt: (status markdown, new state or None on error)."""
    if not isinstance(prompt, str) or not prompt.strip():
        return "Type a prompt first.", None
    try:
        configs = lane_configs(list(lane_values[:MAX_LANES]), list(lane_values[MAX_LANES:]), gen_length)
        traces = _lanes(model_name, prompt, configs, int(seed), load, generate)
    except ValueError as exc:
        return f"⚠ {exc}", None
    first = next(iter(traces.values()))
    state = {"prompt_ids": first.header.prompt_ids, "seed": int(seed), "model": model_name,
             "lanes": {n: t.to_dict() for n, t in traces.items()}}
    return f"Ran {len(traces)} lanes on the same prompt with seed {int(seed)}.", state


def _lanes(model_name: str, prompt: Any, configs: dict[str, DecodeConfig], seed: int,
           load: Optional[Callable[[str], Any]], generate: Optional[Callable[..., Any]]) -> dict[str, Trace]:
    """Decode every lane; through the GPU-decorated `run_lanes` unless a test injects load / generate."""
    plain = {n: c.to_dict() for n, c in configs.items()}
    if load is None and generate is None:
        out = run_lanes(prompt, model_name, plain, seed)
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


def _lanes_seconds(prompt: Any, model_name: str, configs: dict[str, dict[str, Any]], seed: int = 0) -> int:
    return int(min(MAX_RUN_SECONDS, sum(gpu_duration("", model_name, c, seed) for c in configs.values())))


@_GPU(duration=_lanes_seconds)
def run_lanes(prompt: Any, model_name: str, configs: dict[str, dict[str, Any]], seed: int) -> dict[str, dict[str, Any]]:
    """The Compare tab's GPU call (ZeroGPU on Spaces): plain dicts in and out, so they pickle."""
    return _decode_lanes(prompt, model_name, configs, seed, _load, _generate)


def traces_of(state: Any) -> dict[str, Trace]:
    if not isinstance(state, dict) or not isinstance(state.get("lanes"), dict):
        return {}
    return {n: Trace.from_dict(t) for n, t in state["lanes"].items()}


# -- views ------------------------------------------------------------------------------------------------------

def block_label(comp: Comparison, i: int) -> str:
    b = comp.blocks[i]
    if b.index == PREFILL_BLOCK:
        return "prompt prefill"
    return f"aligned block {b.index} (positions {b.start}–{b.start + b.length - 1}, grid of {comp.grid})"


def block_html(comp: Comparison, traces: dict[str, Trace], i: int) -> str:
    """One column per lane: what it spent in aligned block i and its canvas after its last step there."""
    i = max(0, min(int(i), len(comp.blocks) - 1))
    block = comp.blocks[i]
    cols = []
    for name, trace in traces.items():
        lb = block.lanes[name]
        kinds = ", ".join(f"{k} {v}" for k, v in lb.nfe_by_kind.items()) or "none"
        info = (f"{lb.nfe} forwards ({kinds}) · {len(lb.steps)} steps · {len(lb.commits)} tokens committed")
        cols.append(f'<div class="s2d2-lane"><h4>{html.escape(name)}</h4><div>{html.escape(info)}</div>'
                    f'{render_canvas(trace, lb.last_step)}</div>')
    note = ("Lanes are aligned by block position (steps inside a block are not equivalent across methods). "
            f"Showing {block_label(comp, i)}.")
    return f'<p>{html.escape(note)}</p><div class="s2d2-lanes">{"".join(cols)}</div>'


def lanes_figure(comp: Comparison, traces: dict[str, Trace], i: int, axis: str = "nfe") -> go.Figure:
    """Every forward of every lane on one shared axis (NFE or cumulative forward wall time), by kind."""
    sel = comp.blocks[max(0, min(int(i), len(comp.blocks) - 1))].index
    pts: dict[str, dict[str, list[Any]]] = {}
    for name, trace in traces.items():
        wall = 0.0
        for f, blk in zip(trace.forwards, forward_blocks(trace, comp.grid)):
            wall += f.wall_s
            p = pts.setdefault(f.kind, {"x": [], "y": [], "size": [], "text": []})
            p["x"].append(f.nfe_after if axis == "nfe" else round(wall, 6))
            p["y"].append(name)
            p["size"].append(13 if blk == sel else 6)
            p["text"].append(f"{name}: {f.kind}, block {f.block}, step {f.step}, {f.query_tokens} query tokens")
    title = "NFE (forwards so far)" if axis == "nfe" else "forward wall time so far (s)"
    fig = go.Figure()
    fig.update_layout(template="plotly_white", height=120 + 45 * len(traces), margin=dict(l=110, r=20, t=40, b=40),
                      title=dict(text=f"Lanes on a shared {title} axis (big markers: the selected block)",
                                 font=dict(size=13)), xaxis_title=title, legend=dict(orientation="h", y=-0.35))
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
    rows = [[label] + [_show(getattr(m, key)) for m in comp.lanes] for key, label in METRIC_ROWS]
    rows.append(["output equals AR"] + [_equal(m.equals_ar) for m in comp.lanes])
    return rows


def metrics_table(comp: Comparison) -> dict[str, Any]:
    """gr.Dataframe value with the lane names as column headers."""
    return {"headers": ["metric"] + [m.name for m in comp.lanes], "data": metrics_rows(comp)}


def _equal(v: Optional[bool]) -> str:
    return "– (no AR lane)" if v is None else ("✓ token for token" if v else "✗ differs")


def diff_markdown(comp: Comparison) -> str:
    lines = [comp.reference_note + "."]
    for d in comp.diffs:
        lines.append(f"* **{d.lane}** first differs from AR at output token {d.first_index}: AR "
                     f"`{d.ar_ids[d.first_index:d.first_index + 5]}` vs `{d.lane_ids[d.first_index:d.first_index + 5]}`"
                     f" — AR text {json.dumps(d.ar_text[:80])}, lane text {json.dumps(d.lane_text[:80])}")
    for v in comp.divergences:
        lines.append(f"* Routing: **{v.lanes[0]}** and **{v.lanes[1]}** first decide differently at step "
                     f"{v.step + 1} (blocks {v.block[0]} / {v.block[1]}: verify {v.verify[0]} vs {v.verify[1]}).")
    return "\n".join(lines)


def compare_views(state: Any, i: Any = 0) -> tuple[str, Any, Any, Any, str]:
    """(block html, NFE-axis figure, wall-axis figure, metrics rows, diff markdown) for the selected block."""
    traces = traces_of(state)
    if not traces:
        return "<p>Run a comparison first.</p>", None, None, {"headers": ["metric"], "data": []}, ""
    comp = compare_traces(traces)
    i = max(0, min(int(float(i or 0)), len(comp.blocks) - 1))
    return (block_html(comp, traces, i), lanes_figure(comp, traces, i, "nfe"), lanes_figure(comp, traces, i, "wall"),
            metrics_table(comp), diff_markdown(comp))


def n_blocks(state: Any) -> int:
    traces = traces_of(state)
    return len(compare_traces(traces).blocks) if traces else 1


def first_block(state: Any) -> int:
    """Selector value of the first generation block (skipping the prompt-prefill row)."""
    traces = traces_of(state)
    blocks = compare_traces(traces).blocks if traces else []
    return 1 if len(blocks) > 1 and blocks[0].index == PREFILL_BLOCK else 0


# -- layout and wiring ------------------------------------------------------------------------------------------

def build_compare_tab(ctx: Any = None, model_name: str = "tiny") -> dict[str, Any]:
    """The Compare tab. Its state is its own (a comparison is not the Replay tab's trace)."""
    import gradio as gr

    from .run_panel import EXAMPLE_PROMPTS, MAX_PROMPT_CHARS
    from .whatif_view import WHATIF_KNOBS, knob_values

    private = dict(api_visibility="private")
    names = [OFF] + list(presets())
    c: dict[str, Any] = {}
    c["cmp_state"] = gr.State(None)
    with gr.Row():
        c["cmp_prompt"] = gr.Textbox(EXAMPLE_PROMPTS[0], label="Prompt (all lanes)", lines=2, scale=3,
                                     max_length=MAX_PROMPT_CHARS, elem_id="cmp-prompt")
        c["cmp_seed"] = gr.Number(0, label="Seed (all lanes)", precision=0, minimum=0, scale=1)
        c["cmp_gen"] = gr.Slider(8, 256, value=48, step=8, label="Generation length", scale=1)
    with gr.Row():
        c["cmp_lanes"] = [gr.Dropdown(names, value=v, label=f"Lane {i + 1}") for i, v in enumerate(DEFAULT_LANES)]
    with gr.Accordion("Custom settings per lane (KEY=VALUE, e.g. acceptance=greedy_exact policy=always)", open=False):
        with gr.Row():
            c["cmp_extra"] = [gr.Textbox("", label=f"Lane {i + 1} overrides", lines=1) for i in range(MAX_LANES)]
    c["cmp_run"] = gr.Button("▶ Run all lanes", variant="primary", elem_id="cmp-run")
    c["cmp_status"] = gr.Markdown("Pick 2–4 lanes and run them on the same prompt and seed.", elem_id="cmp-status")
    c["cmp_block"] = gr.Slider(0, 1, value=0, step=1, label="Aligned block (drives every lane)", elem_id="cmp-block")
    c["cmp_lanes_html"] = gr.HTML("", elem_id="cmp-lanes")
    with gr.Row():
        c["cmp_nfe"] = gr.Plot(label="Shared NFE axis", elem_id="cmp-nfe")
        c["cmp_wall"] = gr.Plot(label="Shared wall-time axis", elem_id="cmp-wall")
    c["cmp_metrics"] = gr.Dataframe([], label="Metrics per lane", interactive=False, elem_id="cmp-metrics")
    c["cmp_diff"] = gr.Markdown("", elem_id="cmp-diff")
    with gr.Accordion("What if the thresholds were different?", open=True):
        gr.Markdown("Moving a threshold re-decides every recorded step from its recorded inputs (no model call). "
                    "Decisions are exact up to the first flip; after it, the run would have gone elsewhere.")
        c["wi_lane"] = gr.Dropdown([], label="S2D2 lane", elem_id="wi-lane")
        with gr.Row():
            c["wi_knobs"] = [gr.Slider(lo, hi, value=v, step=st, label=label)
                             for (_, label, lo, hi, st, _), v in zip(WHATIF_KNOBS, knob_values(None, None))]
        c["wi_summary"] = gr.Markdown("", elem_id="wi-summary")
        c["wi_table"] = gr.HTML("", elem_id="wi-table")
        c["wi_rerun"] = gr.Button("↻ Re-run from the start with these thresholds", elem_id="wi-rerun")
        c["wi_status"] = gr.Markdown("")
        c["wi_metrics"] = gr.Dataframe([], label="Recorded vs re-run", interactive=False)
        c["wi_side"] = gr.HTML("")
    _wire_compare(c, model_name, private)
    if ctx is not None and hasattr(ctx, "c"):
        ctx.c.update({k: v for k, v in c.items()})
    return c


def _after_run(state: Any) -> tuple[Any, ...]:
    from .whatif_view import knob_values, s2d2_lanes

    lanes = s2d2_lanes(state)
    lane = lanes[0] if lanes else None
    start = first_block(state)
    views = compare_views(state, start)
    import gradio as gr

    return (gr.Slider(0, max(1, n_blocks(state) - 1), value=start, step=1), *views,
            gr.Dropdown(lanes, value=lane), *knob_values(state, lane))


def _wire_compare(c: dict[str, Any], model_name: str, private: dict[str, Any]) -> None:
    from .whatif_view import knob_values, rerun_whatif, whatif_view

    view_out = [c["cmp_lanes_html"], c["cmp_nfe"], c["cmp_wall"], c["cmp_metrics"], c["cmp_diff"]]
    inputs = [c["cmp_prompt"], c["cmp_seed"], c["cmp_gen"], *c["cmp_lanes"], *c["cmp_extra"]]

    def run(prompt: str, seed: Any, gen: Any, *lanes: Any) -> tuple[str, Any]:
        return run_compare(prompt, model_name, seed, gen, *lanes)

    ev = c["cmp_run"].click(run, inputs, [c["cmp_status"], c["cmp_state"]], api_name="compare",
                            concurrency_limit=1, concurrency_id="gpu")
    ev.then(_after_run, c["cmp_state"], [c["cmp_block"], *view_out, c["wi_lane"], *c["wi_knobs"]], **private)
    c["cmp_block"].change(compare_views, [c["cmp_state"], c["cmp_block"]], view_out, **private)
    wi_in = [c["cmp_state"], c["wi_lane"], *c["wi_knobs"]]
    c["wi_lane"].change(lambda s, lane: knob_values(s, lane), [c["cmp_state"], c["wi_lane"]], c["wi_knobs"],
                        **private)
    for knob in [c["wi_lane"], *c["wi_knobs"]]:
        knob.change(whatif_view, wi_in, [c["wi_summary"], c["wi_table"]], **private)
    c["wi_rerun"].click(rerun_whatif, wi_in, [c["wi_status"], c["wi_metrics"], c["wi_side"]], **private,
                        concurrency_limit=1, concurrency_id="gpu")
