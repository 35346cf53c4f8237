"""The Run tab's words that must be true when shown (newcomer walk, 2026-12): a finished run's own last update says
Replay is opening, and only the update that opens Replay says it shows the run; the line under the preset names what
was changed from it, and is empty while the knobs hold it."""
from __future__ import annotations

from components.run import handlers as r
from components.run.knobs import KNOB_NAMES, preset_values
from components.run.preset_drift import drift_line


def _knobs(preset: str = "sdar-config-a", **changes):
    values = dict(zip(KNOB_NAMES, preset_values(preset, 7)))
    values.update(changes)
    return list(values.values())


def test_the_line_under_the_preset_names_each_changed_knob_with_the_presets_value():
    assert drift_line("sdar-config-a", *_knobs()) == {"preset_drift": ""}  # the seed is not the preset's
    line = drift_line("sdar-config-a", *_knobs(block_length=1.0))["preset_drift"]  # a slider sends floats
    assert line.startswith("✎ Changed from the preset: **Block length B** = 1 (the preset's 4). Record runs"), line
    assert drift_line("sdar-config-a", *_knobs(block_length=4.0)) == {"preset_drift": ""}


def test_the_line_names_at_most_a_few_knobs_and_counts_the_rest_and_never_fails_on_odd_input():
    line = drift_line("sdar-config-a", *_knobs(block_length=1, gen_length=32, temperature=0.5,
                                                confidence_threshold=0.5, denoising_steps=2))["preset_drift"]
    assert "1 more" in line, line
    assert drift_line("no-such-preset", *_knobs()) == {"preset_drift": ""}
    assert drift_line("sdar-config-a", 1, 2) == {"preset_drift": ""}


def test_a_finished_run_says_replay_shows_it_only_with_the_update_that_opens_replay():
    done = r.last({"run_status": f"✓ Done in 1.0 s: 3 steps, 4 forwards. {r.IN_REPLAY}", "output": "x",
                   "state": {}, "run_ok": True})
    assert r.IN_REPLAY not in done["run_status"] and done["run_status"].endswith(r.TO_REPLAY)
    assert done["run_final"]["run_status"].endswith(r.IN_REPLAY)  # what final_views writes with the tab switch
    refused = r.last({"run_status": "⚠ No. Nothing was run.", "run_ok": False})
    assert refused["run_status"] == refused["run_final"]["run_status"] == "⚠ No. Nothing was run."
