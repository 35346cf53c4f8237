"""Every value a Run dropdown offers comes with words (a student met 'score_threshold' and
'low_confidence_dynamic' as the choices), and the id stays beside them, since configs and docs say it."""
from __future__ import annotations

import re

from components.run.knobs import CHOICE_WORDS, KNOBS, choice_labels


def test_every_choice_of_every_choice_knob_has_words_and_keeps_its_id():
    choice_knobs = [k for k in KNOBS if k.kind == "choice"]
    assert choice_knobs
    for knob in choice_knobs:
        assert set(CHOICE_WORDS.get(knob.name, {})) == set(knob.choices), knob.name
        for label, value in choice_labels(knob):
            assert label == f"{CHOICE_WORDS[knob.name][value]} · {value}"
            assert not re.search(r"[a-z]_[a-z]", label.split(" · ")[0]), label  # words, not another id
