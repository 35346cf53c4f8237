"""S2D2 Explorer: record self-speculative decoding runs and replay every draft, verification and routing decision.

`python app.py` serves the app on the bundled model, opened on an example where S2D2's verifier catches a token the
diffusion baseline gets wrong. The same file runs unchanged as a Hugging Face Space. Wiring only: each tab's layout
is a builder in components/, every handler a pure function in components/replay/ or components/run/handlers.py that returns
{component name: value}; `keyed` maps the names to the components registered in the Ctx.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import gradio as gr
from starlette.middleware import Middleware

from components.serve import gpu_slot
from components.replay import handlers as h
from components.run import handlers as r
from components.replay import share_links
from components.compare.layout import build_compare_tab
from components.serve.disk_budget import prepare_cache
from components.serve.identity import identity_settings, sign_in_offered
from components.files.examples import examples_dir, first_example, list_examples, load_pair
from components.serve import front_door
from components.tour.layout import STOP_LABEL_JS, TourHandles, build_learn_tab
from components.replay.metrics_layout import build_metrics_tab
from components.serve.event_guard import protect
from components.serve.cpu_share import handler_slots
from components.serve import heap_settle
from components.serve.switch_interval import apply_switch_interval
from components.serve.queue_updates import status_update_rate
from components.replay.layout import build_replay_tab, step_js
from components.replay.browser_steps import PLAY_JS, STEP_JS, STEPPED
from components.replay.wire_steps import WireSteps
from components.serve.page_modules import serve as serve_modules
from components.run.wait_line import WATCH_JS
from components.serve.model_pool import preload_on_spaces
from components.run.layout import build_run_tab
from components.run import page_decode
from components.run.page_decode import before_run_js
from components.run.random_stream import stream_note
from components.run.run_choice import RUN_CHOICE_OUT, run_choice
from components.run.shared_batch import run_concurrency, sharing_on
from components.replay.share_row import COPY_JS
from components.views.story import Story, pair_story, single_story
from components.sweep.panel import build_sweep_tab
from components.tour.material import load_material
from components.tour.stops import TourMaterial
from components.tour.pictures import target
from components.theme import CSS, KEYS_JS, THEME
from components.ui import PRIVATE, Ctx, follow_js, keyed, within_js
from s2d2.limits import limits
from s2d2.trace import Trace

# On a phone only the first sentence of the intro, what the models know and the tour pointer show: the story line
# and the canvas must fit the first screen. The tour's core story is its first stops (components/tour/material.py).
INTRO = ("# S2D2 Explorer\n<span>A block-diffusion LM drafts a block of tokens at once; S2D2 has the **same "
         "model** check them in one extra forward<span class=\"wide\"> and replace the first wrong one</span>."
         "</span><span class=\"wide\"> ([arXiv 2603.25702](https://arxiv.org/abs/2603.25702)).</span> "
         "<span class=\"knows\">Its tiny models know only arithmetic word problems and Jane Austen's novels.</span> "
         "<span class=\"tour-pointer\">New here? Take the **Learn** tour<span class=\"wide\"> (the core story: "
         "about five minutes), or scrub the run below</span>.</span>")


@dataclass
class Opening:
    """The example the app opens with: its label, its first views, and the tour's material."""

    label: Optional[str] = None
    first: dict[str, Any] = field(default_factory=dict)
    trace: Optional[Trace] = None
    baseline: Optional[Trace] = None
    story: Optional[Story] = None
    material: Optional[TourMaterial] = None  # what the Learn tour draws (the opening pair and the tour's own runs)


def opening() -> Opening:
    label, _ = first_example()
    if label is None:
        return Opening()
    trace, baseline = load_pair(list_examples(examples_dir())[label])
    story = pair_story(trace, baseline) if baseline is not None else single_story(trace)
    material = load_material(trace, label, baseline, story, examples_dir())
    return Opening(label, h.open_example(label), trace, baseline, story, material)


TABS: list[tuple[str, str, Callable[[Ctx, Opening], Any]]] = [
    ("Replay", "replay", lambda ctx, o: build_replay_tab(ctx, o.label, o.first)),
    ("Learn", "learn", lambda ctx, o: build_learn_tab(ctx, o.material)),
    ("Run", "run", lambda ctx, o: build_run_tab(ctx)),
    ("Metrics & about", "metrics", lambda ctx, o: build_metrics_tab(ctx, o.first)),
    ("Compare", "compare", lambda ctx, o: build_compare_tab(ctx)),
    ("Sweep", "sweep", lambda ctx, o: build_sweep_tab(ctx)),
]


def wire_steps(ctx: Ctx) -> None:
    """Replay's scrubber, Play and view switches. Stepping runs in the browser from the trace's frame bundle
    (components/replay/browser_steps.py): the slider, ◀ ▶, the keys and Play send the server nothing; only a pinned
    token or a step past the bundle is handed to it through "server_step". /step stays in the API for gradio_client
    (the page never calls it)."""
    c, out = ctx.c, ctx.outputs

    def k(fn: Callable[..., Any]) -> Callable[..., Any]:
        return keyed(fn, ctx)

    step_in = [c["state"], c["slider"], c["mask_which"], c["color_by"], c["selected"]]
    api_step = gr.Button(visible=False)
    # cached steps answered on the event loop in the form Gradio sends (components/replay/wire_steps.py): Gradio's
    # own pre- and postprocessing is off for these two events because WireSteps does both, once per drawing
    quick = {"preprocess": False, "postprocess": False, "show_progress": "hidden"}
    outputs = [(name, c[name]) for name in h.STEP_OUT]
    api_step.click(WireSteps(step_in, outputs).handler(h.step_views), step_in, out(h.STEP_OUT), api_name="step",
                   **quick)
    c["slider"].change(None, [c["slider"], c["bundle"], *out(STEPPED)], out([*STEPPED, "server_step"]),
                       js=STEP_JS, show_progress="hidden", trigger_mode="always_last", **PRIVATE)  # never drop a step
    server_in = [c["state"], c["server_step"], *step_in[2:]]
    c["server_step"].change(WireSteps(server_in, outputs).handler(h.server_step), server_in, out(h.STEP_OUT),
                            trigger_mode="always_last", **quick, **PRIVATE)
    for switch in (c["mask_which"], c["color_by"]):  # a new bundle, drawn with the new switch
        switch.change(k(h.restyle), step_in, out([*h.STEP_OUT, "bundle"]), show_progress="hidden", **PRIVATE)
    c["canvas"].select(k(h.select_position), [c["state"], c["slider"], c["mask_which"]],
                       out(["selected", "mask", "detail", "residual"]), show_progress="hidden", **PRIVATE)
    c["slider"].change(None, c["slider"], c["slider"], js=step_js(0), **PRIVATE)  # a typed 2.5 shows as a step
    c["prev"].click(None, c["slider"], c["slider"], js=step_js(-1), **PRIVATE)  # in the browser: no dropped presses
    c["next"].click(None, c["slider"], c["slider"], js=step_js(1), **PRIVATE)
    c["play"].click(None, [c["play"], c["speed"], c["slider"]], [c["play"], c["slider"]], js=PLAY_JS, **PRIVATE)


def wire(ctx: Ctx, o: Opening, tour: Optional[TourHandles]) -> None:
    c, out = ctx.c, ctx.outputs

    def k(fn: Callable[..., Any]) -> Callable[..., Any]:
        return keyed(fn, ctx)

    wire_steps(ctx)
    c["example"].input(k(h.open_example), c["example"], out(h.LOAD_OUT), api_name="open_example")
    c["toggle"].input(k(lambda e, run, pinned: h.open_example(e, run, selected=pinned)),
                      [c["example"], c["toggle"], c["selected"]], out(h.LOAD_OUT), **PRIVATE)
    c["upload"].upload(k(h.upload_trace), c["upload"], out(h.LOAD_OUT), api_name="upload_trace")
    # On change, not input: Gradio's dropdown sends input twice for one pick (on the pick, then on the blur that
    # follows it) and again on any blur, so a second setting of every knob, landing late on a busy server, undid a
    # knob typed since (and a look at the list undid every knob). Select would miss a pick made with the keyboard.
    c["preset"].change(k(r.apply_preset), [c["preset"], c["knob_seed"]], out([*r.KNOB_OUT, *r.PRESET_OUT]),
                       **PRIVATE)
    rules = out(["knob_method", "knob_policy", "knob_remasking", "knob_loop"])
    for rule in rules:
        rule.input(k(r.knob_visibility), rules, out(r.KNOB_OUT), **PRIVATE)
    # What the bundled model knows, said once the prompt is typed (on leaving the box: a change event would carry
    # the whole text as its event data, and a pasted novel would fail at the front door) or the model changes; an
    # example prompt always fits (they are the task's held-out questions), so picking one clears the line.
    scope_in = [c["prompt"], c["model"]]
    for trigger in (c["prompt"].blur, c["prompt"].submit, c["model"].change):
        trigger(k(r.prompt_scope), scope_in, out(["prompt_scope"]), show_progress="hidden",
                js=within_js(limits().max_prompt_chars), **PRIVATE)
    c["model"].change(k(stream_note), c["model"], out(["run_stream"]), show_progress="hidden", **PRIVATE)
    c["prompt_examples"].dataset.click(k(lambda: {"prompt_scope": ""}), None, out(["prompt_scope"]),
                                       show_progress="hidden", **PRIVATE)
    c["model"].input(k(r.model_changed), [c["model"], c["knob_loop"], c["knob_seed"]],
                     out(["preset", *r.KNOB_OUT, *r.PRESET_OUT]), **PRIVATE)
    wire_run(ctx)
    if tour is not None:  # "Show in Replay": the example and step of the stop on screen
        tour.show.click(k(lambda at, step: h.open_tour_step(*target(tour.stops, at, step))
                          if target(tour.stops, at, step) else {}),
                        [tour.at, tour.step], out(["tabs", *h.LOAD_OUT]), **PRIVATE).then(
            None, js=follow_js("#headline"), **PRIVATE)
    # A public endpoint that shows the session's current trace (gradio_client runs no chained events).
    show = gr.Button(visible=False)
    show.click(k(h.show_state), [c["state"]], out(["tabs", *h.LOAD_OUT]), api_name="show_trace")


def opened_run(state: Any, ok: Any, final: Any) -> dict[str, Any]:
    """After a Run: Replay opens on it, and the Run tab's final views are written again in the same update, so
    the page never shows Replay on a run whose own last lines it missed (components/run/handlers.final_views)."""
    return {**h.show_state(state, ok is True), **r.final_views(state, ok, final)}


def wire_run(ctx: Ctx) -> None:
    """Record, Stop, the lines beside refused settings, and the hand-off to Replay once the run ends."""
    c, out = ctx.c, ctx.outputs

    def k(fn: Callable[..., Any]) -> Callable[..., Any]:
        return keyed(fn, ctx)

    # One GPU job per session (a second is refused at the door, gpu_slot.admit_decode); other pages wait in fair order.
    # Stop only raises the job's flag: the decode ends within one forward and the run itself writes the final status.
    # Sharing on (components/run/shared_batch.py): up to S2D2_BATCH_MAX Runs are in their handlers at once, all
    # decoding in the model's one shared batch, on a slot of their own; off: Run shares the one "gpu" slot.
    run_slot = gpu_slot.GPU_RUN if sharing_on() else gpu_slot.GPU
    # The page's Record: decoded in the page when "Decode in my browser" is ticked and the page can, else on the
    # server (components/run/run_choice.py); "run" stays the API's server Run (gradio_client runs no page code).
    run_ev = c["run"].click(k(gpu_slot.one_job(run_choice, r.run_refused)),
                            [c["prompt"], c["model"], c["in_page"], c["page_can"], *out(r.KNOB_OUT)],
                            out(RUN_CHOICE_OUT), concurrency_limit=run_concurrency(),
                            concurrency_id=run_slot, validator=gpu_slot.admit_decode,
                            show_progress_on=[c["run_wait"]],  # its place in the queue, next to the button
                            js=before_run_js(limits().max_prompt_chars), **PRIVATE)
    api_run = gr.Button(visible=False)
    api_run.click(k(gpu_slot.one_job(r.run, r.run_refused)), [c["prompt"], c["model"], *out(r.KNOB_OUT)],
                  out(r.RUN_OUT), api_name="run", concurrency_limit=run_concurrency(), concurrency_id=run_slot,
                  validator=gpu_slot.admit_decode, js=within_js(limits().max_prompt_chars))
    c["run"].click(None, js=follow_js("#run-status"), **PRIVATE)  # on a phone: to the status and live tokens
    # A setting the run refuses is said beside its field too (Advanced opened), not only in the status far away.
    c["run"].click(k(r.setting_notes), out(r.KNOB_OUT), out(r.NOTES_OUT), show_progress="hidden", **PRIVATE).then(
        None, js=follow_js(f"#run-settings .{r.FIELD_ERROR}"), **PRIVATE)  # to the field, if one was refused
    run_ev.then(k(opened_run), [c["state"], c["run_ok"], c["run_final"]],
                out(["tabs", *h.LOAD_OUT, *r.FINAL_OUT]), show_progress="hidden", **PRIVATE).then(
        None, js=follow_js("#headline"), **PRIVATE)  # Replay opens at its headline and canvas
    # A page Run's hand-off: the browser code decodes the plan in a worker and sends the trace text, which the server
    # reads as an upload (one event, charged and refusable like any other), then Replay opens on it.
    c["page_plan"].change(k(page_decode.receive), [c["page_plan"], c["page_trace"]], out(r.RUN_OUT),
                          js=page_decode.DECODE_JS,
                          show_progress="hidden", **PRIVATE).then(
        k(opened_run), [c["state"], c["run_ok"], c["run_final"]], out(["tabs", *h.LOAD_OUT, *r.FINAL_OUT]),
        show_progress="hidden", **PRIVATE).then(None, js=follow_js("#headline"), **PRIVATE)
    c["stop"].click(gpu_slot.stop, None, None, queue=False, **PRIVATE)  # Stop never waits behind the queue
    c["stop"].click(None, js=page_decode.STOP_JS, **PRIVATE)  # and a Run decoding in the page stops there


def wire_share(ctx: Ctx, demo: gr.Blocks) -> None:
    """Share a moment: a link's query parameters read on load; copy a link; make the HTML replay."""
    c, out = ctx.c, ctx.outputs
    # Every page load reads the link into a State (no visible output, so no spinner on the first screen); only a
    # link that names a moment changes it, and that change opens the moment. Without one, the load sets the
    # download of the opening trace.
    demo.load(keyed(share_links.page_load, ctx), c["state"], out(["moment", "download"]), show_progress="hidden",
              **PRIVATE)
    c["moment"].change(keyed(share_links.open_link, ctx), c["moment"], out([*h.LOAD_OUT, "share_note"]), **PRIVATE)
    c["share"].click(keyed(share_links.share_link, ctx), [c["state"], c["toggle"], c["slider"]],
                     out(["share_link", "share_status"]), **PRIVATE).then(
        None, out(["share_link", "share_status"]), out(["share_link", "share_status"]), js=COPY_JS, **PRIVATE)
    # An export is CPU work one visitor can repeat: it runs as that visitor's one job, like a decode (refused while
    # another runs, stoppable), and two builds at a time, whoever asks.
    c["make_html"].click(keyed(share_links.html_replay_job, ctx), [c["state"], c["slider"]],
                         out(["html_file", "share_status"]), concurrency_limit=2, concurrency_id="html_export",
                         validator=gpu_slot.admit_decode, **PRIVATE)
    c["state"].change(keyed(share_links.reset_share, ctx), None, out(["share_link", "html_file", "share_status"]),
                      **PRIVATE)


def build_demo() -> gr.Blocks:
    prepare_cache()  # before any Block reads GRADIO_TEMP_DIR: this run's folder; dead runs' files deleted
    os.environ.setdefault("FORWARDED_ALLOW_IPS", "")  # uvicorn keeps the socket peer: identity reads proxy hops
    identity_settings()  # refuses FORWARDED_ALLOW_IPS=*, warns loudly when identity could be forged
    preload_on_spaces()
    serve_modules()  # the page's ES modules: Replay's stepping, the Run's wait line in words
    o = opening()
    ctx = Ctx(o.trace)
    built: dict[str, Any] = {}
    # Gradio's cache (uploads, downloads) is swept every 10 minutes of files older than an hour, and wiped on
    # restart; exported traces have their own bounded folder (components/files/traces.py).
    with gr.Blocks(title="S2D2 Explorer", delete_cache=(600, 3600)) as demo:
        gr.Markdown(INTRO, elem_id="intro")
        if sign_in_offered():  # a signed-in student is their own unit of fairness (components/serve/identity.py)
            gr.LoginButton("Sign in with Hugging Face: your own share of the server, even behind a school network",
                           elem_id="sign-in", size="sm")
        ctx["state"] = gr.State(o.first.get("state"))
        # every tab's name in sight on a phone (a second row), never behind Gradio's "⋯" menu (newcomer walk)
        with gr.Tabs(selected="replay", overflow_behavior="wrap", elem_id="tabs") as ctx.c["tabs"]:
            for label, tab_id, build in TABS:
                with gr.Tab(label, id=tab_id):
                    built[tab_id] = build(ctx, o)
        wire(ctx, o, built["learn"])
        wire_share(ctx, demo)
        demo.load(None, js=WATCH_JS, **PRIVATE)  # the Run's place in the queue, in words (in the page only)
        demo.unload(gpu_slot.on_unload)  # a closed tab or client stops its job within one forward
    # api_open=False: no event runs outside the queue (POST /gradio_api/run/<name> answers only for Stop, which is
    # outside it by design); protect() wraps every event, whichever tab registered it (components/serve/event_guard.py).
    # status_update_rate: places in line are sent every second, not to every waiting event at every start
    # (components/serve/queue_updates.py)
    demo.queue(default_concurrency_limit=handler_slots(), max_size=limits().queue_size, api_open=False,
               status_update_rate=status_update_rate())
    return protect(demo)


# A session's state is a small handle (components/serve/state_budget.py keeps the traces under byte budgets); Gradio's own
# per-session record is about 0.4 MB plus the last views sent. The front door (components/serve/front_door.py) keeps
# at most S2D2_MAX_SESSIONS sessions and never evicts an active one; Gradio's capacity has a margin for races.
PAGE_JS = f"() => {{ ({KEYS_JS})(); ({STOP_LABEL_JS})(); }}"  # the page-wide scripts, each its own function
LAUNCH_KWARGS: dict[str, Any] = dict(theme=THEME, css=CSS, js=PAGE_JS,
                                     state_session_capacity=limits().max_sessions + 64,
                                     max_file_size=limits().max_upload_bytes,
                                     app_kwargs={"middleware": [Middleware(front_door.FrontDoor)]})

front_door.install()  # the one place the serve package is wired together: the watchdog reads the stream counts
apply_switch_interval()  # the event loop gets the interpreter back sooner (components/serve/switch_interval.py)
demo = build_demo()


def serve(**kwargs: Any) -> None:
    """Start the server (`python app.py`, the benchmarks' servers): the collector's full passes kept off the heap
    that survived the last one (components/serve/heap_settle.py: a process-wide hook, so it is installed here, not
    at import), then Gradio's launch with LAUNCH_KWARGS and `kwargs`."""
    heap_settle.install()
    demo.launch(**{**LAUNCH_KWARGS, **kwargs})


if __name__ == "__main__":
    serve()
