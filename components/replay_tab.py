"""The Replay tab's layout: example pick and toggle, the one-line story, scrubber, canvas, strip, routing, masks.

Layout only (components registered in the Ctx by name); app.py wires the events.
"""
from __future__ import annotations

from typing import Any, Optional

import gradio as gr

from s2d2.limits import limits

from .canvas import COLOR_BY
from .examples import examples_dir, list_examples
from .handlers import DETAIL_HINT, NO_TRACE, RUNS
from .mask_view import WHICH
from .share_row import build_share_note, build_share_row
from .ui import ClampedSlider, Ctx

# Click a token: copy its details (the title attribute, already escaped text) into the detail box, and tell the
# server which position was picked (the mask viewer outlines its rows).
CANVAS_JS = """
element.addEventListener('click', (e) => {
  const tok = e.target.closest('[data-pos]');
  if (!tok) return;
  const box = document.querySelector('#token-detail .s2d2-detail');
  if (box) { box.textContent = tok.getAttribute('title') || ''; }
  trigger('select', {position: Number(tok.dataset.pos)});
});
"""
# A narrow screen scrolls the strip sideways: bring the first rejected column into view whenever the strip changes.
STRIP_JS = """
const centre = () => {
  const wrap = element.querySelector('.s2d2-strip .tbl');
  const col = wrap && wrap.querySelector('th.first-reject');
  if (!col) return;
  const hidden = col.offsetLeft + col.offsetWidth > wrap.scrollLeft + wrap.clientWidth;
  if (hidden) { wrap.scrollLeft = Math.max(0, col.offsetLeft - (wrap.clientWidth - col.offsetWidth) / 2); }
};
centre();
watch('value', centre);
"""
COLOR_CHOICES = [("state", "state"), ("p (draft)", "p"), ("q (verifier)", "q"), ("r = min(1, q/p)", "r")]


def build_replay_tab(ctx: Ctx, example_label: Optional[str], first: dict[str, Any]) -> None:
    """The first screen: example `example_label`, whose views (handlers.open_example) are `first`."""
    names = list(list_examples(examples_dir()))
    has_pair = bool(first) and bool(first["toggle"].visible)
    ctx["headline"] = gr.Markdown(first.get("headline", NO_TRACE), elem_id="headline")
    build_share_note(ctx)
    with gr.Row(elem_id="trace-row", equal_height=True):
        ctx["toggle"] = gr.Radio(list(RUNS.values()), value=RUNS["s2d2"], visible=has_pair, label="Replay which run",
                                 elem_id="run-toggle", scale=4, min_width=300)
        ctx["example"] = gr.Dropdown(names, label="Example", scale=3, value=example_label, elem_id="example",
                                     min_width=300)
    ctx["summary"] = gr.Textbox(first.get("summary", NO_TRACE), label="This step", interactive=False,
                                elem_id="summary", lines=2)
    slider = first.get("slider")
    with gr.Row(elem_id="scrubber", equal_height=True):
        ctx["prev"] = gr.Button("◀", size="sm", scale=0, min_width=44, elem_id="prev-btn")
        ctx["slider"] = ClampedSlider(0, slider.maximum if slider else 1, value=slider.value if slider else 0, step=1,
                                      label=slider.label if slider else "Step", elem_id="step-slider", scale=4,
                                      min_width=120)
        ctx["next"] = gr.Button("▶", size="sm", scale=0, min_width=44, elem_id="next-btn")
    ctx["timer"] = gr.Timer(1.0, active=False)
    ctx["playing"] = gr.State(False)
    ctx["selected"] = gr.State(None)
    ctx["canvas"] = gr.HTML(first.get("canvas", ""), elem_id="canvas", label="Token canvas", js_on_load=CANVAS_JS)
    ctx["detail"] = gr.HTML(first.get("detail", DETAIL_HINT), elem_id="token-detail",
                            html_template='<div class="s2d2-detail" aria-live="polite">${value}</div>')
    with gr.Row(elem_id="canvas-options"):
        ctx["color_by"] = gr.Radio(COLOR_CHOICES, value=COLOR_BY[0], label="Colour tokens by", scale=3,
                                   elem_id="color-by")
        with gr.Column(scale=2, min_width=200):
            ctx["play"] = gr.Button("▶ Play", size="sm", elem_id="play")
            ctx["speed"] = ClampedSlider(0.25, 4, value=1, step=0.25, label="Play speed (steps per second)", scale=2)
    ctx["legend"] = gr.HTML(first.get("legend", ""), elem_id="legend")
    ctx["strip"] = gr.HTML(first.get("strip", ""), elem_id="strip", label="Verification strip", js_on_load=STRIP_JS)
    ctx["residual"] = gr.HTML(first.get("residual", ""), elem_id="residual", label="The residual draw")
    with gr.Row():
        ctx["routing"] = gr.Plot(first.get("routing"), label="Routing: score vs threshold per step",
                                 show_label=False, elem_id="routing", min_width=320)
        with gr.Column():
            ctx["mask_which"] = gr.Radio(list(WHICH), value="auto", label="Forward shown in the mask viewer")
            ctx["mask"] = gr.Plot(first.get("mask"), label="Attention mask", show_label=False, elem_id="mask")
    build_share_row(ctx)
    with gr.Accordion("This trace: details, download, or upload your own", open=False, elem_id="files"):
        ctx["title"] = gr.Markdown(first.get("title", ""), elem_id="trace-title")
        ctx["load_status"] = gr.Markdown(first.get("load_status", NO_TRACE), elem_id="load-status")
        with gr.Row():
            ctx["upload"] = gr.UploadButton(f"⬆ Upload a trace (.json, ≤ {limits().max_upload_mb:g} MB)",
                                            file_types=[".json"], elem_id="upload")
            ctx["download"] = gr.DownloadButton("⬇ Download this trace (JSON)", value=first.get("download"))
