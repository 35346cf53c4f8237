"""Keep the collector's full passes off the server's long-lived heap: after a full pass, what survived is frozen.

Why: beside eight addresses flooding heavy replay steps (issue 35 figure (d)), the server ran a full pass of
Python's cyclic garbage collector about every 3 s, and each took about 1.1 s (measured with a `gc.callbacks`
timer in the server): it walks every object the process holds (the app's modules, Gradio, torch, the kept steps),
and while it runs no other thread of the process runs. Those pauses were the honest visitor's slow steps: its
join, its result stream and its place in line each stalled for the length of a pass (step p95 about 2 s).

`gc.freeze()` moves every object that exists into a generation the collector never walks. Right after a full pass
(`settle`, a `gc.callbacks` hook), what exists is what survived it: live objects, the cyclic garbage just found
gone. Freezing them then costs no pass of its own, and the next full pass walks only what came after: beside the
flooders, passes fell from about 1.1 s to about 0.7 s when the heap was frozen once after a pass, and the honest
visitor's step p95 from about 2 s to under 1 s when it is frozen after every full pass (docs/operating-a-space.md,
the teacher's page). Reference counting frees what it always freed (the collector only finds cycles); but a frozen
object that later becomes part of cyclic garbage (a kept step dropped from its store, a closed session's state) is
found only by a pass that walks it. So every SWEEP_S seconds
the hook unfreezes instead of freezing: the next full pass walks the whole heap once (about a second, once every
few minutes), collects that garbage, and freezes again. Memory held that way is the cyclic garbage of at most
SWEEP_S seconds.

It acts only while no decode holds the library's own freeze (s2d2/decoding/heap_freeze.py: a batch decode freezes
the heap while it runs and unfreezes all of it when the last one ends, which is a sweep too). Installed once by
the server's launch (app.py `serve`), never by importing the app (tests import it and check the library's freeze
counts).
"""
from __future__ import annotations

import gc
import time
from typing import Any, Callable

from s2d2.decoding.heap_freeze import holders

SWEEP_S = 300.0  # how often the frozen heap is walked once for the cyclic garbage it came to hold


class Settler:
    """The hook's state: when the frozen heap was last swept. `clock` is injectable (tests move it)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.swept = clock()

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        """A `gc.callbacks` hook: at the end of a full pass, freeze what survived, or every SWEEP_S unfreeze it
        so the next full pass walks it; nothing while a decode holds the library's freeze."""
        if phase != "stop" or info.get("generation") != 2 or holders() != 0:
            return
        now = self.clock()
        if now - self.swept >= SWEEP_S:
            gc.unfreeze()
            self.swept = now
        else:
            gc.freeze()


settle = Settler()


def install() -> None:
    """Hook `settle` into the collector (idempotent)."""
    if settle not in gc.callbacks:
        gc.callbacks.append(settle)
