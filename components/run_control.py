"""Stop requests for runs in flight, keyed by browser session.

The Stop button only raises its session's flag; the run itself reads the flag between blocks, ends the decode with
the partial trace and writes the final status. One writer per status line: Stop never races a late progress update
(it used to cancel the event and print "Stopped." while an already queued "Decoding… 48 steps" arrived after it).
"""
from __future__ import annotations

import threading
from collections import OrderedDict

MAX_SESSIONS = 1000  # flags of the most recent sessions; older ones are forgotten (their runs are long over)
_LOCK = threading.Lock()
_FLAGS: "OrderedDict[str, bool]" = OrderedDict()


def begin(key: str) -> None:
    """A new run starts for `key`: forget any earlier Stop press."""
    _set(key, False)


def request_stop(key: str) -> None:
    """The Stop button of session `key`."""
    _set(key, True)


def stop_requested(key: str) -> bool:
    with _LOCK:
        return bool(key) and _FLAGS.get(key, False)


def _set(key: str, value: bool) -> None:
    if not key:
        return
    with _LOCK:
        _FLAGS[key] = value
        _FLAGS.move_to_end(key)
        while len(_FLAGS) > MAX_SESSIONS:
            _FLAGS.popitem(last=False)
