"""The Run tab's layout: prompt, model, a preset in plain words, the knobs that matter (the rest under
"Advanced"), Record / Stop, live output. Layout only; app.py wires the events, except the line under the preset
that follows every knob (components/run/preset_drift.py wires its own, once the knobs are built)."""
from __future__ import annotations

from typing import Any

import gradio as gr

from components.views.canvas import render_live
from components.views.describe import preset_choices, preset_note
from components.run.knob_scope import is_main, shown
from components.views.prompt_scope import TRAINED_ON
from components.run.knobs import (DEFAULT_PRESET, EXAMPLE_PROMPTS, KNOBS, MAX_PROMPT_CHARS, Knob, choice_labels,
                                  knob_info, preset_values)
from components.run.page_decode import offered
from components.run import preset_drift
from components.run.random_stream import stream_line
from components.serve.model_pool import DEFAULT_MODEL, model_choices
from components.ui import Ctx, FreeSlider
from components.views.plural import plural

IN_PAGE_INFO = ("The bundled tiny model decodes here, in a background worker of this page (onnxruntime-web), and "
                "the server only checks the finished trace. Other models and settings decode on the server; the line "
                "below says where each Run went.")


def _knob_component(knob: Knob, value: Any, visible: bool) -> Any:
    info = knob_info(knob)
    common = dict(label=knob.label, visible=visible, elem_id=f"knob-{knob.name}")
    if knob.kind == "choice":
        return gr.Dropdown(choice_labels(knob), value=value, info=info, **common)
    if knob.kind == "bool":
        return gr.Checkbox(value=value, info=info, **common)
    if knob.name == "seed":  # no minimum, no rounding: a negative or 2.5 seed gets the run's readable message
        return gr.Number(value=value, info=info, **common)
    return FreeSlider(knob.lo, knob.hi, value=value, step=knob.step, info=info, **common)


def _knob_rows(ctx: Ctx, values: dict[str, Any], rules: tuple[str, ...], main: bool) -> None:
    """The knobs shown before "Advanced" (main) or under it, in KNOBS order; under the Seed, the line saying which
    random stream it drives (components/run/random_stream.py; app.py writes it again when the model changes)."""
    for knob in KNOBS:
        if is_main(knob.name) == main:
            ctx[f"knob_{knob.name}"] = _knob_component(knob, values[knob.name], shown(knob.name, *rules))
            if knob.name == "seed":
                ctx["run_stream"] = gr.Markdown(stream_line(DEFAULT_MODEL), elem_id="run-stream")


def build_run_tab(ctx: Ctx) -> None:
    values = dict(zip((k.name for k in KNOBS), preset_values(DEFAULT_PRESET)))
    rules = (values["method"], values["policy"], values["remasking"], values["loop"])
    with gr.Row():
        with gr.Column(scale=2, elem_id="run-settings"):
            # No max_length: the box never cuts a pasted text; Record refuses one over the limit and says so.
            ctx["prompt"] = gr.Textbox(EXAMPLE_PROMPTS[0], label="Prompt: type your question here", lines=3,
                                       elem_id="prompt", info=f"{TRAINED_ON} At most "
                                       f"{plural(MAX_PROMPT_CHARS, 'character', grouped=True)}.")
            ctx["prompt_scope"] = gr.Markdown("", elem_id="prompt-scope")
            ctx["prompt_examples"] = gr.Examples(EXAMPLE_PROMPTS, inputs=[ctx["prompt"]],
                        label="Example prompts the bundled models know (from the held-out set: never trained on)")
            ctx["model"] = gr.Dropdown(model_choices(), value=DEFAULT_MODEL, label="Model", allow_custom_value=True,
                                       elem_id="model",
                                       info="The bundled tiny models run on CPU (picking tiny-llada2, which "
                                       "edits its own tokens, switches to S2D2 with self-correction); the others "
                                       "load on first use. Names off this list are refused.")
            ctx["preset"] = gr.Dropdown(preset_choices(), value=DEFAULT_PRESET, label="Preset (sets every knob)",
                                        elem_id="preset")
            ctx["preset_note"] = gr.Markdown(preset_note(DEFAULT_PRESET), elem_id="preset-note")
            ctx["preset_drift"] = gr.Markdown("", elem_id="preset-drift")  # what was changed from the preset
            with gr.Row():
                ctx["run"] = gr.Button("▶ Record a run", variant="primary", elem_id="run")
                ctx["stop"] = gr.Button("■ Stop", variant="stop", elem_id="stop")
            # Where the Run decodes (components/run/page_decode.py): ticked where this server offers the runtime and
            # an export; the page still falls back to the server when it cannot, and the line under it says why.
            found = offered()
            ctx["in_page"] = gr.Checkbox(bool(found.runtime and found.models), label="Decode in my browser",
                                         elem_id="in-page", info=IN_PAGE_INFO)
            ctx["run_where"] = gr.Markdown("", elem_id="run-where")
            # Beside the button, not on the Prompt box: a Run that must wait for a place is told here its place in
            # the queue and the expected wait (Gradio's estimate: app.py points the Run's progress at this line).
            ctx["run_wait"] = gr.Markdown("*When the server is busy, a Run waits for a free place: its place in the "
                                          "queue and the expected wait show on this line.*", elem_id="run-wait")
            _knob_rows(ctx, values, rules, main=True)
            with gr.Accordion("Advanced: every other setting of this method and policy", open=False,
                              elem_id="advanced") as ctx.c["advanced"]:
                _knob_rows(ctx, values, rules, main=False)
        with gr.Column(scale=3):
            ctx["run_status"] = gr.Markdown("Pick a prompt and a preset, then record a run.", elem_id="run-status")
            # On a phone the settings column stacks above this one: after Record the page scrolls here (app.py).
            ctx["live"] = gr.HTML(render_live([]), elem_id="live", label="Live output")
            gr.Markdown("*Tokens appear here as blocks are committed, with the same glyphs as the Replay canvas; "
                        "greyed tokens are not part of the answer (after the stop token, or past the generation "
                        "length: the model decodes whole blocks). When the run ends (or you press Stop) the Replay "
                        "tab opens on it.*")
            ctx["output"] = gr.Textbox(label="Output text", interactive=False, lines=4, elem_id="output")
    # The page's plan (JSON: a page Run's prompt ids, settings and file URLs) and what the page lacks to decode
    # (filled by the Run's browser code): in the DOM, never shown.
    ctx["page_plan"] = gr.Textbox("", visible="hidden", elem_id="page-plan")
    ctx["page_can"] = gr.Textbox("", visible="hidden", elem_id="page-can")
    ctx["page_trace"] = gr.File(visible="hidden", elem_id="page-trace")  # the trace the page uploads
    ctx["run_ok"] = gr.State(False)
    ctx["run_final"] = gr.State(None)  # the run's final views, written again when Replay opens (handlers.final_views)
    preset_drift.wire(ctx)
