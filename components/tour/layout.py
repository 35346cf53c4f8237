"""The Learn tab: the guided tour as a gr.Walkthrough of texts over one shared set of pictures.

The stops (components/tour/material.py) carry texts; the pictures live once, below the walkthrough, and change in place as
the stops advance (components/tour/pictures.py decides what each stop shows). A stop that names a position scrolls its
strip there. The Route stop holds a live τ_score control, the last stop a slider that scrubs both runs together.
`build_learn_tab` lays it out and wires the tour's own events; app.py wires "Show in Replay" (TourHandles).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

import gradio as gr

from components.tour.tau_control import can_move, recorded_tau, route_text, tau_range
from components.tour.material import core_end, header, numbered, tour_stops
from components.tour.stops import KINDS, Stop, TourMaterial
from components.tour.pictures import VIEW, first_moment, lockstep_views, moment_count, route_views, stop_views
from components.ui import PRIVATE, ClampedSlider, Ctx, keyed

PLOTS = {"routing", "mask", "calibration", "lifecycle"}
NAV = ["tour_at", "tour_back", "tour_next", "tour_show", "tour_step"]
# A picture that names a position: scroll its sideways-scrolling table so that column is in view (a phone shows
# two or three strip columns at a time). Deferred: the component may just have been made visible.
WATCH_JS = """
const centre = () => {
  element.querySelectorAll('[data-watch]').forEach((cell) => {
    const wrap = cell.closest('.tbl, .lg-strips, .rs-tbl');
    if (!wrap || cell.tagName === 'TD') return;
    const r = cell.getBoundingClientRect(), w = wrap.getBoundingClientRect();
    const sticky = wrap.querySelector('th[scope=row]');
    const left = w.left + (sticky ? sticky.getBoundingClientRect().width : 0);
    if (!w.width || (r.left >= left && r.right <= w.right)) return;  // already in view
    wrap.scrollLeft = Math.max(0, wrap.scrollLeft + (r.left - left) - (w.right - left - r.width) / 2);
  });
};
const later = () => { setTimeout(centre, 60); setTimeout(centre, 400); };
later();
watch('value', later);
"""
# A token tapped (or clicked) in the tour's canvas: its details in a box under the canvas. Its title holds them, but a
# phone shows no title, so "tap a token to see it" did nothing there. The box goes with the canvas's next value.
TAP_JS = """
element.addEventListener('click', (e) => {
  const tok = e.target.closest('[data-pos][title]');
  if (!tok) return;
  let box = element.querySelector('.tour-tap');
  if (!box) {
    box = document.createElement('div');
    box.className = 's2d2-detail tour-tap';
    box.setAttribute('aria-live', 'polite');
    tok.closest('.prose, .html-container, div').append(box);
  }
  const pin = document.createElement('span');
  pin.dataset.pinned = tok.dataset.pos;
  pin.textContent = '◉ ' + tok.getAttribute('title');
  box.replaceChildren(pin);
});
"""
# Gradio heads the walkthrough on a narrow screen "Step 3/12: Reject", right above the decoding's own "step 2 of 4":
# the page renames it "Stop 3 of 12:" (the tour's header counts stops). Page-wide JS (app.py passes it to the page):
# it watches the body until the tour exists, then the tour alone.
STOP_LABEL_JS = """
() => {
  const fix = (tour) => {
    const walker = document.createTreeWalker(tour, NodeFilter.SHOW_TEXT);
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
      const m = /^Step (\\d+)\\/(\\d+):$/.exec(n.nodeValue.trim());
      if (m) n.nodeValue = `Stop ${m[1]} of ${m[2]}:`;
    }
  };
  const start = () => {
    const tour = document.getElementById('tour');
    if (!tour) return false;
    fix(tour);
    new MutationObserver(() => fix(tour)).observe(tour, {subtree: true, childList: true, characterData: true});
    return true;
  };
  if (start()) return;
  const find = new MutationObserver(() => { if (start()) find.disconnect(); });
  find.observe(document.body, {subtree: true, childList: true});
}
"""
# Next / Back on a phone: bring the new stop's text back to the top of the screen.
NAV_JS = """
() => {
  const tour = document.getElementById('tour');
  if (tour && tour.getBoundingClientRect().top < 0) tour.scrollIntoView({block: 'start'});
}
"""
TOUR_CSS = """
#tour-pictures{gap:10px}
.tour-tap{margin-top:6px}
#tour-pictures .s2d2-lockstep p{margin:4px 0}
.s2d2-exact .ex-row{margin:4px 0;line-height:2}
"""


@dataclass
class TourHandles:
    """What app.py wires: "Show in Replay" opens the stop at `at` (tour_views.target)."""

    show: gr.Button
    at: gr.State
    stops: list[Stop]
    step: Optional[gr.State] = None  # the step it opens: the stop's, or where the lockstep slider is


def _index(at: Any) -> int:
    try:
        return int(at)
    except (TypeError, ValueError):
        return 0


def _component(kind: str, first: dict[str, Any], **kw: Any) -> Any:
    shown = first[VIEW[kind]]
    elem = f"tour-{kind}"
    if kind in PLOTS:
        return gr.Plot(shown.get("value"), visible=shown["visible"], show_label=False, elem_id=elem, **kw)
    return gr.HTML(shown.get("value", ""), visible=shown["visible"], elem_id=elem, **kw)


def build_learn_tab(ctx: Ctx, material: Optional[TourMaterial]) -> Optional[TourHandles]:
    """Lay out the tour over `material` (None: no example trace) and wire its stops, controls and buttons."""
    if material is None:
        gr.Markdown("## Learn S2D2\nNo example trace is available yet.")
        return None
    stops = tour_stops(material)
    gr.Markdown(header(stops), elem_id="tour-header")
    tau0 = recorded_tau(material.trace) if can_move(material.trace) else None
    steps = []
    with gr.Walkthrough(selected=0, elem_id="tour") as tour:
        for i, (stop, title) in enumerate(zip(stops, numbered(stops))):
            with gr.Step(stop.label, id=i, elem_classes=[f"tour-{stop.key}"]) as step:
                # Not sanitised: the text holds the hover/tap spans; every trace string in it is escaped.
                gr.Markdown(f"### {title}\n{stop.text}{core_end(stops, i)}", elem_classes=["tour-text"],
                            sanitize_html=False)
                _controls(ctx, stop, material, tau0)
            steps.append(step)
    ctx["tour"] = tour
    first = stop_views(material, stops, 0, tau0, first_moment(material))
    with gr.Column(elem_id="tour-pictures"):
        for kind in KINDS:
            js = ({"js_on_load": WATCH_JS} if kind in ("strip", "residual", "ledger")
                  else {"js_on_load": TAP_JS} if kind == "canvas" else {})
            ctx[VIEW[kind]] = _component(kind, first, **js)
    with gr.Row(elem_id="tour-nav"):
        ctx["tour_back"] = gr.Button("◀ Back", size="sm", interactive=False, elem_id="tour-back")
        ctx["tour_show"] = gr.Button(first["tour_show"]["value"], size="sm", elem_id="tour-show",
                                     visible=first["tour_show"]["visible"])
        ctx["tour_next"] = gr.Button("Next ▶", size="sm", variant="primary", interactive=len(stops) > 1,
                                     elem_id="tour-next")
    ctx["tour_at"] = gr.State(0)
    ctx["tour_drawn"] = gr.State(False)  # whether the last stop selected was drawn by its select event (its circle)
    ctx["tour_step"] = gr.State(first["tour_step"])  # the step Show in Replay opens (the lockstep slider moves it)
    _wire(ctx, material, stops, steps)
    return TourHandles(ctx["tour_show"], ctx["tour_at"], stops, ctx["tour_step"])


def _controls(ctx: Ctx, stop: Stop, material: TourMaterial, tau0: Optional[float]) -> None:
    """The Route stop's τ_score control and the last stop's lockstep slider, inside their stops."""
    if stop.key == "route" and tau0 is not None:
        lo, hi = tau_range(material.trace)
        ctx["tour_tau"] = ClampedSlider(lo, hi, value=tau0, step=0.25, label="τ_score: verify iff s ≥ τ_score",
                                        elem_id="tour-tau")
        ctx["tour_route_note"] = gr.Markdown(route_text(material.trace, tau0), elem_id="tour-route-note")
    if stop.key == "run" and material.baseline is not None:
        n = moment_count(material)
        ctx["tour_moment"] = ClampedSlider(0, n, value=first_moment(material), step=1,
                                           label=f"Both runs, block by block: moment 0 (start) to {n} (end)",
                                           elem_id="tour-moment")


def stop_picked(i: int, at: Any, draw: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """A stop's select event: its pictures (`draw()`) when its circle was pressed. Next / Back drew them with the
    stop's words already (`at` == i; their update selects the stop, which fires this event too): nothing left to
    draw, and the views that follow a live control are left to the control's own event (`tour_drawn` False)."""
    if _index(at) == i:
        return {"tour_at": i, "tour_drawn": False}
    return {**draw(), "tour_drawn": True}


def after_circle(views: Callable[[Any], dict[str, Any]]) -> Callable[[Any, Any], dict[str, Any]]:
    """The event chained after a stop's select: the views that follow its live control, drawn from the control's
    value, only when the select event drew the stop (its circle). After Next / Back it would draw the value the
    control held when it was sent, racing a value typed since (the control's change event): finishing last, it
    left the picture and its sentence on the old τ under the new box for good."""
    return lambda drawn, value: views(value) if drawn is True else {}


def _wire(ctx: Ctx, material: TourMaterial, stops: list[Stop], steps: list[Any]) -> None:
    c = ctx.c
    outs = ctx.outputs([*(VIEW[k] for k in KINDS), *NAV])
    controls = [c[n] for n in ("tour_tau", "tour_moment") if n in c]
    names = [n for n in ("tour_tau", "tour_moment") if n in c]

    run = next((s for s in stops if s.key == "run"), None)
    # A stop holding a live control: the views that follow the control are drawn by a second event, chained after
    # the stop's own, from the control's value when that one ends. Drawn by the stop's event from the value at the
    # press, a τ typed while it ran was drawn over with the old one (the plot disagreeing with its box).
    live = {"route": ("tour_tau", lambda tau: route_views(material, tau), ["tour_routing", "tour_route_note"]),
            "run": ("tour_moment", lambda k: lockstep_views(material, k, run), ["tour_lockstep", "tour_show",
                                                                              "tour_step"])}
    live = {key: spec for key, spec in live.items() if spec[0] in c and (key != "route" or can_move(material.trace))}

    def shown(i: int, *values: Any) -> dict[str, Any]:
        given = dict(zip(names, values))
        out = stop_views(material, stops, i, given.get("tour_tau"), given.get("tour_moment", first_moment(material)))
        for name in live.get(stops[max(0, min(len(stops) - 1, int(i)))].key, (None, None, []))[2]:
            if isinstance(out.get(name), dict):  # keep what it shows or hides; its value comes from the control
                out[name] = {k: v for k, v in out[name].items() if k != "value"}
            else:
                out.pop(name, None)
        return out

    select_outs = [*outs, c["tour_drawn"]]
    for i, step in enumerate(steps):  # a stop selected by its circle: its pictures, in place
        event = step.select(keyed(lambda at, *v, i=i: stop_picked(i, at, lambda: shown(i, *v)), ctx),
                            [c["tour_at"], *controls], select_outs, show_progress="hidden", **PRIVATE)
        if stops[i].key in live:
            control, views, names_out = live[stops[i].key]
            event.then(keyed(after_circle(views), ctx), [c["tour_drawn"], c[control]], ctx.outputs(names_out),
                       show_progress="hidden", **PRIVATE)

    def moved(at: Any, d: int, *values: Any) -> dict[str, Any]:
        to = max(0, min(len(stops) - 1, _index(at) + d))
        given = dict(zip(names, values))
        out = stop_views(material, stops, to, given.get("tour_tau"), given.get("tour_moment", first_moment(material)))
        return {**out, "tour": gr.Walkthrough(selected=to)}

    for name, delta in (("tour_back", -1), ("tour_next", 1)):
        # One event moves the selection, the stop index and the new stop's pictures: the words and the pictures
        # they name arrive in one update (drawn by the stop's select event, the old pictures stayed up under the
        # new words for a round trip). A second press right after the first moves on from the new stop.
        c[name].click(keyed(lambda at, *v, d=delta: moved(at, d, *v), ctx), [c["tour_at"], *controls],
                      [c["tour"], *outs], show_progress="hidden", **PRIVATE)
        c[name].click(None, js=NAV_JS, **PRIVATE)
    if "tour_tau" in c:
        c["tour_tau"].change(keyed(lambda tau: route_views(material, tau), ctx), c["tour_tau"],
                             ctx.outputs(["tour_routing", "tour_route_note"]), show_progress="hidden",
                             trigger_mode="always_last", **PRIVATE)
    if "tour_moment" in c:
        c["tour_moment"].change(keyed(lambda k: lockstep_views(material, k, run), ctx), c["tour_moment"],
                                ctx.outputs(["tour_lockstep", "tour_show", "tour_step"]), show_progress="hidden",
                                trigger_mode="always_last", **PRIVATE)
