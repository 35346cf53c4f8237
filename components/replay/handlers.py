"""Event handlers: Gradio values in, {view name: value} out.

Every handler returns (or yields) a dict keyed by the names of the components it updates; a name it leaves out is
left unchanged on screen. app.py maps names to components (components/ui.py `keyed`). The output lists below
name what each event may update. Replay handlers never touch the model; errors become one readable message.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import gradio as gr

from s2d2.trace import Trace

from components.files.examples import examples_dir, list_examples, load_pair
from components.replay.frame_bundle import bundle_for
from components.replay.step_cache import STEPS
from components.views.attention_mask import mask_figure
from components.views.canvas import COLOR_BY
from components.serve.input_numbers import as_float, as_int
from components.views.residual import residual_html
from components.escape import md_text
from components.views.step_views import STEP_VIEWS, StepOptions, metrics_table, render_step, render_timelines, trace_title
from components.views.prompt_scope import scope_note
from components.views.story import pair_note, pair_story, question_of, single_story
from components.views.token_detail import DETAIL_HINT, detail_html
from components.views.trace_index import clamp_step
from components.files.traces import TraceError, describe_error, export_path, make_state, parse_upload, trace_from_state

NO_TRACE = "No trace loaded: pick an example, upload a trace file, or record a run."
RUNS = {"s2d2": "S2D2: draft, route, verify", "baseline": "Diffusion alone: same B, no verifier"}
TIMELINES = ["commit_map", "nfe", "hist", "perpos"]
STEP_OUT = list(STEP_VIEWS)
# A trace opens with the views' default switches (its bundle is drawn with them), so the radios are set back too.
TRACE_OUT = ["title", "slider", *STEP_OUT, *TIMELINES, "metrics", "download", "selected", "bundle", "color_by",
             "mask_which"]
LOAD_OUT = ["state", "load_status", "headline", "toggle", "example", *TRACE_OUT]


def step_views(state: Any, step: Any, mask_which: str = "auto", color_by: str = "state",
               selected: Optional[int] = None) -> dict[str, Any]:
    """Every per-step view of the session's trace at `step`; nothing changes for a blank step box."""
    if step is None:
        return {}
    trace = trace_from_state(state)
    if trace is None:
        return {"canvas": "", "strip": "", "routing": None, "mask": None, "summary": NO_TRACE, "step_words": "", "legend": "",
                "detail": DETAIL_HINT, "residual": ""}
    options = StepOptions(mask_which, color_by, selected)
    key = state.get("key") if isinstance(state, dict) else None
    switches = repr((mask_which, color_by, selected))  # as sent (any JSON value): equal only when the same
    if not isinstance(key, str) or len(switches) > 200:  # an older handle names no stored text: drawn each time
        return render_step(trace, step, options)
    # a state key names one trace's exact text: a class on the same example shares each step's drawing
    return STEPS.views((key, clamp_step(trace, step), switches), lambda: render_step(trace, step, options))


def server_step(state: Any, step: Any, mask_which: str = "auto", color_by: str = "state",
                selected: Optional[int] = None) -> dict[str, Any]:
    """A step the browser hands to the server (components/replay/js/stepper.js): a pinned token's views, or a step
    past the frame bundle. -1 (the browser drew the step itself) changes nothing."""
    value = as_float(step)
    if value is None or value < 0:
        return {}
    return step_views(state, step, mask_which, color_by, selected)


def restyle(state: Any, step: Any, mask_which: str = "auto", color_by: str = "state",
            selected: Optional[int] = None) -> dict[str, Any]:
    """A new colouring or mask forward: this step's views and the frame bundle drawn with them."""
    out = step_views(state, step if step is not None else 0, mask_which, color_by, selected)
    trace = trace_from_state(state)
    if trace is not None:
        out["bundle"] = bundle_for(trace, color_by, mask_which)
    return out


def trace_views(trace: Trace, step: int = 0, selected: Optional[int] = None) -> dict[str, Any]:
    """Everything that changes when a new trace is loaded, opened at scrubber value `step` (`selected`: a position
    still pinned, e.g. across the run toggle; its details follow the run on screen)."""
    n = len(trace.steps)
    step = clamp_step(trace, step)
    if selected is not None and not 0 <= selected < trace.header.total_length:
        selected = None
    timelines = dict(zip(TIMELINES, render_timelines(trace)))
    return {"title": trace_title(trace),
            "slider": gr.Slider(minimum=0, maximum=max(1, n), value=step, step=1,
                                label=f"Step (of {n})"),
            **render_step(trace, step, StepOptions(selected=selected)), **timelines, "metrics": metrics_table(trace),
            "download": export_path(trace), "selected": selected, "bundle": bundle_for(trace),
            "color_by": COLOR_BY[0], "mask_which": "auto"}


def open_example(name: Optional[str], run: str = RUNS["s2d2"], step: Optional[int] = None,
                 directory: Optional[Path] = None, selected: Optional[int] = None) -> dict[str, Any]:
    """Load example `name` (its S2D2 run, or its diffusion-alone partner when `run` says so), opened where its
    story happens unless `step` is given; a pinned position `selected` stays pinned (the run toggle)."""
    example = list_examples(directory or examples_dir()).get(name or "")
    if example is None:
        return {"load_status": f"Unknown example {md_text(name, 80)!r}."}
    try:
        main, partner = load_pair(example)
    except TraceError as exc:
        return {"load_status": describe_error(exc)}
    baseline = partner is not None and run == RUNS["baseline"]
    story = pair_story(main, partner) if partner is not None else single_story(main)
    trace = partner if baseline and partner is not None else main
    at = step if step is not None else (story.baseline_step if baseline else story.step)
    which = " (diffusion alone)" if baseline else ""
    return {"state": make_state(trace, example.label, pinned=True),
            "load_status": f"Loaded example **{example.label}**{which}.",
            "headline": story.text, "example": example_pick(example.label),
            "toggle": gr.Radio(visible=partner is not None, value=RUNS["baseline" if baseline else "s2d2"],
                               info=pair_note(main, partner) if partner is not None else None),
            **trace_views(trace, at, selected)}


def _single(trace: Trace, state: dict[str, Any], status: str, own: str = "your uploaded trace") -> dict[str, Any]:
    """A trace of its own (an upload, a run): no example, no partner to toggle to; opened at the moment its
    headline names (the first rejected draft, or the first edit)."""
    story = single_story(trace)
    return {"state": state, "load_status": status, "headline": story.text, "toggle": gr.Radio(visible=False),
            "example": example_pick(None, own), **trace_views(trace, story.step)}


EXAMPLE_LABEL = "Example"


def example_pick(label: Optional[str], own: str = "") -> Any:
    """The Example picker: the example shown, or (a trace of the session's own) blank with a label saying what
    Replay shows instead, so a blank picker is never a puzzle."""
    if label is not None:
        return gr.update(value=label, label=EXAMPLE_LABEL)  # an update: the choices stay as they are
    return gr.update(value=None, label=f"{EXAMPLE_LABEL} (none: Replay shows {own}; pick one to open it)")


def upload_trace(file: Any) -> dict[str, Any]:
    """Load an uploaded trace file; one message on error, every other output unchanged."""
    path = getattr(file, "name", file)
    name = Path(path).name if isinstance(path, str) else ""
    try:
        trace = parse_upload(path if isinstance(path, str) else None)
    except TraceError as exc:  # the file's own name first: a new file's message always replaces the last one
        return {"load_status": f"⚠ {md_text(name, 80) + ': ' if name else ''}{md_text(exc, 400)}"}
    return _single(trace, make_state(trace, "upload"), "Loaded the uploaded trace.")


def show_state(state: Any, ok: bool = True) -> dict[str, Any]:
    """Open the session's trace (the run just recorded) in Replay; after a failed run nothing changes."""
    trace = trace_from_state(state) if ok else None
    if trace is None:
        return {}
    shown = "the run just recorded" if state.get("name") == "run" else "this session's trace"
    own = "the run you recorded" if state.get("name") == "run" else "this session's trace"
    out = _single(trace, state, f"Showing {shown}.", own)
    note = scope_note(question_of(trace), trace.header.model.name)
    if note:  # the answer of a prompt the bundled model was never taught is headlined with what it knows
        out["headline"] += f"\n\n{note}"
    return {"tabs": gr.Tabs(selected="replay"), **out}


def open_tour_step(example: str, step: int) -> dict[str, Any]:
    """"Show in Replay" of a tour stop: the tour's own trace at that step, in the Replay tab."""
    return {"tabs": gr.Tabs(selected="replay"), **open_example(example, RUNS["s2d2"], step)}


def select_position(state: Any, step: Any, mask_which: str, evt: gr.EventData) -> dict[str, Any]:
    """A clicked canvas token: remember it, outline its rows in the mask viewer, and (a resampled token) show the
    residual draw that produced it."""
    data = getattr(evt, "_data", None)
    pos = as_int(data.get("position")) if isinstance(data, dict) else None
    trace = trace_from_state(state)
    if trace is None or pos is None or not 0 <= pos < trace.header.total_length:
        return {}
    s = clamp_step(trace, step)
    return {"selected": pos, "mask": mask_figure(trace, s, mask_which, pos), "detail": detail_html(trace, s, pos),
            "residual": residual_html(trace, s, pos)}
