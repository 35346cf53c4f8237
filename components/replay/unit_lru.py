"""Recent answers kept in memory per unit of fairness, so one visitor's steps can only push out its own.

Replay keeps two kinds of answers this way (components/replay/step_cache.py: a step's views;
components/replay/wire_steps.py: a step event's answer in the form Gradio sends it). They used to be one
least-recently-used list of 24 for everybody. Beside eight addresses flooding a heavy trace's steps (about ten new
steps a second), an honest visitor's kept steps were pushed out within seconds, so its steps were drawn again, each
then waiting about 1.5 s for the interpreter behind the flooders' drawings (benchmarks/one_address.py, figure (d)).

So each unit (an address, or a signed-in account: components/serve/identity.py) holds its own recent keys:
- a unit holds at most `per_unit` keys, its least recently used let go first: a flooder's new steps push out only
  its own;
- all units together hold at most `total` keys; past it, the unit holding the most lets go of its least recently
  used (ties: the unit that asked least recently), so a class holding a handful of steps keeps them beside
  flooders each holding dozens;
- a value is kept once, however many units hold its key (a class's example drawn once, shared by every address
  that steps through it); it is dropped when the last unit holding it lets go. A read of a key kept for another
  unit is a hit, and the reader now holds it too.
Memory is bounded whatever the number of units a client forges: at most `total` keys held, so at most `total`
values and `total` units. Every read and write holds one lock (pages' handler threads and the event loop read at
once); nothing is drawn under it, and letting go of a key scans at most `total` units.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Hashable, Optional


class UnitLru:
    """Values by key, each unit holding at most `per_unit` keys and all units at most `total`; thread-safe."""

    def __init__(self, per_unit: int, total: int) -> None:
        if not 1 <= per_unit <= total:
            raise ValueError(f"need 1 <= per_unit <= total, got {per_unit} and {total}")
        self.per_unit, self.total = per_unit, total
        self._units: "OrderedDict[Hashable, OrderedDict[Hashable, None]]" = OrderedDict()  # least recent first
        self._values: dict[Hashable, Any] = {}
        self._holders: dict[Hashable, int] = {}  # how many units hold each key
        self._holds = 0
        self._lock = threading.Lock()

    def get(self, unit: Hashable, key: Hashable) -> Optional[Any]:
        """The value kept under `key` (for any unit), or None; a hit makes it `unit`'s most recent key."""
        with self._lock:
            value = self._values.get(key)
            if value is not None:
                self._hold(unit, key)
            return value

    def put(self, unit: Hashable, key: Hashable, value: Any) -> None:
        """Keep `value` under `key` as `unit`'s most recent key; let go of keys past the bounds."""
        with self._lock:
            self._values[key] = value
            self._hold(unit, key)

    def held(self, unit: Hashable) -> int:
        """How many keys `unit` holds."""
        with self._lock:
            return len(self._units.get(unit, ()))

    def __len__(self) -> int:
        """How many values are kept (each once, however many units hold it)."""
        return len(self._values)

    def _hold(self, unit: Hashable, key: Hashable) -> None:
        keys = self._units.setdefault(unit, OrderedDict())
        self._units.move_to_end(unit)
        if key in keys:
            keys.move_to_end(key)
            return
        keys[key] = None
        self._holders[key] = self._holders.get(key, 0) + 1
        self._holds += 1
        if len(keys) > self.per_unit:
            self._let_go(unit)
        while self._holds > self.total:
            self._let_go(self._busiest())

    def _busiest(self) -> Hashable:
        """The unit holding the most keys; of equals, the one that asked least recently (first in order)."""
        most, found = 0, None
        for unit, keys in self._units.items():
            if len(keys) > most:
                most, found = len(keys), unit
        return found

    def _let_go(self, unit: Hashable) -> None:
        """`unit` lets go of its least recently used key; the value goes once nobody holds it."""
        keys = self._units[unit]
        key, _ = keys.popitem(last=False)
        if not keys:
            del self._units[unit]
        self._holds -= 1
        self._holders[key] -= 1
        if not self._holders[key]:
            del self._holders[key], self._values[key]
