"""Chained events (`.then`) are joined only right after the event they follow, by the same session.

A chained event (the Run tab's `show_state` after Run, Compare's `after_run`) must never be refused by the CPU
share (components/serve/cpu_share.py): refused, a finished Run would never be shown. So instead a client may join
it only as the page does: once per finished run of its parent event, in the same session, within
CHAIN_GRACE_S. The event guard (components/serve/event_guard.py) records each finished event (`finished`); the
front door (components/serve/front_door.py) takes one such record for each chained join (`take`) and refuses a
join without one. A loop joining `show_state` by fn index therefore gets one heavy event per real Run, which the
decode queue already paces.
"""
from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import Callable, Optional

CHAIN_GRACE_S = 120.0  # a slow phone reads the parent's result and joins the chained event within this
MAX_FINISHED = 50_000  # finished events remembered (the oldest forgotten first)
UNCHAINED = ("This event runs only right after the one it follows, on the same page: reload the page if it "
             "looks stale.")


class Chains:
    """Finished events per (session, fn index), each good for one chained join; `clock` injectable."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self._done: "OrderedDict[tuple[str, int], tuple[int, float]]" = OrderedDict()

    def finished(self, session: Optional[str], fn_index: Optional[int]) -> None:
        """An event of `session` with index `fn_index` finished (successfully or not)."""
        if not session or fn_index is None:
            return
        with self._lock:
            key = (session, fn_index)
            count, _ = self._done.pop(key, (0, 0.0))
            self._done[key] = (min(count + 1, 4), self.clock())
            while len(self._done) > MAX_FINISHED:
                self._done.popitem(last=False)

    def take(self, session: Optional[str], parent: int) -> bool:
        """Use one finished run of `parent` in `session` for a chained join; False when there is none recent."""
        if not session:
            return False
        with self._lock:
            key = (session, parent)
            count, at = self._done.pop(key, (0, 0.0))
            if count <= 0 or self.clock() - at > CHAIN_GRACE_S:
                return False
            if count > 1:
                self._done[key] = (count - 1, at)
            return True


CHAINS = Chains()


def door_parent(fns: dict, fn: object) -> Optional[int]:
    """The index of the event `fn` is chained after, when the door must see that parent finish first (it runs in
    Python, so the guard records it); None for an event that is not chained or follows a browser-only event."""
    parent = getattr(fn, "trigger_after", None)
    if parent is None:
        return None
    parent_fn = fns.get(parent)
    return parent if parent_fn is not None and getattr(parent_fn, "fn", None) is not None else None
