"""A few recent answers kept in memory: a bounded map that drops its least recently used entry first.

Replay keeps two kinds of answers this way (components/replay/step_cache.py: a step's views, shared by a class;
components/replay/wire_steps.py: a step event's answer in the form Gradio sends it). Both are read by many pages'
handler threads at once, so every read and write holds one lock; nothing is drawn under it.

Invariant: at most `size` entries; a read moves its entry to the most recent end.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Hashable, Optional


class Lru:
    """At most `size` values by key, the least recently used dropped first; thread-safe."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._values: "OrderedDict[Hashable, Any]" = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> Optional[Any]:
        """The value kept under `key` (now the most recent), or None."""
        with self._lock:
            value = self._values.get(key)
            if value is not None:
                self._values.move_to_end(key)
            return value

    def put(self, key: Hashable, value: Any) -> None:
        """Keep `value` under `key` as the most recent; drop the oldest past `size`."""
        with self._lock:
            self._values[key] = value
            self._values.move_to_end(key)
            while len(self._values) > self._size:
                self._values.popitem(last=False)

    def __len__(self) -> int:
        return len(self._values)
