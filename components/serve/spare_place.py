"""The last free place of a handler line kept for a page within its fair part of the server's handler CPU.

Why: beside eight addresses flooding heavy replay steps (issue 35 figure (d)), the four places of the step line
were always held by the flooders' drawings (each about 0.1 CPU s, but about a second of wall while four of them
and the event loop share one interpreter), and an honest visitor's step, answered from its kept steps in a
millisecond on the event loop (components/replay/wire_steps.py), first waited in Gradio's line for one of them to
end: p50 0.4 s, p95 1.8 s of its step. The line's fair order (components/serve/fair_queue.py) already gives the
next free place to the honest page; it still had to wait for one to come free.

The rule: in a handler line of N >= 2 places (never the decodes'), the last free place goes only to a head whose
page is within its fair part and whose unit is within the unit's (components/serve/cpu_share.py `over_part`, among
the pages waiting or running); a head over either waits, holding nothing, until another place frees or its part
has room. So pages over their part hold at most N - 1 places, and a page within its part finds one at once. The
flooders lose nothing they could use: N - 1 CPU-bound handlers take the one interpreter as fully as N. Whether a
page is over is what the line's fair order last computed (`FairLine.over_part`, refreshed whenever an event joins
or Gradio reads the head); a head the order has no answer for takes the place (work-conserving).
Not only while the server is at its CPU bound (`busy`): beside eight flooders the total hovers at that bound (the
share refuses there), so a rule held only while busy held for about half the time and did not move figure (d)
(docs/operating-a-space.md, the teacher's page); judged per page only, it moved the honest step's wait in line
less (p50 0.22 s against 0.06 s), since a flooding address's eight pages each use about a page's part.

How: Gradio starts a line's head while `current_concurrency < concurrency_limit` (gradio/queueing.py
`get_events`, polled about every millisecond on its event loop), so the line's `concurrency_limit` reads one lower
while the rule holds the last place. The answer for a head is kept for RECHECK_S, so the poll costs a comparison.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Optional

from gradio.queueing import EventQueue

RECHECK_S = 0.05  # how long an answer for one head stands (the CPU share's over/within changes over seconds)


class SparingLine(EventQueue):
    """A Gradio line (EventQueue) whose last free place goes only to a head within its fair part (module
    docstring: always, not only while the server is busy); set up by `install`."""

    _limit: Optional[int]
    _holds_back: Callable[[Any], bool]  # head -> whether its page or unit is over its part
    _cached: tuple  # (head, answer, until)

    @property  # type: ignore[override]
    def concurrency_limit(self) -> Optional[int]:
        limit = self._limit
        if limit is None or limit < 2 or self.current_concurrency != limit - 1 or not self.queue:
            return limit
        head = list.__getitem__(self.queue, 0)  # as last ordered: reading [0] of a FairLine would order it again
        held, answer, until = self._cached
        now = time.monotonic()
        if head is not held or now >= until:
            answer = self._holds_back(head)
            self._cached = (head, answer, now + RECHECK_S)
        return limit - 1 if answer else limit

    @concurrency_limit.setter
    def concurrency_limit(self, value: Optional[int]) -> None:
        self._limit = value


def install(line: Any, holds_back: Callable[[Any], bool]) -> None:
    """Make Gradio's `line` a SparingLine deciding with `holds_back(head)`; idempotent; a stand-in that is not a
    Gradio EventQueue (a test's) is left as it is."""
    if not isinstance(line, EventQueue) or isinstance(line, SparingLine):
        return
    limit = line.__dict__.pop("concurrency_limit")
    line.__class__ = SparingLine
    line._limit, line._holds_back, line._cached = limit, holds_back, (None, False, 0.0)
