"""Places in line sent at an interval (components/serve/queue_updates.py): the app's queue updates waiting visitors
every S2D2_QUEUE_UPDATE_S seconds (default 1), not at every start; 0 keeps Gradio's own rule."""
from __future__ import annotations

import pytest

from components.serve.queue_updates import status_update_rate


def test_the_default_is_one_second_and_zero_is_gradios_own_rule(monkeypatch):
    monkeypatch.delenv("S2D2_QUEUE_UPDATE_S", raising=False)
    assert status_update_rate() == 1.0
    monkeypatch.setenv("S2D2_QUEUE_UPDATE_S", "0")
    assert status_update_rate() == "auto"
    monkeypatch.setenv("S2D2_QUEUE_UPDATE_S", "61")
    with pytest.raises(ValueError, match="S2D2_QUEUE_UPDATE_S"):
        status_update_rate()


def test_the_apps_queue_updates_places_at_the_interval_not_at_every_start():
    import app

    queue = app.demo._queue
    assert queue.live_updates is False  # Gradio's "auto" would re-send every waiting place at every start
    assert queue.update_intervals == 1.0
