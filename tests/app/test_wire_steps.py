"""Replay's step events answer a kept step on the event loop, in the form Gradio sends (components/replay/wire_steps.py,
components/serve/event_guard.py): a hit makes no worker-thread hop and serialises no figure; what it returns is, value
for value, what the client receives for a fresh drawing through Gradio's own pre- and postprocessing; a miss is
drawn on a worker thread and charged there; both are refused by the CPU share's rules; bad inputs still get the
components' own checks."""
from __future__ import annotations

import asyncio
import contextvars
import copy
import json
from types import SimpleNamespace

import anyio.to_thread
import gradio as gr
import orjson
import pytest
from gradio.server_messages import ProcessCompletedMessage
from gradio.state_holder import SessionState

from components.replay import handlers as h
from components.replay.wire_steps import WireSteps, input_key
from components.serve import event_guard
from components.serve.cpu_share import CPU_SHARE
from components.ui import ClampedSlider


@pytest.fixture(scope="module")
def demo():
    import app

    return app.demo


def event(demo, api_name: str):
    return next(b for b in demo.fns.values() if b.api_name == api_name)


def example_state() -> dict:
    label = next(iter(h.list_examples(h.examples_dir())))
    return h.open_example(label)["state"]


def call(demo, block_fn, payloads: list, state: SessionState) -> list:
    """What the client receives for one event: Gradio's process_api, its data as the JSON sent."""
    return json.loads(sent(demo, block_fn, payloads, state))["output"]["data"]


def sent(demo, block_fn, payloads: list, state: SessionState) -> bytes:
    """The bytes of the result message the client receives for one event: Gradio's process_api, then its message
    written as Gradio's result stream writes it (routes.py `process_msg`: model_dump, then orjson)."""
    out = asyncio.run(demo.process_api(block_fn=block_fn, inputs=list(payloads), state=state))
    message = ProcessCompletedMessage(output=out, success=True, event_id="e")
    return orjson.dumps({**message.model_dump(), "output": {"data": message.model_dump()["output"]["data"]}},
                        default=str)


def session(demo, page_state: dict, step_event: str = "step") -> SessionState:
    state = SessionState(demo)
    state[event(demo, step_event).inputs[0]._id] = page_state  # the page's trace handle (a gr.State)
    return state


@pytest.fixture()
def hops(monkeypatch):
    """Every worker-thread hop Gradio or the guard makes, by the function handed over."""
    made: list = []
    real = anyio.to_thread.run_sync

    async def counted(func, *args, **kwargs):
        made.append(getattr(func, "__name__", type(func).__name__))
        return await real(func, *args, **kwargs)

    monkeypatch.setattr(anyio.to_thread, "run_sync", counted)
    return made


@pytest.fixture()
def serialised(monkeypatch):
    """How many times a Plotly figure is serialised to JSON."""
    import plotly.graph_objects as go

    count = [0]
    real = go.Figure.to_json

    def to_json(self, *args, **kwargs):
        count[0] += 1
        return real(self, *args, **kwargs)

    monkeypatch.setattr(go.Figure, "to_json", to_json)
    return count


def stock_twin(demo):
    """The /step event as it was wired before: Gradio's own pre- and postprocessing around the plain handler."""
    step = event(demo, "step")
    with gr.Blocks() as twin:  # the same components, made again from their own arguments
        inputs, outputs = [[b.__class__(**b.constructor_args) for b in blocks] for blocks in (step.inputs, step.outputs)]
        names = dict(zip(h.STEP_OUT, outputs))

        def views(*args):
            return {names[k]: v for k, v in h.step_views(*args).items()} or gr.skip()

        gr.Button().click(views, inputs, outputs, api_name="step")
    return twin


def test_a_hit_is_answered_without_a_thread_or_a_serialisation_and_equals_a_fresh_drawing(demo, hops, serialised):
    state = session(demo, example_state())
    step = event(demo, "step")
    payloads = [None, 3, "auto", "state", None]
    first = call(demo, step, payloads, state)
    assert hops and serialised[0] == 2  # a miss: drawn on a worker thread, its two figures serialised once
    hops.clear()
    serialised[0] = 0
    again = call(demo, step, payloads, state)
    assert hops == [] and serialised[0] == 0  # a hit: answered on the event loop, nothing serialised again
    assert again == first
    twin = stock_twin(demo)
    fresh = call(twin, event(twin, "step"), payloads, session(twin, example_state()))
    assert again == fresh  # exactly what Gradio's own postprocessing sends for the same step
    assert len(hops) >= 5  # (the stock wiring hops once per processed input and output)


def test_a_kept_answer_leaves_as_json_written_once_with_the_same_bytes(demo):
    """The figures of a kept step are JSON text written once (orjson Fragments): neither pydantic's dump of the result
    message nor Gradio's file scan walks them again, and the client gets the very bytes the stock wiring sends."""
    state = session(demo, example_state())
    step = event(demo, "step")
    payloads = [None, 3, "auto", "state", None]
    sent(demo, step, payloads, state)  # drawn and kept
    kept = asyncio.run(demo.process_api(block_fn=step, inputs=list(payloads), state=state))["data"]
    assert sum(isinstance(v, orjson.Fragment) for v in kept) >= 2  # at least the two figures
    twin = stock_twin(demo)
    assert sent(demo, step, payloads, state) == sent(twin, event(twin, "step"), payloads, session(twin, example_state()))


def test_the_server_step_event_is_answered_the_same_way(demo, hops):
    state = session(demo, example_state())
    server = next(b for b in demo.fns.values() if b.name == "server_step")
    unchanged = call(demo, server, [None, -1, "auto", "state", None], state)  # the browser drew it: nothing changes
    assert len(unchanged) == len(server.outputs) and all("value" not in v for v in unchanged)
    drawn = call(demo, server, [None, 2, "auto", "state", None], state)
    hops.clear()
    assert call(demo, server, [None, 2, "auto", "state", None], state) == drawn and hops == []
    assert drawn == call(demo, event(demo, "step"), [None, 2, "auto", "state", None], state)


def test_bad_switches_get_the_radios_own_message_and_are_never_kept(demo):
    state = session(demo, example_state())
    step = event(demo, "step")
    for _ in range(2):
        with pytest.raises(gr.Error, match="not in the list of choices"):
            call(demo, step, [None, 1, "forged", "state", None], state)


def test_a_hit_is_charged_and_refused_by_the_same_rules(demo, monkeypatch):
    state = session(demo, example_state())
    step = event(demo, "step")
    payloads = [None, 4, "auto", "state", None]
    call(demo, step, payloads, state)  # kept now
    charged: list = []
    monkeypatch.setattr(CPU_SHARE, "charge", lambda ask, seconds, now=None: charged.append(seconds))
    call(demo, step, payloads, state)
    assert len(charged) == 1  # the hit's lookup, on the loop's thread
    monkeypatch.setattr(CPU_SHARE, "refusal", lambda ask, contended: "You have used your share.")
    with pytest.raises(gr.Error, match="used your share"):
        call(demo, step, payloads, state)


def test_a_miss_is_charged_on_its_worker_with_the_visitors_context(monkeypatch):
    seen: list = []
    steps = WireSteps([gr.State(), ClampedSlider(0, 9)], [("summary", gr.Textbox())])

    def views(state, step):
        from components.serve.identity import current

        seen.append(current())
        return {"summary": f"step {step!r}"}

    fn = event_guard.guarded(steps.handler(views), "step_views", lambda: [], 0)
    charged: list = []
    monkeypatch.setattr(CPU_SHARE, "charge", lambda ask, seconds, now=None: charged.append(ask[0]))
    monkeypatch.setattr(event_guard, "request_key", lambda request: getattr(request, "key", "nobody"))

    async def as_visitor(*args):
        from gradio.context import LocalContext

        LocalContext.request.set(SimpleNamespace(key="ip:9.9.9.9", session_hash="page"))
        return await fn(*args)

    drawn = ["step 2.0"]
    assert asyncio.run(as_visitor({"key": "k"}, "2")) == drawn  # the slider's own preprocess: "2" -> 2.0
    assert charged == ["ip:9.9.9.9"] * 2 and seen == ["ip:9.9.9.9"]  # the lookup and the drawing, both the visitor's
    assert asyncio.run(as_visitor({"key": "k"}, "2")) == drawn and len(seen) == 1


def test_only_short_plain_inputs_from_a_stored_trace_are_kept():
    assert input_key([{"key": "k"}, 1, "auto"]) != input_key([{"key": "k"}, 1.0, "auto"])
    assert input_key([{"trace": {}}, 1]) is None  # an older handle names no stored text
    assert input_key([{"key": "k"}, "x" * 65]) is None and input_key([{"key": "k"}, [1]]) is None
    steps = WireSteps([gr.State(), gr.Number()], [("summary", gr.Textbox())], size=3)
    for k in range(10):
        steps.draw(lambda s, n: {"summary": str(n)}, [{"key": "k"}, k])
    assert len(steps) == 3 and steps.quick({"key": "k"}, 9) == ["9"] and steps.quick({"key": "k"}, 0) is None


def test_a_kept_answer_is_made_encodable_once_when_drawn_not_at_every_hit(monkeypatch):
    monkeypatch.setattr(CPU_SHARE, "charge", lambda ask, seconds, now=None: None)
    steps = WireSteps([gr.State(), ClampedSlider(0, 9)], [("summary", gr.Textbox())])
    fn = event_guard.guarded(steps.handler(lambda state, step: {"summary": "a\ud800b"}), "step_views", lambda: [], 0)
    first = asyncio.run(fn({"key": "k"}, 1))
    assert first == ["a\ufffdb"]  # a lone surrogate cannot be sent: replaced before it is kept
    walks: list = []
    real = event_guard.encodable
    monkeypatch.setattr(event_guard, "encodable", lambda value, depth=0: walks.append(1) or real(value, depth))
    assert asyncio.run(fn({"key": "k"}, 1)) == first and walks == []  # the hit walks none of its text again


def test_a_miss_is_preprocessed_with_the_visitors_own_copy_of_each_component():
    """Once an event updates a component (a run's trace sets the scrubber's maximum), Gradio keeps the visitor's own
    copy in the session's config and preprocesses with it; so does a drawing here: a step past the page's first
    maximum is the step asked for, not clamped to the first example's last step."""
    from gradio.context import LocalContext

    slider = ClampedSlider(0, 9)
    wider = copy.copy(slider)
    wider.maximum = 20

    def draw(blocks: dict) -> list:
        LocalContext.blocks_config.set(SimpleNamespace(blocks=blocks))
        steps = WireSteps([gr.State(), slider], [("summary", gr.Textbox())])
        return steps.draw(lambda state, step: {"summary": f"step {step!r}"}, [{"key": "k"}, 15])

    assert contextvars.copy_context().run(draw, {slider._id: wider}) == ["step 15.0"]
    assert contextvars.copy_context().run(draw, {}) == ["step 9"]  # a session that never changed it: the page's own


def test_a_flooder_stepping_500_new_steps_leaves_another_addresses_kept_steps_answered_as_hits(monkeypatch):
    """Kept answers are kept per unit of fairness (components/replay/unit_lru.py): beside eight addresses flooding a
    heavy trace's steps, an honest visitor's kept steps used to be pushed out within seconds and drawn again."""
    drawn: list = []
    steps = WireSteps([gr.State(), ClampedSlider(0, 999)], [("summary", gr.Textbox())])

    def views(state, step):
        drawn.append((state["key"], step))
        return {"summary": f"{state['key']} {step!r}"}

    fn = event_guard.guarded(steps.handler(views), "step_views", lambda: [], 0)
    monkeypatch.setattr(CPU_SHARE, "charge", lambda ask, seconds, now=None: None)
    monkeypatch.setattr(event_guard, "request_key", lambda request: request.key)

    async def step_as(address: str, key: str, step: int):
        from gradio.context import LocalContext

        LocalContext.request.set(SimpleNamespace(key=address, session_hash=address))
        return await fn({"key": key}, step)

    for step in range(5):  # the class's example, drawn once each
        asyncio.run(step_as("ip:10.9.0.1", "example", step))
    for step in range(500):  # a flooder's heavy trace, every step a new one
        asyncio.run(step_as("ip:10.66.1.1", "heavy", step))
    drawn.clear()
    answers = [asyncio.run(step_as("ip:10.9.0.1", "example", step)) for step in range(5)]
    assert answers == [[f"example {float(s)!r}"] for s in range(5)] and drawn == []  # every one a hit
