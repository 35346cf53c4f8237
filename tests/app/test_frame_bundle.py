"""The frame bundle (components/replay/frame_bundle.py) decoded by the page's own ES modules (components/replay/js/,
run under node): every step of every shipped example, under each colouring and mask forward tried, is exactly the
server's rendering (step_views.render_step), and the stepper hands the server only what needs Python.
(tests/browser/test_replay_steps.py checks the same in Chromium, with no server event per step.)"""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from fixtures import trace_factory as tf

from components.replay import frame_bundle as fb
from components.replay.browser_steps import STEPPED
from components.replay.handlers import restyle, server_step, trace_views
from components.files.traces import load_example, make_state
from components.views.step_views import StepOptions, render_step

ROOT = Path(__file__).resolve().parent.parent.parent
SHIPPED = sorted((ROOT / "assets" / "traces").glob("*.json"))
DRIVER = ROOT / "tests" / "support" / "frame_driver.mjs"
NODE = shutil.which("node")
pytestmark = pytest.mark.skipif(NODE is None, reason="node is not installed (apt-get install nodejs)")


def decode(bundle: dict[str, Any], values: list[Any] = (), shown: list[Any] = (), speeds: list[Any] = ()) -> dict:
    """What the page's modules make of `bundle` (every frame's views; the stepper's outputs for `values`)."""
    payload = json.dumps({"bundle": bundle, "values": list(values), "shown": list(shown), "speeds": list(speeds)})
    out = subprocess.run([NODE, str(DRIVER)], input=payload, capture_output=True, text=True, check=True, timeout=120)
    return json.loads(out.stdout)


def compact(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def server_view(trace: Any, step: int, options: StepOptions) -> dict[str, Any]:
    """The server's views at `step`, in the form the page holds them (HTML text; a plot's JSON, parsed)."""
    views = render_step(trace, step, options)
    return {name: json.loads(value.to_json()) if hasattr(value, "to_json") else str(value)
            for name, value in views.items()}


def assert_same(trace: Any, bundle: dict[str, Any], options: StepOptions) -> None:
    decoded = decode(bundle)["views"]
    assert len(decoded) == len(trace.steps) + 1  # every step fits the bound
    for step, views in enumerate(decoded):
        want = server_view(trace, step, options)
        for name in STEPPED:
            got = json.loads(views[name]["plot"]) if name in ("mask", "routing") else views[name]
            assert got == want[name], (step, name)


@pytest.mark.parametrize("path", SHIPPED, ids=[p.name for p in SHIPPED])
def test_every_step_of_every_shipped_example_is_the_servers_rendering(path):
    trace = load_example(path)
    assert_same(trace, fb.build_bundle(trace), StepOptions())


@pytest.mark.parametrize("color_by,which", [("p", "draft"), ("r", "commit"), ("q", "verify")])
def test_other_colourings_and_mask_forwards_too(color_by, which):
    trace = load_example(SHIPPED[0])
    assert_same(trace, fb.build_bundle(trace, color_by, which), StepOptions(which, color_by))


@pytest.mark.parametrize("name", sorted(tf.SCENARIOS))
def test_every_scenario_of_the_trace_factory(name):
    trace = tf.SCENARIOS[name]()
    assert_same(trace, fb.build_bundle(trace), StepOptions())


def test_the_page_and_the_server_name_the_same_views_in_the_same_order():
    trace = load_example(SHIPPED[0])
    assert decode(fb.build_bundle(trace))["stepped"] == STEPPED


def test_the_stepper_sends_the_server_only_a_pinned_token_or_a_step_past_the_bundle():
    trace = load_example(SHIPPED[0])
    n = len(trace.steps)
    bundle = fb.build_bundle(trace)
    shown = [f"on screen {name}" for name in STEPPED]
    values = [2, 2.5, -3, 10**6, None, "", "junk"]
    outs = decode(bundle, values, shown)["outputs"]
    views = decode(bundle)["views"]
    for value, out, step in zip(values, outs, [2, 3, 0, n]):
        assert out[-1] == -1, value  # drawn in the browser: nothing for the server
        assert out[:-1] == [views[step][name] for name in STEPPED]
    for out in outs[4:]:  # a blank or junk value changes nothing
        assert out == [*shown, -1]
    pinned = list(shown)
    pinned[STEPPED.index("detail")] = '<span data-pinned="40">📌 …</span>'
    out = decode(bundle, [1], pinned)["outputs"][0]
    assert out[-1] == 1  # the server draws the pin's views at step 1 ...
    for i, name in enumerate(STEPPED):  # ... and the browser everything else
        assert out[i] == (pinned[i] if name in ("detail", "residual", "mask") else views[1][name]), name
    short = {**bundle, "frames": bundle["frames"][:2], "last": 1}  # a bundle cut after step 1
    assert decode(short, [3], shown)["outputs"][0] == [*shown, 3]


def test_a_bundle_is_bounded_and_the_server_draws_the_steps_past_it():
    trace = load_example(SHIPPED[0])
    whole = fb.build_bundle(trace)
    size = len(compact(whole))
    cut = fb.build_bundle(trace, max_bytes=size // 2)
    assert 0 <= cut["last"] < whole["last"] and len(cut["frames"]) == cut["last"] + 1
    assert size // 3 < len(compact(cut)) <= size // 2
    state = make_state(trace, "t")
    views = server_step(state, cut["last"] + 1)
    assert views["canvas"] == render_step(trace, cut["last"] + 1)["canvas"]
    assert server_step(state, -1) == {} and server_step(state, None) == {}


def test_a_trace_opens_with_its_bundle_and_a_new_switch_sends_a_new_one():
    trace = load_example(SHIPPED[0])
    opened = trace_views(trace, 1)
    assert opened["bundle"] == fb.bundle_for(trace) and (opened["color_by"], opened["mask_which"]) == ("state", "auto")
    again = restyle(make_state(trace, "t"), 1, "draft", "p")
    assert again["bundle"]["key"].endswith("/p/draft") and again["canvas"] == render_step(
        trace, 1, StepOptions("draft", "p"))["canvas"]
    assert fb.bundle_for(trace, "bogus", "bogus")["key"].endswith("/state/auto")  # junk reads as the defaults


def test_play_waits_as_the_server_timer_did():
    got = decode(fb.build_bundle(load_example(SHIPPED[0])), speeds=[1, 4, 0.25, 0, -2, None, "x", 100, 0.1])
    assert got["intervals"] == [1.0, 0.25, 4.0, 1.0, 1.0, 1.0, 1.0, 0.2, 5.0]


def test_the_work_of_a_bundle_is_bounded_before_it_starts():
    trace = tf.large(512)
    positions = trace.header.total_length
    assert fb.bundle_frames(trace) == min(len(trace.steps) + 1, fb.MAX_BUNDLE_FRAMES, fb.MAX_BUNDLE_CELLS // positions)
    from types import SimpleNamespace

    long = SimpleNamespace(header=SimpleNamespace(total_length=4096), steps=[None] * 3000)  # a long upload's shape
    assert fb.bundle_frames(long) == fb.MAX_BUNDLE_CELLS // 4096  # few frames; the server draws the rest
