"""The last few steps drawn, kept so a class stepping through the same trace costs one render per step, not one per
student.

A class opens the same example (its state key is the same for everyone: a bundled example is stored once,
components/files/traces.py) and steps through it; every student's step asked the server to draw the same views
again, about 50 ms of Python each, on the one interpreter every handler shares. A step's views depend only on the
trace, the step and the view switches, and a state key names one trace's exact text (a hash of it), so the views
drawn for (key, step, switches) are the views for every page that holds that key.

Bounded: at most MAX_STEPS entries, least recently used dropped first (a heavy trace's views are a megabyte or two,
so the cache holds tens of MB at worst). Thread-safe; the views it returns are shared between pages, so callers get
a fresh dict and must not change the values in it (Gradio only reads them to send them).
"""
from __future__ import annotations

from typing import Any, Callable, Hashable

from components.replay.lru import Lru

MAX_STEPS = 24  # a class's example has a handful of steps; a flooder's random heavy steps churn only these


class StepCache:
    """Views memoised per (state key, step, switches); `render` is called only on a miss."""

    def __init__(self, size: int = MAX_STEPS) -> None:
        self._views = Lru(size)

    def views(self, key: Hashable, render: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """The views cached under `key`, or `render()`'s (then kept); a fresh dict either way."""
        hit = self._views.get(key)
        if hit is not None:
            return dict(hit)
        drawn = render()  # outside any lock: two pages missing at once both draw, neither waits on the other
        self._views.put(key, drawn)
        return dict(drawn)

    def __len__(self) -> int:
        return len(self._views)


STEPS = StepCache()
