"""Refusals that slow their sender down: a page that keeps sending events the door refuses gets each further
refusal a moment late, so its own connections, not the server's event loop, absorb its speed.

Measured beside a heavy-step flooder (benchmarks/loop_sampler.py): its four threads were refused about 200 times a
second, and answering those refusals was the largest single part of the event loop's busy time: every student's
step waits behind the loop. A client that waits for each answer before sending the next (a script, a browser)
sends only as fast as it is answered, so holding the answer `hold_s` cuts its requests to its connections /
`hold_s`, for the cost of a timer each.

Only persistent refusal is held: a page (a (unit, member) of components/serve/roster.py) is held once its refusals,
counted with exponential decay over DECAY_S, exceed FREE; a student refused now and then is answered at once. It
is bounded so that it can never hold more than it saves: at most PER_UNIT refusals of one unit and TOTAL in all are
held at once; past either, the refusal is answered at once, as it would be without this. Nothing is admitted or
refused differently: only when the refusal is sent.

S2D2_REFUSAL_HOLD_MS (default 500, 0 turns it off, at most 5000) sets `hold_s`.
"""
from __future__ import annotations

import asyncio
import math
import threading
import time
from collections import Counter, OrderedDict
from typing import Callable

from components.serve.fair_order import Ask
from components.serve.settings import env_number

FREE = 8.0  # refusals (decayed) a page gets answered at once
DECAY_S = 5.0  # seconds over which a page's refusals are remembered (decay time)
PER_UNIT = 16  # refusals of one unit held at once
TOTAL = 256  # refusals held at once, every unit together
MAX_PAGES = 20_000  # pages remembered (the quietest forgotten first)


def refusal_hold_s() -> float:
    """S2D2_REFUSAL_HOLD_MS in seconds: how late a persistently refused page gets each further refusal."""
    return env_number("S2D2_REFUSAL_HOLD_MS", 500, 0, 5000) / 1e3


class RefusalHold:
    """Decayed refusal counts per page and the refusals held now (see the module docstring). `clock` and `sleep`
    are injectable: tests move the clock and record the sleeps instead of waiting."""

    def __init__(self, hold_s: Callable[[], float] = refusal_hold_s, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], object] = asyncio.sleep) -> None:
        self._hold_s, self._clock, self._sleep = hold_s, clock, sleep
        self._counts: "OrderedDict[Ask, tuple[float, float]]" = OrderedDict()  # page -> (count at `last`, last)
        self.held: Counter = Counter()  # unit -> its refusals held now
        self._total = 0  # refusals held now, every unit together
        self._lock = threading.Lock()

    def delay(self, ask: Ask) -> float:
        """Count a refusal of `ask`; the seconds to hold it (0: answer at once). Reserves a place when not 0: the
        caller must `release(ask)` after holding (`hold` does both)."""
        hold = self._hold_s()
        with self._lock:
            now = self._clock()
            count, last = self._counts.get(ask, (0.0, now))
            count = count * math.exp(-max(0.0, now - last) / DECAY_S) + 1.0
            self._counts[ask] = (count, now)
            self._counts.move_to_end(ask)
            while len(self._counts) > MAX_PAGES:
                self._counts.popitem(last=False)
            if hold <= 0 or count <= FREE or self.held[ask[0]] >= PER_UNIT or self._total >= TOTAL:
                return 0.0
            self.held[ask[0]] += 1
            self._total += 1
            return hold

    def release(self, ask: Ask) -> None:
        """A held refusal of `ask`'s unit was sent."""
        with self._lock:
            self._total -= 1
            self.held[ask[0]] -= 1
            if self.held[ask[0]] <= 0:
                del self.held[ask[0]]

    async def hold(self, ask: Ask) -> None:
        """Wait before a refusal of `ask` is sent, if it is one of a persistent run (see `delay`)."""
        seconds = self.delay(ask)
        if not seconds:
            return
        try:
            await self._sleep(seconds)
        finally:
            self.release(ask)


HOLD = RefusalHold()
