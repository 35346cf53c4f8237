"""Issue 38 rows 6-7: a Run setting the app would change or refuse gets its line where the visitor looks. A number
outside a knob's range is refused with a line naming the knob (never clamped without a word, as the Run tab's
slider used to do for a script's value), and the line sits beside the knob itself, Advanced opened when it is
there; a valid Record puts every knob's own help line back."""
from __future__ import annotations

import gradio as gr

from components.run import handlers as run_handlers
from components.run import knobs
from components.run.config_check import setting_problem
from components.run.knob_scope import is_main
from components.ui import FreeSlider


def _knobs(**values):
    row = dict(zip(knobs.KNOB_NAMES, knobs.preset_values("sdar-config-a")))
    row.update(values)
    return [row[name] for name in knobs.KNOB_NAMES]


def test_a_block_length_over_the_range_is_refused_by_name_not_clamped():
    assert FreeSlider(1, 64, value=4).preprocess(999) == 999.0  # the Run knob passes it on as typed
    assert FreeSlider(1, 64, value=4).preprocess(10**500) == 10**500  # exact: the line quotes its size
    assert setting_problem(*_knobs(block_length=10**500))[1].endswith("got a 501-digit number")
    assert setting_problem(*_knobs(block_length=999)) == (
        "block_length", "block_length: at most 64 (S2D2_MAX_BLOCK_LENGTH), got 999")
    assert setting_problem(*_knobs(denoising_steps=999)) == ("denoising_steps", "denoising_steps: at most 64, got 999")
    assert setting_problem(*_knobs(confidence_threshold=-0.5)) == (
        "confidence_threshold", "confidence_threshold: at least 0, got '-0.5'")
    outs = list(run_handlers.run(knobs.EXAMPLE_PROMPTS[0], "tiny", *_knobs(block_length=999)))
    assert len(outs) == 1 and outs[0]["run_ok"] is False
    assert outs[0]["run_status"] == ("⚠ Invalid setting — block_length: at most 64 (S2D2_MAX_BLOCK_LENGTH), got 999 "
                                     "(beside the **Block length B** field). Nothing was run.")


def test_the_refused_setting_is_said_beside_its_field_and_advanced_opens():
    assert not is_main("seed")
    notes = run_handlers.setting_notes(*_knobs(seed=2.5))
    seed = notes["knob_seed"]
    assert seed["info"] == "⚠ Expected a whole number, got '2.5'. Nothing was run."
    assert seed["elem_classes"] == [run_handlers.FIELD_ERROR] and seed["visible"] is True
    assert notes["advanced"] == {"__type__": "update", "open": True}
    others = [v for k, v in notes.items() if k not in ("knob_seed", "advanced")]
    assert all(v["elem_classes"] == [] for v in others)  # only the refused knob is marked
    status = list(run_handlers.run(knobs.EXAMPLE_PROMPTS[0], "tiny", *_knobs(seed=2.5)))[0]["run_status"]
    assert "(beside the **Seed** field, under Advanced)" in status


def test_a_main_knob_is_marked_without_opening_advanced_and_a_valid_record_clears_every_line():
    notes = run_handlers.setting_notes(*_knobs(block_length=999))
    assert notes["knob_block_length"]["info"] == "⚠ At most 64 (S2D2_MAX_BLOCK_LENGTH), got 999. Nothing was run."
    assert "advanced" not in notes
    clean = run_handlers.setting_notes(*_knobs())
    assert "advanced" not in clean and all(v["elem_classes"] == [] for v in clean.values())
    assert clean["knob_policy"]["info"] == knobs.INFO["policy"]
    # the Seed's rule is said before any Record, and comes back once a refused seed is fixed
    assert clean["knob_seed"]["info"] == knobs.INFO["seed"] and "from 0 to 2,147,483,647" in knobs.INFO["seed"]


def test_compare_refuses_a_generation_length_outside_its_slider_instead_of_clamping_it():
    """Compare's Generation length slider passes a script's value on as sent; the lanes refuse one outside 8-256 or
    not whole, by name (it used to be clamped to 256 without a word)."""
    from components.compare import lanes as cc
    from components.compare.layout import build_compare_tab

    with gr.Blocks():
        assert isinstance(build_compare_tab()["cmp_gen"], FreeSlider)
    assert FreeSlider(8, 256, value=48).preprocess(1000) == 1000.0
    lanes = ["ar", "sdar-config-a", cc.OFF, cc.OFF, "", "", "", ""]
    assert cc.run_compare("2+3", "tiny", 0, 1000, *lanes)[0] == "⚠ Generation length: 8 to 256, got 1000"
    assert cc.run_compare("2+3", "tiny", 0, 12.5, *lanes)[0] == "⚠ Generation length: expected a whole number"
