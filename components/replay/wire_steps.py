"""Replay's step events answered from views kept in the form Gradio sends, so a cached step holds one of the
server's handler places for a moment instead of a quarter of a second.

Measured (benchmarks/event_split.py, 30 students behind one address stepping through an example): a cached /step
used under 1 ms of handler CPU, yet held its place p50 0.25 s, p95 0.74 s. The time went to 13 worker-thread hops
per event, each waiting for a free thread and the interpreter: one per input Gradio preprocesses, one for the
handler, and one per output it postprocesses, where the two Plotly figures are serialised to JSON again on every
step (p50 0.12 s in postprocess alone). That wait is what filled the four places and the line behind them.

So the step events are wired with Gradio's own pre- and postprocessing turned off (app.py) and this module does
both, once per drawing:
- a hit (the same trace, step and switches, as sent) is found on the event loop by `WireSteps.quick` and answered at
  once, in the exact values the client received when it was drawn: no thread, no serialisation;
- a miss runs `WireSteps.draw` on a worker thread (components/serve/event_guard.py hands it over): the inputs go
  through the components' own `preprocess` (the same checks and clamps as before, with the visitor's own copy of each
  component, as Gradio's preprocess uses), the handler draws the views (its
  own view cache, components/replay/step_cache.py, still shares one render among a class), and every output goes
  through the component's own `postprocess`; the result is kept under the inputs as sent.
The guard charges either path's CPU to the visitor and refuses both by the same rules (event_guard.py).

A kept value also leaves as JSON text written once (`frozen`: an orjson Fragment, which orjson copies into the
message as it is). Measured beside eight flooding addresses (benchmarks/loop_sampler.py): 35 % of the event loop's
busy time went to pydantic walking each answer's figures (`model_dump` of the result message, type by type) before
orjson wrote them again; Gradio's file scan walked them too. A Fragment is one opaque value to both, and orjson
writes its bytes unchanged: the client receives exactly the bytes it received before.

Invariants: what a hit returns equals, value for value, what Gradio would have sent for a fresh drawing (tests
compare the data the client receives); only values reached from a state key (a hash of one trace's exact text) are
kept, under inputs of a few plain JSON values; kept per unit of fairness (the request's address or account,
components/replay/unit_lru.py), at most PER_UNIT a unit and MAX_KEPT in all, so a flooder's steps push out only its
own; the lists kept are shared between pages and never changed (Gradio only reads and sends them).
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

import gradio as gr
import orjson
from gradio.context import LocalContext
from gradio.data_classes import GradioModel, GradioRootModel

from components.replay.unit_lru import UnitLru
from components.serve.event_guard import encodable
from components.serve.identity import current

PER_UNIT = 24  # as components/replay/step_cache.py: a class's example has a handful of steps
MAX_KEPT = 128  # all units together (a heavy step's answer is about 0.2 MB of JSON)
MAX_TEXT = 64  # characters of a string input a key may hold (a step box, a switch): longer ones are drawn each time
PLAIN = (type(None), bool, int, float, str)


class WireSteps:
    """One step event's inputs and outputs (components, in wiring order) and its kept answers."""

    def __init__(self, inputs: Sequence[Any], outputs: Sequence[tuple[str, Any]], size: int = MAX_KEPT,
                 per_unit: int = PER_UNIT) -> None:
        self.inputs, self.outputs = list(inputs), list(outputs)
        self._kept = UnitLru(min(per_unit, size), size)

    def handler(self, views: Callable[..., dict[str, Any]]) -> Callable[..., Any]:
        """The event function: `draw` of `views` (a handler returning {name: value}), with `quick` attached as
        `s2d2_quick` for the guard to try on the event loop first."""
        def draw(*raw: Any) -> Any:
            return self.draw(views, raw)

        draw.s2d2_quick = self.quick  # type: ignore[attr-defined]
        draw.__name__ = getattr(views, "__name__", "step")
        return draw

    def quick(self, *raw: Any) -> Optional[list[Any]]:
        """The answer kept for these inputs as sent (already passed through the guard's `encodable`), or None (then
        `draw` must run). Costs a dict lookup."""
        key = input_key(raw)
        if key is None:
            return None
        return self._kept.get(current(), key)  # the guard set the request's unit (components/serve/identity.py)

    def draw(self, views: Callable[..., dict[str, Any]], raw: Sequence[Any]) -> Any:
        """Preprocess `raw` as Gradio would, draw the views, postprocess them as Gradio would; keep a full answer."""
        values = [v if c.stateful else session_copy(c).preprocess(v) for c, v in zip(self.inputs, raw)]
        out = views(*values)
        if not out:
            return gr.skip()
        # encodable once here, so a hit is handed back as kept without walking its megabytes of text again
        wire = [frozen(c, v) for (_, c), v in zip(self.outputs, encodable(
            [wire_value(c, out[name]) if name in out else gr.skip() for name, c in self.outputs]))]
        key = input_key(raw)
        if key is not None and all(name in out for name, _ in self.outputs):
            self._kept.put(current(), key, wire)
        return wire

    def __len__(self) -> int:
        return len(self._kept)


def input_key(raw: Sequence[Any]) -> Optional[tuple]:
    """The key of a step event's inputs (state first): its trace's state key and the other inputs as sent, or None
    when the state names no stored text or an input is not a short plain value."""
    state, rest = (raw[0], raw[1:]) if raw else (None, ())
    key = state.get("key") if isinstance(state, dict) else None
    if not isinstance(key, str):
        return None
    if any(not isinstance(v, PLAIN) or (isinstance(v, str) and len(v) > MAX_TEXT) for v in rest):
        return None
    return (key, *((type(v).__name__, v) for v in rest))  # 1 and 1.0 and True drawn apart: equal only as sent


def session_copy(component: Any) -> Any:
    """The visitor's own copy of `component`, as Gradio's preprocess uses it: once an event updates a component's
    properties (a new trace sets the scrubber's maximum), Gradio keeps that copy in the session's config, and the
    shared one still has the page's first properties (a step past the first example's last step would be clamped
    to it). Outside an event (no session config), the shared one. Gradio names a block only by its `_id`."""
    config = LocalContext.blocks_config.get(None)
    blocks = getattr(config, "blocks", None)
    return blocks.get(component._id, component) if isinstance(blocks, dict) else component


def frozen(component: Any, value: Any) -> Any:
    """`value` as JSON text written once (an orjson Fragment: sent as it is, walked by nobody), for a component's
    displayed value; an update (gr.skip() included, which Gradio reads), a state's value and a plain scalar are left
    as they are. The text is what Gradio's own `orjson.dumps(..., default=str)` of the message would write for it."""
    if getattr(component, "stateful", False) or not isinstance(value, (dict, list)):
        return value
    if isinstance(value, dict) and value.get("__type__") == "update":
        return value
    return orjson.Fragment(orjson.dumps(value, default=str))


def wire_value(component: Any, value: Any) -> Any:
    """`value` as Gradio's postprocess hands it to the client: the component's `postprocess`, dumped to plain data
    (a figure becomes its JSON text once, here); an update's value likewise, its other properties left to Gradio."""
    if isinstance(value, dict) and value.get("__type__") == "update":
        if "value" in value:
            return {**value, "value": wire_value(component, value["value"])}
        return value
    done = component.postprocess(value)
    return done.model_dump() if isinstance(done, (GradioModel, GradioRootModel)) else done
