"""Event handlers: thin adapters from Gradio values (session state dict, slider value, files) to the pure views.

Replay handlers never touch the model. Errors become one readable message, never a traceback.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator, Optional

import gradio as gr

from s2d2.trace import Trace

from .canvas import render_live
from .replay import md_escape, metrics_table, render_step, render_timelines, trace_title
from .run_panel import check_model, check_prompt, config_dict, config_from_inputs, record
from .traces_io import (TraceError, describe_error, example_traces, export_path, load_example, make_state,
                        parse_upload, trace_from_state)

NO_TRACE = "No trace loaded: pick an example, upload a trace file, or record a run."


def step_views(state: Any, step: Any, mask_which: str = "auto") -> tuple[Any, ...]:
    """(canvas, strip, routing, mask, summary) for the session's trace at `step`."""
    trace = trace_from_state(state)
    if trace is None:
        return ("", "", None, None, NO_TRACE)
    return render_step(trace, step, mask_which)


def trace_views(trace: Trace, step: int = 0) -> tuple[Any, ...]:
    """Everything that changes when a new trace is loaded (see LOAD_OUTPUTS in app.py for the order)."""
    slider = gr.Slider(minimum=0, maximum=max(1, len(trace.steps)), value=step, step=1,
                       label=f"Step (0 = prompt only; {len(trace.steps)} steps)")
    views = render_step(trace, step)
    timelines = render_timelines(trace)
    return (trace_title(trace), slider, *views, *timelines, metrics_table(trace), export_path(trace))


def load_example_trace(name: str) -> tuple[Any, ...]:
    """(state, status, *trace_views) for an example from assets/traces."""
    examples = example_traces()
    path: Optional[Path] = examples.get(name)
    if path is None:
        return (gr.skip(), f"Unknown example {name!r}.", *[gr.skip()] * 13)
    try:
        trace = load_example(path)
    except TraceError as exc:
        return (gr.skip(), describe_error(exc), *[gr.skip()] * 13)
    return (make_state(trace, name), f"Loaded example **{name}**.", *trace_views(trace))


def upload_trace(file: Any) -> tuple[Any, ...]:
    """(state, status, *trace_views) for an uploaded trace file; one message on error, other outputs unchanged."""
    path = getattr(file, "name", file)
    try:
        trace = parse_upload(path if isinstance(path, str) else None)
    except TraceError as exc:
        return (gr.skip(), f"⚠️ {md_escape(exc, 400)}", *[gr.skip()] * 13)
    return (make_state(trace, "upload"), "Loaded the uploaded trace.", *trace_views(trace))


def state_views(state: Any, ok: bool = True) -> tuple[Any, ...]:
    """(tabs, status, *trace_views) for the trace in the session state; after a failed run, nothing changes."""
    trace = trace_from_state(state) if ok else None
    if trace is None:
        return (gr.skip(), gr.skip(), *[gr.skip()] * 13)
    return (gr.Tabs(selected="replay"), "Showing the run just recorded.", *trace_views(trace))


def move(state: Any, step: Any, delta: int) -> int:
    trace = trace_from_state(state)
    n = len(trace.steps) if trace else 0
    try:
        current = int(round(float(step)))
    except (TypeError, ValueError):
        current = 0
    return max(0, min(n, current + delta))


def tick(state: Any, step: Any) -> tuple[Any, Any, Any, Any]:
    """Autoplay: advance one step; at the end stop the timer. -> (step, timer, play button, playing)."""
    trace = trace_from_state(state)
    n = len(trace.steps) if trace else 0
    nxt = move(state, step, 1)
    if nxt >= n:
        return nxt, gr.Timer(active=False), gr.Button(value="▶ Play"), False
    return nxt, gr.skip(), gr.skip(), gr.skip()


def toggle_play(playing: bool, state: Any, step: Any, speed: float) -> tuple[Any, Any, Any, Any]:
    """-> (playing, timer, button, step); starting at the end rewinds to 0."""
    trace = trace_from_state(state)
    n = len(trace.steps) if trace else 0
    if playing:
        return False, gr.Timer(active=False), gr.Button(value="▶ Play"), gr.skip()
    start = 0 if move(state, step, 0) >= n else gr.skip()
    return True, gr.Timer(value=_interval(speed), active=True), gr.Button(value="⏸ Pause"), start


def set_speed(speed: float, playing: bool) -> Any:
    return gr.Timer(value=_interval(speed), active=bool(playing))


def _interval(speed: Any) -> float:
    try:
        return max(0.2, min(5.0, 1.0 / float(speed)))
    except (TypeError, ValueError, ZeroDivisionError):
        return 1.0


def apply_preset(name: str, seed: Any = 0) -> list[Any]:
    from .run_panel import preset_values

    try:
        return preset_values(name, int(seed or 0))
    except (ValueError, TypeError):
        return [gr.skip()] * len(preset_values("sdar-config-a"))


def run(prompt: str, model_name: str, *knobs: Any) -> Iterator[tuple[Any, ...]]:
    """Record a run, streaming (status, live canvas, output text, state, ok). State changes only on success."""
    problem = check_prompt(prompt) or check_model(model_name)
    cfg, seed, error = config_from_inputs(*knobs)
    if problem or error:
        yield f"⚠️ {problem or error}", gr.skip(), gr.skip(), gr.skip(), False
        return
    assert cfg is not None
    yield "Loading the model and starting…", render_live([], ""), "", gr.skip(), False
    for event in record(prompt, model_name, config_dict(cfg), seed):
        if event["kind"] == "progress":
            yield (event.get("status") or f"Decoding… {event['steps']} steps, {len(event['commits'])} tokens "
                   f"committed ({event['elapsed']:.1f} s)", render_live(event["commits"]), gr.skip(), gr.skip(), False)
        elif event["kind"] == "error":
            yield f"⚠️ {event['message']}", gr.skip(), gr.skip(), gr.skip(), False
            return
        elif event["kind"] == "done":
            try:
                trace = Trace.from_dict(event["trace"])
            except ValueError as exc:  # a run outside the limits in force (they changed, or a bug): no traceback
                yield f"⚠️ The run finished but its trace is refused: {md_escape(exc, 300)}", gr.skip(), gr.skip(), \
                    gr.skip(), False
                return
            commits = [[c.position, c.text, c.how] for s in trace.steps for c in s.commits]
            reason = getattr(trace.footer, "finish_reason", "") if trace.footer else ""
            note = f" — stopped early ({reason.replace('_', ' ')})" if reason in ("cancelled", "time_limit") else ""
            yield (f"✅ Done in {event['elapsed']:.1f} s: {len(trace.steps)} steps, {len(trace.forwards)} forwards"
                   f"{note}. The Replay tab now shows this run.", render_live(commits), event.get("text", ""),
                   make_state(trace, "run"), True)
            return
