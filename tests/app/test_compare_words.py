"""Compare's words and numbers (newcomer walk): lanes named as the rest of the page names them, dropdown choices
with what tells lanes apart first, and what-if scores true as printed against their thresholds."""
from __future__ import annotations

import pytest

from s2d2.config import preset, presets
from s2d2.whatif import WhatIf, WhatIfStep

from components.compare import lane_names as ln
from components.compare import whatif_panel as wv


@pytest.mark.parametrize("value, refs, text", [
    (-0.0003, [0.0], "−0.0003"),  # rounds to −0.000: the digits that show which side of τ_score = 0 it is
    (-0.0, [0.0], "0.000"),  # negative zero prints as zero
    (0.0, [0.0], "0.000"),  # on the threshold: 0 ≥ 0 verifies, as printed
    (2.998, [0.0], "2.998"),
    (0.99996, [1.0], "0.99996"),  # "1.000" would read as 1 ≥ 1
    (1.0004, [1.0], "1.0004"),
    (-5.0002, [1.0, -5.0], "−5.0002"),  # the hysteresis band: true against both ends
    (3e-9, [], "3.0e−09"),  # never a false zero, even past the most decimals
    (None, [0.0], "–"),
])
def test_a_score_prints_true_against_its_thresholds(value, refs, text):
    assert wv.score_text(value, refs) == text


def _step(score: float) -> WhatIfStep:
    return WhatIfStep(index=0, block=0, step=0, old_verify=False, new_verify=False, old_score=score, new_score=score,
                      old_reason="", new_reason="", flipped=False, exact=True)


def test_the_whatif_table_never_prints_minus_zero():
    cfg = preset("sdar-config-a").to_dict()
    w = WhatIf({}, "score_threshold", [_step(-0.00031)], [], None, 1, cfg)
    table = wv.whatif_table(w, 0, cfg)
    assert "<td>skip</td><td>−0.0003</td>" in table and "-0.000" not in table and "−0.000<" not in table


def test_whatif_knobs_use_the_pages_symbols():
    labels = {name: label for name, label, *_ in wv.WHATIF_KNOBS}
    assert labels["score_threshold"] == "τ_score" and labels["penalty_coef"] == "penalty c"
    assert labels["negexp_beta"] == "entropy weight β" and "K̂" in wv.knob_info("negexp_beta")
    assert "neg-exp" not in " ".join(labels.values()) and wv.knob_info("score_threshold") is None


def test_lane_titles_say_what_the_lane_does_and_keep_the_preset_as_a_detail():
    cfg = preset("sdar-config-a").to_dict()
    assert ln.lane_title("3·sdar-config-a", cfg) == "Lane 3 · Verify when it expects a gain (K̂ ≥ 1), block 4"
    assert ln.lane_title("4·sdar-config-b*", preset("sdar-config-b").to_dict()).endswith("(custom settings)")
    assert ln.lane_detail("3·sdar-config-a") == "preset sdar-config-a"
    assert ln.lane_detail("4·sdar-config-b*") == "preset sdar-config-b, with custom settings"
    assert ln.title_short("Lane 3 · Verify when it expects a gain (K̂ ≥ 1), block 4") == "Lane 3"
    assert ln.lane_title("recorded", None) == "recorded" and ln.lane_detail("recorded") == ""


def test_lane_choices_put_what_tells_lanes_apart_first():
    """Issue: on a phone the box shows ~30 characters, so the block size leads and the preset id comes last."""
    choices = dict((value, label) for label, value in ln.compare_choices())
    assert choices["sdar-config-a"] == "Block 4 · Verify when it expects a gain (K̂ ≥ 1) · sdar-config-a"
    assert choices["dynamic-baseline"].startswith("Block 4 · Diffusion alone")
    assert choices["fastdllm-config-a"].startswith("Block 32, sub-block 4 · ")
    assert len(set(choices.values())) == len(choices) == len(presets()) + 1
    for name, label in choices.items():
        assert name == ln.OFF or label.endswith(f" · {name}")
    assert ln.lane_about("sdar-config-a") == "Verify when it expects a gain (K̂ ≥ 1), block 4 · preset `sdar-config-a`"
    assert ln.lane_about(ln.OFF).startswith("Off") and ln.lane_about("no such preset") == ""
