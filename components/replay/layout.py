"""The Replay tab's layout: example pick and toggle, the one-line story, scrubber, canvas, strip, routing, masks.

Layout only (components registered in the Ctx by name); app.py wires the events.
"""
from __future__ import annotations

from typing import Any, Optional

import gradio as gr

from s2d2.limits import limits

from components.views.canvas import COLOR_BY
from components.files.examples import examples_dir, list_examples
from components.views.focus import FOCUS_JS
from components.replay.browser_steps import SCRUBBER_NOW
from components.replay.handlers import DETAIL_HINT, NO_TRACE, RUNS
from components.views.attention_mask import WHICH
from components.replay.share_row import build_share_note, build_share_row
from components.ui import ClampedSlider, Ctx

# Click a token: copy its details (the title attribute, already escaped text) into the detail box under a line kept
# for the server's plain sentence (token_detail.detail_html), and tell the server which position was picked (the
# mask viewer outlines its rows).
CANVAS_JS = """
element.addEventListener('click', (e) => {
  const tok = e.target.closest('[data-pos]');
  if (!tok) return;
  const box = document.querySelector('#token-detail .s2d2-detail');
  if (box) {
    const pin = document.createElement('span');
    pin.dataset.pinned = tok.dataset.pos;
    const words = document.createElement('span');  // the server's sentence comes into this line: no jump then
    words.className = 'words';
    words.textContent = '…';
    pin.replaceChildren(words, '◉ ' + (tok.getAttribute('title') || ''));
    box.replaceChildren(pin);
  }
  trigger('select', {position: Number(tok.dataset.pos)});
});
"""


def step_js(delta: int) -> str:
    """The scrubber moves in the browser: ◀ / ▶ (and held ← / → keys, which click them) set the slider at once from
    its current value, so no press waits for a server round trip and none is dropped; `delta` 0 snaps a typed value
    (2.5, 1000, −3) to a whole step in range, the way the server reads it (components/trace_index.clamp_step). The
    snap reads the box as it is when it runs (browser_steps.SCRUBBER_NOW says why): sent for an older value and
    finishing after a ▶, it would set the scrubber back a step."""
    blank = "v" if delta == 0 else "lo"
    now = f"(() => {{ const b = {SCRUBBER_NOW}; return b ? b.value : v; }})()" if delta == 0 else "v"
    return f"""(v) => {{
  const r = document.querySelector('#step-slider input[type=range]');
  const lo = r ? Number(r.min) : 0, hi = r ? Number(r.max) : Infinity;
  const now = {now};
  const x = Number(now);
  if (now === null || now === '' || !isFinite(x)) return {blank};
  return Math.min(hi, Math.max(lo, Math.floor(x + 0.5) + ({delta})));
}}"""


COLOR_CHOICES = [("state", "state"), ("p (draft)", "p"), ("q (verifier)", "q"), ("r = min(1, q/p)", "r")]


def build_replay_tab(ctx: Ctx, example_label: Optional[str], first: dict[str, Any]) -> None:
    """The first screen: example `example_label`, whose views (handlers.open_example) are `first`. Phone first: the
    story, then the canvas with the verifier's evidence under it, then the scrubber; the run toggle and the
    example pick come after (on a 390 x 844 screen the canvas around the rejected token is on the first screen)."""
    ctx["headline"] = gr.Markdown(first.get("headline", NO_TRACE), elem_id="headline")
    build_share_note(ctx)  # says what part of an opened share link was ignored (hidden otherwise)
    ctx["selected"] = gr.State(None)
    # Every step's views, drawn in the browser (components/replay/frame_bundle.py); never shown itself.
    ctx["bundle"] = gr.JSON(first.get("bundle"), visible=False, elem_id="frame-bundle")
    # The key to the glyphs sits just above the canvas, so it is on the first screen with it (desktop and phone).
    ctx["legend"] = gr.HTML(first.get("legend", ""), elem_id="legend")
    ctx["canvas"] = gr.HTML(first.get("canvas", ""), elem_id="canvas", label="Token canvas", js_on_load=CANVAS_JS)
    ctx["detail"] = gr.HTML(first.get("detail", DETAIL_HINT), elem_id="token-detail",
                            html_template='<div class="s2d2-detail" aria-live="polite">${value}</div>')
    ctx["step_words"] = gr.HTML(first.get("step_words", ""), elem_id="step-words",
                                html_template='<div class="s2d2-words"><b>This step.</b> ${value}</div>')
    _scrubber(ctx, first.get("slider"))
    with gr.Accordion("This step in numbers (K̂, τ, forwards)", open=False, elem_id="step-numbers"):
        ctx["summary"] = gr.Textbox(first.get("summary", NO_TRACE), label="This step", interactive=False,
                                    elem_id="summary", lines=2)
    _run_pick(ctx, example_label, bool(first) and bool(first["toggle"].visible),
              getattr(first["toggle"], "info", None) if first else None)
    with gr.Row(elem_id="canvas-options"):
        ctx["color_by"] = gr.Radio(COLOR_CHOICES, value=COLOR_BY[0], label="Colour tokens by", scale=3,
                                   elem_id="color-by")
        with gr.Column(scale=2, min_width=200):
            ctx["play"] = gr.Button("▶ Play", size="sm", elem_id="play")
            ctx["speed"] = ClampedSlider(0.25, 4, value=1, step=0.25, label="Play speed (steps per second)", scale=2,
                                         elem_id="play-speed")
    ctx["strip"] = gr.HTML(first.get("strip", ""), elem_id="strip", label="Verification strip", js_on_load=FOCUS_JS)
    ctx["residual"] = gr.HTML(first.get("residual", ""), elem_id="residual", label="The residual draw")
    with gr.Row():
        ctx["routing"] = gr.Plot(first.get("routing"), label="Routing: score vs threshold per step",
                                 show_label=False, elem_id="routing", min_width=320)
        with gr.Column():
            ctx["mask_which"] = gr.Radio(list(WHICH), value="auto", label="Forward shown in the mask viewer")
            ctx["mask"] = gr.Plot(first.get("mask"), label="Attention mask", show_label=False, elem_id="mask")
    build_share_row(ctx)
    _files(ctx, first)


def _scrubber(ctx: Ctx, slider: Any) -> None:
    with gr.Row(elem_id="scrubber", equal_height=True):
        ctx["prev"] = gr.Button("◀", size="sm", scale=0, min_width=44, elem_id="prev-btn")
        ctx["slider"] = ClampedSlider(0, slider.maximum if slider else 1, value=slider.value if slider else 0, step=1,
                                      label=slider.label if slider else "Step", elem_id="step-slider", scale=4,
                                      min_width=120)
        ctx["next"] = gr.Button("▶", size="sm", scale=0, min_width=44, elem_id="next-btn")
    # The step the browser hands to the server (stepper.js): -1 while the browser draws every step itself.
    ctx["server_step"] = gr.Number(-1, visible=False, elem_id="server-step")


def _run_pick(ctx: Ctx, example_label: Optional[str], has_pair: bool, info: Optional[str]) -> None:
    with gr.Row(elem_id="trace-row", equal_height=True):
        ctx["toggle"] = gr.Radio(list(RUNS.values()), value=RUNS["s2d2"], visible=has_pair, label="Replay which run",
                                 info=info, elem_id="run-toggle", scale=4, min_width=300)
        ctx["example"] = gr.Dropdown(list(list_examples(examples_dir())), label="Example", scale=3,
                                     value=example_label, elem_id="example", min_width=300)


def _files(ctx: Ctx, first: dict[str, Any]) -> None:
    with gr.Accordion("This trace: details, download, or upload your own", open=False, elem_id="files"):
        ctx["title"] = gr.Markdown(first.get("title", ""), elem_id="trace-title")
        ctx["load_status"] = gr.Markdown(first.get("load_status", NO_TRACE), elem_id="load-status")
        with gr.Row():
            # Any file type reaches the handler: a wrong one gets a message that replaces the last one on the
            # status line (the browser's own file-type check shows a toast and leaves a stale message behind).
            ctx["upload"] = gr.UploadButton(f"⬆ Upload a trace (.json, ≤ {limits().max_upload_mb:g} MB)",
                                            elem_id="upload")
            # Its file arrives with the page load (share.page_load), not in the published config.
            ctx["download"] = gr.DownloadButton("⬇ Download this trace (JSON)", value=None)
