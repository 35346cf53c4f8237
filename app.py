"""S2D2 Explorer: record self-speculative decoding runs and replay every draft, verification and routing decision.

`python app.py` serves the app on the bundled model with a precomputed example trace on screen. The same file
runs unchanged as a Hugging Face Space. Layout and wiring only: the logic lives in components/.

Adding a tab is adding a `build_*_tab(ctx)` call in `build_demo` (see the TABS list).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

import gradio as gr

from components import guard
from components import handlers as h
from components.canvas import CANVAS_CSS, legend_html, render_live
from components.compare import COMPARE_CSS, build_compare_tab
from components.learn import build_learn_tab
from components.mask_view import WHICH
from components.replay import metrics_table, render_step, render_timelines, trace_title
from components.run_panel import (DEFAULT_MODEL, DEFAULT_PRESET, EXAMPLE_PROMPTS, KNOBS, MAX_PROMPT_CHARS, Knob,
                                  model_choices, preload_on_spaces, preset_choices, preset_values)
from components.strip import STRIP_CSS
from components.sweep import build_sweep_tab
from components.traces_io import ASSETS, example_traces, export_path, load_example, make_state
from s2d2.limits import limits
from s2d2.trace import Trace

CSS = CANVAS_CSS + STRIP_CSS + COMPARE_CSS + """
.s2d2-detail{white-space:pre-line;font-family:ui-monospace,monospace;font-size:0.85em;color:#334155;
  border-left:3px solid #4f46e5;padding:4px 8px;min-height:2.5em}
#summary textarea{font-weight:600}
.s2d2-about{max-width:60em}
"""
THEME = gr.themes.Soft(primary_hue="indigo", secondary_hue="green")
PRIVATE = dict(api_visibility="private")
# Click a token: copy its details (the title attribute, already escaped text) into the detail box.
DETAILS_JS = """
element.addEventListener('click', (e) => {
  const tok = e.target.closest('[data-pos]');
  const box = document.getElementById('token-detail');
  if (tok && box) { box.textContent = tok.getAttribute('title') || ''; }
});
"""
# ← / → scrub the replay unless the focus is in a text field.
KEYS_JS = """
() => {
  document.addEventListener('keydown', (e) => {
    if (e.target.closest('input, textarea, select, [contenteditable]')) return;
    const id = e.key === 'ArrowRight' ? 'next-btn' : e.key === 'ArrowLeft' ? 'prev-btn' : null;
    const btn = id && document.getElementById(id);
    if (btn && btn.offsetParent !== null) { btn.click(); e.preventDefault(); }
  });
}
"""


@dataclass
class Ctx:
    """Components shared between tabs (filled as tabs are built, wired at the end)."""

    example: Optional[Trace]
    state: Any = None
    tabs: Any = None
    c: dict[str, Any] = field(default_factory=dict)


def examples_dir() -> Path:
    return Path(os.environ.get("S2D2_EXAMPLE_TRACES", str(ASSETS)))


def first_example() -> tuple[Optional[str], Optional[Trace]]:
    for name, path in example_traces(examples_dir()).items():
        try:
            return name, load_example(path)
        except ValueError:
            continue
    return None, None


def _knob_component(knob: Knob, value: Any) -> Any:
    info = knob.info or None
    if knob.kind == "choice":
        return gr.Dropdown(list(knob.choices), value=value, label=knob.label, info=info)
    if knob.kind == "bool":
        return gr.Checkbox(value=value, label=knob.label, info=info)
    if knob.name == "seed":
        return gr.Number(value=value, label=knob.label, precision=0, minimum=0)
    return gr.Slider(knob.lo, knob.hi, value=value, step=knob.step, label=knob.label)


def build_replay_tab(ctx: Ctx) -> None:
    t = ctx.example
    c = ctx.c
    n = len(t.steps) if t else 1
    views = render_step(t, 0) if t else ("", "", None, None, h.NO_TRACE)
    with gr.Row():
        c["example"] = gr.Dropdown(list(example_traces(examples_dir())), label="Example trace", scale=2,
                                   value=next(iter(example_traces(examples_dir())), None))
        c["upload"] = gr.File(label=f"Upload a trace (.json, ≤ {limits().max_upload_mb:g} MB)", file_types=[".json"],
                              scale=2, height=130)
        c["download"] = gr.DownloadButton("⬇ Download trace JSON", value=export_path(t) if t else None, scale=1)
    c["load_status"] = gr.Markdown("Example trace loaded." if t else h.NO_TRACE, elem_id="load-status")
    c["title"] = gr.Markdown(trace_title(t) if t else "")
    c["summary"] = gr.Textbox(views[4], label="This step", interactive=False, elem_id="summary", lines=2)
    with gr.Row():
        c["prev"] = gr.Button("◀ Prev", size="sm", scale=0, min_width=80, elem_id="prev-btn")
        c["slider"] = gr.Slider(0, max(1, n), value=0, step=1, label=f"Step (0 = prompt only; {n} steps)",
                                elem_id="step-slider", scale=4)
        c["next"] = gr.Button("Next ▶", size="sm", scale=0, min_width=80, elem_id="next-btn")
        c["play"] = gr.Button("▶ Play", size="sm", scale=0, min_width=90, elem_id="play")
        c["speed"] = gr.Slider(0.25, 4, value=1, step=0.25, label="Steps per second", scale=1)
    c["timer"] = gr.Timer(1.0, active=False)
    c["playing"] = gr.State(False)
    c["canvas"] = gr.HTML(views[0], elem_id="canvas", label="Token canvas", js_on_load=DETAILS_JS)
    gr.HTML('<div id="token-detail" class="s2d2-detail" aria-live="polite">Hover a token for its details, or click '
            'it to pin them here. Keys: ← → step through the run.</div>')
    gr.HTML(legend_html())
    c["strip"] = gr.HTML(views[1], elem_id="strip", label="Verification strip")
    with gr.Row():
        c["routing"] = gr.Plot(views[2], label="Routing panel", elem_id="routing")
        with gr.Column():
            c["mask_which"] = gr.Radio(list(WHICH), value="auto", label="Forward shown in the mask viewer")
            c["mask"] = gr.Plot(views[3], label="Attention mask", elem_id="mask")


def build_run_tab(ctx: Ctx) -> None:
    c = ctx.c
    with gr.Row():
        with gr.Column(scale=2):
            c["prompt"] = gr.Textbox(EXAMPLE_PROMPTS[0], label="Prompt", lines=3, max_length=MAX_PROMPT_CHARS,
                                     elem_id="prompt")
            gr.Examples(EXAMPLE_PROMPTS, inputs=[c["prompt"]], label="Example prompts")
            c["model"] = gr.Dropdown(model_choices(), value=DEFAULT_MODEL, label="Model", allow_custom_value=True,
                                     elem_id="model", info="The bundled tiny model runs on CPU; the others load "
                                     "on first use. Names off this list are refused.")
            c["preset"] = gr.Dropdown(preset_choices(), value=DEFAULT_PRESET, label="Preset (fills every knob)")
            values = preset_values(DEFAULT_PRESET)
            with gr.Row():
                c["run"] = gr.Button("▶ Record a run", variant="primary", elem_id="run")
                c["stop"] = gr.Button("■ Stop", variant="stop", elem_id="stop")
            c["knobs"] = []
            for group in dict.fromkeys(k.group for k in KNOBS):
                with gr.Accordion(group, open=group == KNOBS[0].group):
                    c["knobs"] += [_knob_component(k, v) for k, v in zip(KNOBS, values) if k.group == group]
        with gr.Column(scale=3):
            c["run_status"] = gr.Markdown("Pick a prompt and a preset, then record a run.", elem_id="run-status")
            c["live"] = gr.HTML(render_live([]), elem_id="live", label="Live output")
            gr.Markdown("*Tokens appear here as blocks are committed, with the same glyphs as the Replay canvas. "
                        "When the run ends the Replay tab opens on it.*")
            c["output"] = gr.Textbox(label="Output text", interactive=False, lines=4, elem_id="output")
    c["run_ok"] = gr.State(False)


def build_metrics_tab(ctx: Ctx) -> None:
    c, t = ctx.c, ctx.example
    figs = render_timelines(t) if t else (None,) * 4
    c["metrics"] = gr.Dataframe(metrics_table(t) if t else [], headers=["metric", "value"], label="Run metrics",
                                interactive=False)
    with gr.Row():
        c["commit_map"] = gr.Plot(figs[0], label="Commit map")
        c["nfe"] = gr.Plot(figs[1], label="Forwards per block")
    with gr.Row():
        c["hist"] = gr.Plot(figs[2], label="Acceptance histogram")
        c["perpos"] = gr.Plot(figs[3], label="Per-position acceptance")
    gr.Markdown(ABOUT, elem_classes=["s2d2-about"])


def build_learn(ctx: Ctx) -> None:
    ctx.c["tour"] = build_learn_tab(ctx.example)


TABS: list[tuple[str, str, Callable[[Ctx], None]]] = [
    ("Replay", "replay", build_replay_tab),
    ("Run", "run", build_run_tab),
    ("Learn", "learn", build_learn),
    ("Metrics & about", "metrics", build_metrics_tab),
    ("Compare", "compare", build_compare_tab),
    ("Sweep", "sweep", build_sweep_tab),
]


def wire(ctx: Ctx) -> None:
    c, state = ctx.c, ctx.state
    step_out = [c["canvas"], c["strip"], c["routing"], c["mask"], c["summary"]]
    load_out = [c["title"], c["slider"], *step_out, c["commit_map"], c["nfe"], c["hist"], c["perpos"],
                c["metrics"], c["download"]]
    c["slider"].change(h.step_views, [state, c["slider"], c["mask_which"]], step_out, api_name="step",
                       show_progress="hidden")
    c["mask_which"].change(h.step_views, [state, c["slider"], c["mask_which"]], step_out, **PRIVATE)
    c["prev"].click(lambda s, v: h.move(s, v, -1), [state, c["slider"]], c["slider"], **PRIVATE)
    c["next"].click(lambda s, v: h.move(s, v, 1), [state, c["slider"]], c["slider"], **PRIVATE)
    c["timer"].tick(h.tick, [state, c["slider"]], [c["slider"], c["timer"], c["play"], c["playing"]], **PRIVATE)
    c["play"].click(h.toggle_play, [c["playing"], state, c["slider"], c["speed"]],
                    [c["playing"], c["timer"], c["play"], c["slider"]], **PRIVATE)
    c["speed"].change(h.set_speed, [c["speed"], c["playing"]], c["timer"], **PRIVATE)
    c["example"].input(h.load_example_trace, c["example"], [state, c["load_status"], *load_out],
                       api_name="open_example")
    c["upload"].upload(h.upload_trace, c["upload"], [state, c["load_status"], *load_out], api_name="upload_trace")
    c["preset"].input(h.apply_preset, [c["preset"], c["knobs"][-1]], c["knobs"], **PRIVATE)
    # One GPU job per session: a second submission is refused before it enters the queue (guard.admit).
    busy = lambda msg: (msg, gr.skip(), gr.skip(), gr.skip(), False)  # noqa: E731
    run_ev = c["run"].click(guard.one_job(h.run, busy), [c["prompt"], c["model"], *c["knobs"]],
                            [c["run_status"], c["live"], c["output"], state, c["run_ok"]],
                            api_name="run", concurrency_limit=1, concurrency_id="gpu", validator=guard.admit)
    run_ev.then(h.state_views, [state, c["run_ok"]], [ctx.tabs, c["load_status"], *load_out], **PRIVATE)
    c["stop"].click(guard.stop, None, c["run_status"], cancels=[run_ev], **PRIVATE)
    for btn, step in c.get("tour", []):
        btn.click(lambda s=step: (gr.Tabs(selected="replay"), s), None, [ctx.tabs, c["slider"]], **PRIVATE)
    # A public endpoint that shows the session's current trace (gradio_client runs no chained events).
    show = gr.Button(visible=False)
    show.click(h.state_views, [state], [ctx.tabs, c["load_status"], *load_out], api_name="show_trace")


def build_demo() -> gr.Blocks:
    preload_on_spaces()
    name, example = first_example()
    ctx = Ctx(example)
    # Gradio's cache (uploads, downloads) is swept every 10 minutes of files older than an hour, and wiped on
    # restart; exported traces have their own bounded folder (components/traces_io.py).
    with gr.Blocks(title="S2D2 Explorer", delete_cache=(600, 3600)) as demo:
        ctx.state = gr.State(make_state(example, name or "example") if example else None)
        gr.Markdown("# S2D2 Explorer\nSelf-speculative decoding of block-diffusion LMs "
                    "([arXiv 2603.25702](https://arxiv.org/abs/2603.25702)): the model drafts a block in diffusion "
                    "mode, then, when a routing policy says it pays, verifies the drafts in AR mode with the same "
                    "weights. Replay every step below, record your own run, or take the guided tour.")
        with gr.Tabs(selected="replay") as ctx.tabs:
            for label, tab_id, build in TABS:
                with gr.Tab(label, id=tab_id):
                    build(ctx)
        wire(ctx)
        demo.unload(guard.on_unload)  # a closed tab or client stops its job within one forward
    demo.queue(default_concurrency_limit=4, max_size=limits().queue_size)
    return demo


ABOUT = """
### About the metrics
* **NFE**: forward passes (prefill + drafts + verifies + commits). A 2L verify counts 1 but processes 2B queries;
  query tokens are listed too.
* **Mean acceptance length** (vLLM): 1 + accepted / verify calls. S2D2 adds no bonus token on full acceptance.
* **Draft acceptance rate** (vLLM): accepted / drafted span tokens. **Per-position acceptance**: #(K > i) / calls,
  and conditional on the span reaching i.
* **Tokens per forward**: generated tokens / NFE. **Verify rate**: verify steps / all steps.

Traces are plain JSON (schema version 1, provenance `measured` or `synthetic`); download one and upload it to replay
it without a model. Paper: Han et al., *S2D2: Fast Decoding for Diffusion LLMs via Training-Free Self-Speculation*.
"""

# A session's state holds one trace as a plain dict (about 50 kB for 64 tokens, 0.4-1 MB for 512): 400 sessions
# bound the worst case to a few hundred MB; the oldest sessions are dropped first.
LAUNCH_KWARGS: dict[str, Any] = dict(theme=THEME, css=CSS, js=KEYS_JS, state_session_capacity=limits().max_sessions,
                                     max_file_size=limits().max_upload_bytes)

demo = build_demo()

if __name__ == "__main__":
    demo.launch(**LAUNCH_KWARGS)
