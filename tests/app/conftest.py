"""Fixtures the app's tests share."""
from __future__ import annotations

import pytest

from tests.support.tour_material import opening_material


@pytest.fixture(scope="module")
def material():
    """The Learn tour's material on the opening example pair."""
    return opening_material()
