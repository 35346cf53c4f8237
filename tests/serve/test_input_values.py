"""Issue 19, rows 11-14 at the handler level: every bad value gets one readable line. No int beyond 64 bits and no
lone surrogate goes back to Gradio's encoder, no RecursionError / OverflowError escapes, no value is echoed whole."""
from __future__ import annotations

import math

import gradio as gr
import pytest

from components.compare import lanes as cc
from components.replay import handlers as h
from components.run import handlers as run_handlers
from components.serve import event_guard
from components.run import config_check
from components.run import knobs
from components.serve.identity import current
from s2d2.config import DecodeConfig, preset

PYTHON_TEXT = ("too large to convert", "argument must be", "NoneType", "multiple values for keyword", "Traceback",
               "maximum recursion", "cannot convert float")
LANES = ["ar", "sdar-config-a", cc.OFF, cc.OFF, "", "", "", ""]


def readable(message: str, limit: int = 600) -> bool:
    return len(message) <= limit and "\n" not in message and not any(t in message for t in PYTHON_TEXT)


def test_a_huge_seed_is_never_echoed_by_a_preset():
    """Row 11: a 20-digit seed, then a preset: the seed box keeps its value (Run says why), nothing beyond 64 bits
    is sent back."""
    for seed in (10**20, 2**64 + 1, float("inf"), -1):
        out = run_handlers.apply_preset("sdar-config-a", seed)
        assert "knob_seed" not in out and out["knob_method"]["value"] == "s2d2"
        assert event_guard.encodable(out) == out
    assert run_handlers.apply_preset("sdar-config-a", 7)["knob_seed"]["value"] == 7
    assert run_handlers.apply_preset("sdar-config-a", None)["knob_seed"]["value"] == 0
    assert "knob_seed" not in run_handlers.model_changed("tiny-llada2", "block", 10**30)


def test_non_finite_numbers_in_replay_events_are_a_blank():
    """Row 12: a slider value of 1e400 (JSON: infinity), a canvas position of Infinity."""
    from fixtures import trace_factory as tf
    from components.files.traces import make_state

    state = make_state(tf.mixed(), "m")

    class Evt:
        _data = {"position": math.inf}

    assert h.select_position(state, 1, "auto", Evt()) == {}
    Evt._data = {"position": 10**400}
    assert h.select_position(state, 1, "auto", Evt()) == {}
    # The step the browser hands the server: a non-finite value is a blank (nothing drawn)
    assert h.server_step(state, math.inf) == {} and h.server_step(state, 10**400) == {} and h.server_step(state, "x") == {}


@pytest.mark.parametrize("seed, gen, extra, expect", [
    (None, 8, "", "Seed (all lanes): the box is empty. Type a whole number"),
    (math.inf, 8, "", "seed: expected a whole number in [0, 2147483647], got 'inf'"),
    (0, math.inf, "", "Generation length: expected a whole number"),
    (0, 8, "x=" + "[" * 100_000 + "]" * 100_000, "lane 2: custom settings: the value of 'x' is nested too deeply"),
    (0, 8, "gen_length=8", "lane 2: gen_length is set for every lane by the Generation length slider"),
    (0, 8, "policy=" + "p" * 1_000_000, "lane 2: policy: unknown value 'pppppppppppppppppppppppppppppppppppppppp…'"),
])
def test_compare_values_get_one_readable_line(seed, gen, extra, expect):
    """Rows 12 and 14: Compare's seed, generation length and per-lane overrides."""
    lanes = ["ar", "sdar-config-a", cc.OFF, cc.OFF, "", extra, "", ""]
    status, state = cc.run_compare("2+3", "tiny", seed, gen, *lanes)
    assert state is None and status.startswith("⚠ " + expect) and readable(status), status[:300]


def test_run_knobs_never_show_python_text():
    values = dict(zip(knobs.KNOB_NAMES, knobs.preset_values("sdar-config-a")))
    for name, bad in (("confidence_threshold", 10**400), ("confidence_threshold", None), ("block_length", "x" * 10**6),
                      ("gen_length", 10**5000), ("temperature", math.inf), ("seed", 10**5000)):
        cfg, _, err = config_check.config_from_inputs(*dict(values, **{name: bad}).values())
        assert cfg is None and err.startswith(f"Invalid setting — {name}") and readable(err), err[:300]


def test_library_messages_quote_bounded_values():
    for kwargs in (dict(policy="p" * 10**6), dict(remasking="<" * 10**6), dict(block_length=10**5000),
                   dict(confidence_threshold=10**400)):
        with pytest.raises(ValueError) as info:
            DecodeConfig.from_dict({**preset("sdar-config-a").to_dict(), **kwargs})
        assert readable(str(info.value)), str(info.value)[:300]
    with pytest.raises(ValueError) as info:
        preset("q" * 10**6)
    assert readable(str(info.value)), str(info.value)[:300]


def test_outputs_are_made_encodable():
    out = event_guard.encodable({"a": 2**64 + 5, "b": [math.inf, -(2**63) + 1, "x\ud800"], "c": (math.nan, True)})
    assert out == {"a": None, "b": [None, -(2**63) + 1, "x\ufffd"], "c": (None, True)}


def test_guarded_handlers_raise_one_readable_line():
    def deep():
        raise RecursionError("maximum recursion depth exceeded")

    def overflow(x):
        return int(x)

    def crash():
        raise KeyError("/work/app/secret/path.py")

    def stream():
        yield {"n": 10**30}
        yield {"who": current()}
        raise OverflowError("int too large to convert to float")

    for fn, args, expect in ((deep, (), "nested too deeply"), (overflow, (math.inf,), "too large"),
                             (crash, (), "Something went wrong here (KeyError)")):
        with pytest.raises(gr.Error) as info:
            event_guard.guarded(fn, fn.__name__)(*args)
        assert expect in info.value.message and "/work" not in info.value.message
    gen = event_guard.guarded(stream, "stream")()
    assert next(gen) == {"n": None} and next(gen) == {"who": "local"}
    with pytest.raises(gr.Error, match="too large"):
        next(gen)
