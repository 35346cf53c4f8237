"""The last few steps drawn, kept so a class stepping through the same trace costs one render per step, not one per
student.

A class opens the same example (its state key is the same for everyone: a bundled example is stored once,
components/files/traces.py) and steps through it; every student's step asked the server to draw the same views
again, about 50 ms of Python each, on the one interpreter every handler shares. A step's views depend only on the
trace, the step and the view switches, and a state key names one trace's exact text (a hash of it), so the views
drawn for (key, step, switches) are the views for every page that holds that key.

Kept per unit of fairness (components/replay/unit_lru.py: the address or signed-in account of the request being
served, components/serve/identity.py), so a flooder's steps push out only its own: each unit holds at most PER_UNIT
steps and all units at most MAX_STEPS, a drawing shared by every unit that holds it (a heavy trace's step is under
a megabyte of views, so the cache holds about a hundred MB at worst). Thread-safe; the views it returns are shared
between pages, so callers get a fresh dict and must not change the values in it (Gradio only reads them to send
them).
"""
from __future__ import annotations

from typing import Any, Callable, Hashable

from components.replay.unit_lru import UnitLru
from components.serve.identity import current

PER_UNIT = 24  # a class's example has a handful of steps; a flooder's heavy steps churn only its own 24
MAX_STEPS = 128  # all units together: a class and a few flooders each keep their part


class StepCache:
    """Views memoised per (state key, step, switches), kept per unit of fairness; `render` is called only on a miss."""

    def __init__(self, size: int = MAX_STEPS, per_unit: int = PER_UNIT) -> None:
        self._views = UnitLru(min(per_unit, size), size)

    def views(self, key: Hashable, render: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """The views cached under `key`, or `render()`'s (then kept for the request's unit); a fresh dict either way."""
        unit = current()
        hit = self._views.get(unit, key)
        if hit is not None:
            return dict(hit)
        drawn = render()  # outside any lock: two pages missing at once both draw, neither waits on the other
        self._views.put(unit, key, drawn)
        return dict(drawn)

    def __len__(self) -> int:
        return len(self._views)


STEPS = StepCache()
