"""The Compare tab: layout and wiring over components/compare/lanes.py (lanes) and components/compare/whatif_panel.py (what-if).

Nothing shows but the inputs until a comparison has run; the block control counts answer blocks from 1 (0 = the
prompt prefill), clamps what is typed and ignores a blank box; the what-if shows only the chosen lane's knobs. Run
all lanes and the what-if re-run are the session's one GPU job (components/serve/gpu_slot.py), and Stop ends either within
one forward.
"""
from __future__ import annotations

from typing import Any, Iterator, Optional

import gradio as gr

from components.serve import gpu_slot as guard
from components.compare.lanes import (DEFAULT_LANES, GEN_MAX, GEN_MIN, MAX_LANES, NO_RUN, VIEW_OUT, block_range,
                                      compare_views, run_compare_steps)
from components.compare.lane_names import compare_choices, lane_about
from components.run.knobs import EXAMPLE_PROMPTS
from components.ui import PRIVATE, ClampedSlider, Ctx, FreeSlider, keyed, within_js
from s2d2.limits import limits
from components.compare.whatif_panel import (KNOB_OUT, WHATIF_KNOBS, knob_info, knob_updates, knob_values,
                                             rerun_whatif, s2d2_choices, s2d2_lanes, whatif_view)


def after_run(state: Any) -> dict[str, Any]:
    """Everything a new comparison shows: the results, the block control's range, the what-if lane and knobs."""
    if not state:
        return {}
    lo, hi = block_range(state)
    lanes = s2d2_lanes(state)
    lane = lanes[0] if lanes else None
    views = compare_views(state, min(1, hi))
    return {"cmp_empty": gr.Markdown(visible=False), "cmp_results": gr.Column(visible=True),
            "cmp_block": gr.Slider(minimum=lo, maximum=max(hi, lo + 1), value=min(1, hi), step=1,
                                   label=f"Answer block ({lo}–{hi}{', 0 = prompt prefill' if lo == 0 else ''}) "
                                         "— drives every lane"),
            **views, "cmp_metrics": metrics_frame(views["cmp_metrics"]),
            "wi_lane": gr.Dropdown(s2d2_choices(state), value=lane),
            **knob_updates(state, lane), **(whatif_view(state, lane, *knob_values(state, lane)) if lane else {})}


def metrics_frame(table: Any) -> Any:
    """The metrics table with its columns sized to the lanes: the metric names a fifth of the width, the lanes share
    the rest, so a fourth lane's column is never cut at 1366 px (its cells wrap instead)."""
    headers = table.get("headers", []) if isinstance(table, dict) else []
    lanes = max(1, len(headers) - 1)
    return gr.Dataframe(value=table, column_widths=["20%"] + [f"{80 / lanes:.4g}%"] * lanes)


def build_compare_tab(ctx: Optional[Ctx] = None, model_name: str = "tiny") -> Ctx:
    """Lay out and wire the Compare tab (its state is its own: a comparison is not the Replay tab's trace)."""
    ctx = ctx if ctx is not None else Ctx()
    names = compare_choices()  # what tells lanes apart first, the preset's id last (lane_names.py)
    ctx["cmp_state"] = gr.State(None)
    with gr.Row():
        ctx["cmp_prompt"] = gr.Textbox(EXAMPLE_PROMPTS[0], label="Prompt (all lanes)", lines=2, scale=3,
                                       elem_id="cmp-prompt", min_width=300)  # no max_length: Run refuses, never cuts

        ctx["cmp_seed"] = gr.Number(0, label="Seed (all lanes)", scale=1, elem_id="cmp-seed")
        ctx["cmp_gen"] = FreeSlider(GEN_MIN, GEN_MAX, value=48, step=8, label="Generation length", scale=1)
    lanes, abouts = [], []
    for pair in (DEFAULT_LANES[:2], DEFAULT_LANES[2:]):  # two a row on a desktop, one a row on a phone
        with gr.Row(elem_classes="cmp-lane-row"):
            for v in pair:
                n = len(lanes) + 1
                with gr.Column(min_width=260):
                    lanes.append(gr.Dropdown(names, value=v, label=f"Lane {n}", elem_id=f"cmp-lane-{n}"))
                    abouts.append(gr.Markdown(lane_about(v), elem_id=f"cmp-lane-{n}-about",
                                              elem_classes="cmp-lane-about"))
    with gr.Accordion("Custom settings per lane (KEY=VALUE, e.g. acceptance=greedy_exact policy=always)", open=False):
        with gr.Row():
            extra = [gr.Textbox("", label=f"Lane {i + 1} overrides", lines=1) for i in range(MAX_LANES)]
    with gr.Row():
        ctx["cmp_run"] = gr.Button("▶ Run all lanes", variant="primary", elem_id="cmp-run")
        ctx["cmp_stop"] = gr.Button("■ Stop", variant="stop", elem_id="cmp-stop")
    ctx["cmp_status"] = gr.Markdown("", elem_id="cmp-status")
    ctx["cmp_empty"] = gr.Markdown(NO_RUN, elem_id="cmp-empty")
    with gr.Column(visible=False, elem_id="cmp-results") as ctx.c["cmp_results"]:
        ctx["cmp_block"] = ClampedSlider(0, 1, value=1, step=1, label="Answer block — drives every lane",
                                         elem_id="cmp-block")
        ctx["cmp_lanes_html"] = gr.HTML("", elem_id="cmp-lanes")
        with gr.Row():
            ctx["cmp_nfe"] = gr.Plot(label="Shared forwards axis", show_label=False, elem_id="cmp-nfe", min_width=300)
            ctx["cmp_wall"] = gr.Plot(label="Shared wall-time axis", show_label=False, elem_id="cmp-wall",
                                      min_width=300)
        ctx["cmp_metrics"] = gr.Dataframe([], label="Metrics per lane", interactive=False, elem_id="cmp-metrics",
                                          wrap=True)  # four lanes' columns fit at 1366 px, their cells wrap
        ctx["cmp_diff"] = gr.Markdown("", elem_id="cmp-diff")
        with gr.Accordion("What if the thresholds were different?", open=True):
            gr.Markdown("Moving a threshold re-decides every recorded step from its recorded inputs (no model call). "
                        "Decisions are exact up to the first flip; after it, the run would have gone elsewhere.")
            ctx["wi_lane"] = gr.Dropdown([], label="S2D2 lane", elem_id="wi-lane")
            with gr.Row():
                for (name, label, lo, hi, step, _), value in zip(WHATIF_KNOBS, knob_values(None, None)):
                    ctx[f"wi_{name}"] = ClampedSlider(lo, hi, value=value, step=step, label=label, visible=False,
                                                      info=knob_info(name), elem_id=f"wi-{name}")
            ctx["wi_summary"] = gr.Markdown("", elem_id="wi-summary")
            ctx["wi_table"] = gr.HTML("", elem_id="wi-table")
            ctx["wi_rerun"] = gr.Button("↻ Re-run from the start with these thresholds", elem_id="wi-rerun")
            ctx["wi_status"] = gr.Markdown("")
            ctx["wi_metrics"] = gr.Dataframe([], label="Recorded vs re-run", interactive=False, visible=False)
            ctx["wi_side"] = gr.HTML("")
    _wire(ctx, model_name, lanes, extra)
    for lane, about in zip(lanes, abouts):  # the whole description under the box, whatever the box's width shows
        lane.change(lane_about, lane, about, **PRIVATE)
    return ctx


def kept_note(status: str, last: Any) -> str:
    """A refused or stopped comparison's status (⚠ / ■), and, when an earlier comparison is still on screen, which
    one it is: its lanes stay, so they must not pass for this press's (walk: a refused seed left seed 99's lanes
    under the message, unnamed). Progress lines pass unchanged."""
    if not status.startswith(("⚠", "■")) or not isinstance(last, dict) or "seed" not in last:
        return status
    return (f"{status}\n\nNothing new was compared: the lanes below are still the last comparison's (seed "
            f"{last['seed']}).")


AFTER_OUT = ["cmp_empty", "cmp_results", "cmp_block", *VIEW_OUT, "wi_lane", *KNOB_OUT, "wi_summary", "wi_table"]


def _wire(ctx: Ctx, model_name: str, lanes: list[Any], extra: list[Any]) -> None:
    def run(last: Any, prompt: str, seed: Any, gen: Any, *lane_values: Any) -> Iterator[tuple[str, Any]]:
        # each lane's progress in the status line while they run; a refused or stopped run keeps the last comparison,
        # and says that what is on screen is that one (`last`: the session's comparison; a State, not in the API)
        for status, state in run_compare_steps(prompt, model_name, seed, gen, *lane_values):
            yield (kept_note(status, last) if state is None else status), gr.skip() if state is None else state

    inputs = [ctx["cmp_state"], ctx["cmp_prompt"], ctx["cmp_seed"], ctx["cmp_gen"], *lanes, *extra]
    # One GPU job per session, refused at the queue's door (guard.admit_decode); Stop ends it within one forward.
    ev = ctx["cmp_run"].click(guard.one_job(run, lambda msg: (msg, gr.skip())), inputs,
                              [ctx["cmp_status"], ctx["cmp_state"]], api_name="compare", concurrency_limit=1,
                              concurrency_id="gpu", validator=guard.admit_decode,
                              js=within_js(limits().max_prompt_chars),  # refused whole by the handler, never a 413
                              show_progress="hidden")  # the status line says each lane's progress itself
    ev.then(keyed(after_run, ctx), ctx["cmp_state"], ctx.outputs(AFTER_OUT), **PRIVATE)
    ctx["cmp_block"].change(keyed(compare_views, ctx), [ctx["cmp_state"], ctx["cmp_block"]], ctx.outputs(VIEW_OUT),
                            **PRIVATE)
    wi_in = [ctx["cmp_state"], ctx["wi_lane"], *ctx.outputs(KNOB_OUT)]
    ctx["wi_lane"].input(keyed(knob_updates, ctx), [ctx["cmp_state"], ctx["wi_lane"]], ctx.outputs(KNOB_OUT),
                         **PRIVATE)
    for knob in [ctx["wi_lane"], *ctx.outputs(KNOB_OUT)]:
        knob.change(keyed(whatif_view, ctx), wi_in, ctx.outputs(["wi_summary", "wi_table"]), **PRIVATE)
    ctx["wi_rerun"].click(keyed(guard.one_job(rerun_whatif, lambda msg: {"wi_status": msg}), ctx), wi_in,
                          ctx.outputs(["wi_status", "wi_metrics", "wi_side"]), concurrency_limit=1,
                          concurrency_id="gpu", validator=guard.admit_decode, **PRIVATE)
    ctx["cmp_stop"].click(guard.stop, None, None, queue=False, **PRIVATE)  # never waits behind the queue
