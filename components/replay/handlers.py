"""Event handlers: Gradio values in, {view name: value} out.

Every handler returns (or yields) a dict keyed by the names of the components it updates; a name it leaves out is
left unchanged on screen. app.py maps names to components (components/ui.py `keyed`). The output lists below
name what each event may update. Replay handlers never touch the model; errors become one readable message.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator, Optional

import gradio as gr

from s2d2.limits import SEED_MAX
from s2d2.trace import Trace

from components.views.canvas import live_rows, render_live
from components.files.examples import examples_dir, list_examples, load_pair
from components.serve.gpu_slot import stop_requested
from components.run.knob_scope import shown
from components.views.attention_mask import mask_figure
from components.serve.input_numbers import as_float, as_int, clamp_int
from components.views.residual import residual_html
from components.escape import md_text
from components.views.step_views import STEP_VIEWS, StepOptions, metrics_table, render_step, render_timelines, trace_title
from components.run.decode import KNOB_NAMES, check_model, check_prompt, config_dict, config_from_inputs, preset_for_model, preset_values, record
from components.views.story import pair_story, rounding_note, single_story
from components.views.token_detail import DETAIL_HINT, detail_html
from components.views.trace_index import clamp_step
from components.files.traces import TraceError, describe_error, export_path, make_state, parse_upload, trace_from_state

NO_TRACE = "No trace loaded: pick an example, upload a trace file, or record a run."
RUNS = {"s2d2": "S2D2: draft, route, verify", "baseline": "Diffusion alone: same B, no verifier"}
TIMELINES = ["commit_map", "nfe", "hist", "perpos"]
STEP_OUT = list(STEP_VIEWS)
TRACE_OUT = ["title", "slider", *STEP_OUT, *TIMELINES, "metrics", "download", "selected"]
LOAD_OUT = ["state", "load_status", "headline", "toggle", "example", *TRACE_OUT]
RUN_OUT = ["run_status", "live", "output", "state", "run_ok"]
KNOB_OUT = [f"knob_{name}" for name in KNOB_NAMES]
MAX_LATE_PROGRESS = 3  # progress events tolerated after Stop before the run is abandoned without a trace


# -- replay ------------------------------------------------------------------------------------------------------

def step_views(state: Any, step: Any, mask_which: str = "auto", color_by: str = "state",
               selected: Optional[int] = None) -> dict[str, Any]:
    """Every per-step view of the session's trace at `step`; nothing changes for a blank step box."""
    if step is None:
        return {}
    trace = trace_from_state(state)
    if trace is None:
        return {"canvas": "", "strip": "", "routing": None, "mask": None, "summary": NO_TRACE, "legend": "",
                "detail": DETAIL_HINT, "residual": ""}
    return render_step(trace, step, StepOptions(mask_which, color_by, selected))


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
            "download": export_path(trace), "selected": selected}


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
            "headline": story.text, "example": example.label,
            "toggle": gr.Radio(visible=partner is not None, value=RUNS["baseline" if baseline else "s2d2"]),
            **trace_views(trace, at, selected)}


def _single(trace: Trace, state: dict[str, Any], status: str) -> dict[str, Any]:
    """A trace of its own (an upload, a run): no example, no partner to toggle to; opened at the moment its
    headline names (the first rejected draft, or the first edit)."""
    story = single_story(trace)
    return {"state": state, "load_status": status, "headline": story.text,
            "toggle": gr.Radio(visible=False), "example": None, **trace_views(trace, story.step)}


def upload_trace(file: Any) -> dict[str, Any]:
    """Load an uploaded trace file; one message on error, every other output unchanged."""
    path = getattr(file, "name", file)
    name = Path(path).name if isinstance(path, str) else ""
    try:
        trace = parse_upload(path if isinstance(path, str) else None)
    except TraceError as exc:  # the file's own name first: a new file's message always replaces the last one
        return {"load_status": f"⚠️ {md_text(name, 80) + ': ' if name else ''}{md_text(exc, 400)}"}
    return _single(trace, make_state(trace, "upload"), "Loaded the uploaded trace.")


def show_state(state: Any, ok: bool = True) -> dict[str, Any]:
    """Open the session's trace (the run just recorded) in Replay; after a failed run nothing changes."""
    trace = trace_from_state(state) if ok else None
    if trace is None:
        return {}
    shown = "the run just recorded" if state.get("name") == "run" else "this session's trace"
    return {"tabs": gr.Tabs(selected="replay"), **_single(trace, state, f"Showing {shown}.")}


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


def move(state: Any, step: Any, delta: int) -> dict[str, Any]:
    return {"slider": _moved(state, step, delta)}


def _moved(state: Any, step: Any, delta: int) -> int:
    trace = trace_from_state(state)
    n = len(trace.steps) if trace else 0
    return clamp_int(clamp_int(step, 0, n, 0) + delta, 0, n, 0)


def tick(state: Any, step: Any) -> dict[str, Any]:
    """Autoplay: advance one step; at the end stop the timer."""
    trace = trace_from_state(state)
    nxt = _moved(state, step, 1)
    if nxt >= (len(trace.steps) if trace else 0):
        return {"slider": nxt, "timer": gr.Timer(active=False), "play": gr.Button(value="▶ Play"), "playing": False}
    return {"slider": nxt}


def toggle_play(playing: bool, state: Any, step: Any, speed: float) -> dict[str, Any]:
    """Play / pause; starting at the end rewinds to 0."""
    trace = trace_from_state(state)
    n = len(trace.steps) if trace else 0
    if playing:
        return {"playing": False, "timer": gr.Timer(active=False), "play": gr.Button(value="▶ Play")}
    out = {"playing": True, "timer": gr.Timer(value=_interval(speed), active=True), "play": gr.Button(value="⏸ Pause")}
    if _moved(state, step, 0) >= n:
        out["slider"] = 0
    return out


def set_speed(speed: float, playing: bool) -> dict[str, Any]:
    return {"timer": gr.Timer(value=_interval(speed), active=bool(playing))}


def _interval(speed: Any) -> float:
    steps_per_s = as_float(speed)
    return 1.0 if not steps_per_s or steps_per_s <= 0 else max(0.2, min(5.0, 1.0 / steps_per_s))


# -- run ---------------------------------------------------------------------------------------------------------

def knob_visibility(method: str, policy: str, remasking: str, loop: str = "block") -> dict[str, Any]:
    """Show the knobs of the chosen method, policy, remasking rule and block loop; hide the others."""
    return {f"knob_{k}": gr.update(visible=shown(k, method, policy, remasking, loop)) for k in KNOB_NAMES}


def apply_preset(name: str, seed: Any = 0) -> dict[str, Any]:
    """Every knob set from a preset (the seed kept), the knobs that matter shown."""
    from components.views.describe import preset_note

    kept = 0 if seed is None else as_int(seed)
    valid_seed = kept is not None and 0 <= kept <= SEED_MAX
    try:
        values = dict(zip(KNOB_NAMES, preset_values(str(name)[:100], kept if valid_seed else 0)))
    except (ValueError, TypeError):
        return {}
    if not valid_seed:  # an out-of-range seed stays in its box (Run says why); it is never echoed back
        del values["seed"]
    shown_now = knob_visibility(values["method"], values["policy"], values["remasking"], values["loop"])
    return {**{f"knob_{k}": gr.update(value=v, visible=shown_now[f"knob_{k}"]["visible"]) for k, v in values.items()},
            "preset_note": preset_note(name)}


def model_changed(model_name: str, loop: str, seed: Any = 0) -> dict[str, Any]:
    """A model that edits (LLaDA2.x) opens on its family's preset, another model leaves the editing loop for the
    default preset; nothing changes when the loop already fits the model."""
    name = preset_for_model(model_name, loop)
    if name is None:
        return {}
    return {"preset": name, **apply_preset(name, seed)}


def run_refused(message: str) -> dict[str, Any]:
    """What a Run that may not start shows (guard.one_job): the session runs another job, or Stop withdrew it."""
    return {"run_status": message, "run_ok": False}


def run(prompt: str, model_name: str, *knobs: Any) -> Iterator[dict[str, Any]]:
    """Record a run as the session's one job (guard.one_job), streaming status and the live canvas. The session's
    trace changes only when a trace arrives: complete, or partial after Stop or the time limit. The run is the only
    writer of its status: Stop raises the job's flag, the decode ends within one forward, and the last line says
    what was kept."""
    problem = check_prompt(prompt) or check_model(model_name)
    cfg, seed, error = config_from_inputs(*knobs)
    if problem or error:
        yield {"run_status": f"⚠️ {problem or error}", "run_ok": False}
        return
    assert cfg is not None
    yield {"run_status": "Loading the model and starting…", "live": render_live([]), "output": "", "run_ok": False}
    events = record(prompt, model_name, config_dict(cfg), seed)
    late = 0
    try:
        for event in events:
            if event["kind"] == "progress":
                stopping = stop_requested()
                late += stopping
                if late > MAX_LATE_PROGRESS:  # a worker that cannot see the flag (another process): abandon it
                    yield {"run_status": "⏹ Stopped — the decoding worker ended without a partial trace.",
                           "run_ok": False}
                    return
                status = ("Stopping…" if stopping else event.get("status") or
                          f"Decoding… {event['steps']} steps, {len(event['commits'])} tokens committed "
                          f"({event['elapsed']:.1f} s). Stop keeps the partial trace.")
                yield {"run_status": status, "live": render_live(event["commits"], stop_ids=event.get("stop_ids", ()))}
            elif event["kind"] == "error":
                yield {"run_status": f"⚠️ {event['message']}", "run_ok": False}
                return
            elif event["kind"] == "done":
                yield _finished(event)
                return
    finally:
        events.close()


def _finished(event: dict[str, Any]) -> dict[str, Any]:
    try:
        trace = Trace.from_dict(event["trace"])
    except ValueError as exc:  # a run outside the limits in force (they changed, or a bug): no traceback
        return {"run_status": f"⚠️ The run finished but its trace is refused: {md_text(exc, 300)}", "run_ok": False}
    commits = live_rows(trace.steps)
    reason = trace.footer.finish_reason if trace.footer else ""
    size = f"{len(trace.steps)} steps, {len(trace.forwards)} forwards"
    if reason == "cancelled" and not trace.blocks:
        return {"run_status": f"⏹ Stopped before the first block was complete ({size}): nothing to replay.",
                "live": render_live([]), "run_ok": False}
    if reason == "cancelled":
        status = f"⏹ Stopped — partial trace kept ({size}). The Replay tab shows it."
    elif reason == "time_limit":
        status = f"⏹ Stopped at the time limit — partial trace kept ({size}). The Replay tab shows it."
    else:
        status = f"✅ Done in {event['elapsed']:.1f} s: {size}{rounding_note(trace)}. The Replay tab now shows this run."
    return {"run_status": status, "live": render_live(commits, stop_ids=trace.header.model.stop_ids),
            "output": event.get("text", ""), "state": make_state(trace, "run"), "run_ok": True}
