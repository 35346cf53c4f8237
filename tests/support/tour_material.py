"""The Learn tour's material on the opening example pair, as the app loads it (shared by the tour's tests)."""
from __future__ import annotations

from typing import Any

import pytest

from components.files.examples import examples_dir, list_examples, load_pair
from components.tour import material as tour
from components.views.story import pair_story

OPENING = "Verifier catches a wrong digit"


def opening_material() -> Any:
    """The tour's material for the opening example; skips the calling test when the shipped pair is missing."""
    listed = list_examples()
    if OPENING not in listed:
        pytest.skip("no shipped example pair")
    trace, baseline = load_pair(listed[OPENING])
    return tour.load_material(trace, OPENING, baseline, pair_story(trace, baseline), examples_dir())
