"""What the tour draws for a stop: one shared view per picture kind, updated in place as the stops advance.

`stop_views(material, stops, i, tau, moment)` returns {view name: gr.update} for every kind (tour_stops.KINDS): the
stop's pictures visible with their values, the others hidden. The τ_score control and the lockstep slider have
their own small handlers. Pure functions of the material and the control values; no model.
"""
from __future__ import annotations

from typing import Any

import gradio as gr

from components.views.calibration import calibration_figure
from components.views.canvas import legend_for, render_canvas
from components.views.exactness import exactness_html
from components.views.figures import routing_figure
from components.views.ledger import ledger_html
from components.views.lockstep import lockstep_html, moments, parting_moment
from components.views.attention_mask import mask_figure
from components.views.pipeline_blocks import lifecycle_figure
from components.views.residual import residual_html
from components.tour.tau_control import can_move, clamp_tau, recorded_tau, route_figure, route_text
from components.views.verify_strip import render_strip
from components.tour.later_stops import S2D2, pair
from components.tour.stops import KINDS, Pic, Stop, TourMaterial, focus_step

VIEW = {kind: f"tour_{kind}" for kind in KINDS}


def picture(m: TourMaterial, stop: Stop, pic: Pic, tau: Any = None, moment: Any = 0) -> Any:
    """The value drawn for one picture of a stop."""
    trace = m.get(stop.trace)
    if trace is None:
        raise ValueError(f"stop {stop.key!r} draws the {stop.trace!r} trace, which the material lacks")
    step = stop.step
    if pic.kind == "canvas":
        ring = [p for p in (pic.at, *pic.also) if p is not None]
        canvas = render_canvas(trace, step, before_commit=pic.reveal == "draft", highlight=ring)
        # the key lists only the states this canvas shows: a stop never keys what it has not explained yet
        return canvas + legend_for(canvas, trace)
    if pic.kind == "routing":  # the stops before calibration: the score only (K̂ against K comes with its stop)
        if stop.key == "route" and can_move(trace):
            return route_figure(trace, clamp_tau(trace, tau), step)
        if can_move(trace):
            return route_figure(trace, recorded_tau(trace), step)
        return routing_figure(trace, step, with_k=False)
    if pic.kind == "mask":
        return mask_figure(trace, step, "verify", pic.at, copy_only=True)
    if pic.kind == "strip":
        return render_strip(trace, step, pic.reveal or "all", pic.at)
    if pic.kind == "residual":
        return residual_html(trace, step, pic.at)
    if pic.kind == "calibration":
        return calibration_figure(trace)
    if pic.kind == "ledger":
        return ledger_html(pair(m), focus=S2D2)
    if pic.kind == "exact":
        return exactness_html(m.lossless, m.ar) if m.lossless is not None and m.ar is not None else ""
    if pic.kind == "lifecycle":
        return lifecycle_figure(trace, step)
    if pic.kind == "lockstep":
        return lockstep_html(pair(m), moment) if m.baseline is not None else ""
    raise ValueError(f"unknown picture {pic.kind!r}")


def stop_views(m: TourMaterial, stops: list[Stop], i: Any, tau: Any = None, moment: Any = 0) -> dict[str, Any]:
    """Every shared view for stop `i` (clamped): its pictures shown, the rest hidden; the position, the nav buttons
    and the Show-in-Replay button follow."""
    try:
        i = max(0, min(len(stops) - 1, int(i)))
    except (TypeError, ValueError):
        i = 0
    stop = stops[i]
    out: dict[str, Any] = {VIEW[k]: gr.update(visible=False) for k in KINDS}
    for pic in stop.pictures:
        out[VIEW[pic.kind]] = gr.update(value=picture(m, stop, pic, tau, moment), visible=True)
    out["tour_at"] = i
    out["tour_back"] = gr.update(interactive=i > 0)
    out["tour_next"] = gr.update(interactive=i + 1 < len(stops))
    shown = shown_step(m, stop, moment)
    out["tour_show"] = gr.update(value=show_label(shown), visible=stop.example is not None)
    out["tour_step"] = shown
    return out


def show_label(step: int) -> str:
    return f"Show step {step} in Replay"


def shown_step(m: TourMaterial, stop: Stop, moment: Any = None) -> int:
    """The step "Show in Replay" opens for a stop: its own, or (both runs in lockstep) S2D2's step at the moment
    the slider shows, so the button follows the slider."""
    if stop.key != "run" or m.baseline is None or moment is None:
        return stop.step
    ms = moments(pair(m))
    try:
        k = max(0, min(len(ms) - 1, int(moment)))
    except (TypeError, ValueError):
        return stop.step
    return ms[k].at.get(S2D2, stop.step)


def route_views(m: TourMaterial, tau: Any) -> dict[str, Any]:
    """The τ_score control moved: the routing picture re-decided and the sentence under the control."""
    if not can_move(m.trace):
        return {}
    f = focus_step(m.trace)
    t = clamp_tau(m.trace, tau)
    return {"tour_routing": route_figure(m.trace, t, f.index + 1 if f else None),
            "tour_route_note": route_text(m.trace, t)}


def lockstep_views(m: TourMaterial, moment: Any, stop: Stop | None = None) -> dict[str, Any]:
    """The lockstep slider moved: both runs at that moment, and (given the run stop) the Show-in-Replay button
    following it."""
    if m.baseline is None or moment is None:
        return {}
    out: dict[str, Any] = {"tour_lockstep": lockstep_html(pair(m), moment)}
    if stop is not None:
        step = shown_step(m, stop, moment)
        out.update(tour_show=gr.update(value=show_label(step)), tour_step=step)
    return out


def first_moment(m: TourMaterial) -> int:
    """Where the lockstep slider starts: the moment both runs have written the token where they part."""
    return parting_moment(pair(m)) if m.baseline is not None else 0


def moment_count(m: TourMaterial) -> int:
    """Moments of the lockstep replay after the start (the slider's maximum)."""
    return len(moments(pair(m))) - 1 if m.baseline is not None else 0


def target(stops: list[Stop], i: Any, step: Any = None) -> tuple[str, int] | None:
    """(example label, step) that "Show in Replay" opens for stop `i` (at `step` when the stop's control moved
    it: the lockstep slider), or None."""
    try:
        stop = stops[max(0, min(len(stops) - 1, int(i)))]
    except (TypeError, ValueError, IndexError):
        return None
    at = step if isinstance(step, int) and not isinstance(step, bool) and step >= 0 else stop.step
    return (stop.example, at) if stop.example is not None else None
