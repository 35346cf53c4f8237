"""Gradio's waiting lines kept in fair order (components/serve/fair_order.py): the decode slots' and every other
event's (a replay step waits behind one flooder's step, not behind its whole backlog).

Gradio keeps each concurrency id's waiting events in a list and starts `queue[0]` whenever a place is free; it also
tells each waiting visitor its rank in that list (the "queue: k/n" the page shows). `FairLine` is that list with
one change: it is re-ordered fairly when an event joins and when Gradio reads its head (the moment a place came
free, so the places held are read then). Gradio calls both from its event loop only, so the re-order never races
its own edits. `install(queue, fn)` puts a FairLine in place for an event's concurrency id (idempotent); the front
door installs it for every queued event it admits.

Who holds places: the events of that concurrency id running now, by (unit, member) (components/serve/roster.py),
read from Gradio's running events; a page with an event running in the line waits behind every page with none
(components/serve/fair_order.py). In every line but the decodes', ties on places held go first to the units,
then the pages, within their fair part of the server's handler CPU (components/serve/cpu_share.py `over_part`),
then arrival: with a few handlers of a kind running at once, places held rarely tell a student from a flooder, and
the CPU each used recently does. Decode places stay by places held, then arrival (a decode is not charged CPU: its
turn does not depend on how much a page stepped). In those same lines the last free place is kept for a page within its
part, whether or not the server is at its CPU bound (components/serve/spare_place.py).
"""
from __future__ import annotations

from collections import Counter
from typing import Any, Callable, Iterable, Optional

from components.serve import spare_place
from components.serve.cpu_share import CPU_SHARE
from components.serve.fair_order import Ask, fair_order
from components.serve.gpu_slot import DECODE_SLOTS
from components.serve.roster import ROSTER

AskOf = Callable[[Any], Ask]
Recent = Callable[[list], tuple]  # asks -> (over their part or not, their units too): CpuShare.over_part


class FairLine(list):
    """A Gradio event list that keeps itself in fair order (see the module docstring)."""

    def __init__(self, events: Iterable[Any], ask_of: AskOf, running: Callable[[], list],
                 recent: Optional[Recent] = None) -> None:
        super().__init__(events)
        self._ask_of, self._running, self._recent = ask_of, running, recent
        # each page's and unit's over (1.0) or within (0.0) its part, as last ordered
        self.over: dict[Ask, float] = {}
        self.over_units: dict[str, float] = {}

    def over_part(self, event: Any) -> bool:
        """Whether `event`'s page or its unit was over its fair part when the line was last ordered (unknown: no)."""
        ask = self._ask_of(event)
        return self.over.get(ask, 0.0) > 0 or self.over_units.get(ask[0], 0.0) > 0

    def append(self, event: Any) -> None:
        super().append(event)
        self.reorder()

    def __getitem__(self, index: Any) -> Any:
        if index == 0:  # Gradio reads the head only when a place is free: order by the places held now
            self.reorder()
        return super().__getitem__(index)

    def reorder(self) -> None:
        if len(self) < 2:
            return
        events = list(self)
        asks = [self._ask_of(e) for e in events]
        held = Counter(self._ask_of(e) for e in self._running())
        used, unit_used = self._recent([*asks, *held]) if self._recent is not None else (None, None)
        self.over, self.over_units = used or {}, unit_used or {}
        order = fair_order(asks, held, used, unit_used)
        super().__setitem__(slice(None), [events[i] for i in order])


def install(queue: Any, fn: Any, client_of: Callable[[Any], str]) -> None:
    """Keep the waiting line of `fn`'s concurrency id in fair order (Gradio's queue `queue`); idempotent."""
    if not hasattr(queue, "create_event_queue_for_fn"):  # no queue, or one that keeps no lines (a test's stand-in)
        return
    queue.create_event_queue_for_fn(fn)
    line = queue.event_queue_per_concurrency_id[fn.concurrency_id]
    if isinstance(line.queue, FairLine):
        return

    def ask_of(event: Any) -> Ask:
        unit = client_of(event)
        return unit, ROSTER.member(unit, getattr(event, "session_hash", None))

    def running() -> list:
        return [e for job in list(queue.active_jobs or ()) if job for e in job
                if getattr(e, "concurrency_id", None) == fn.concurrency_id]

    recent = None if fn.concurrency_id in DECODE_SLOTS else CPU_SHARE.over_part  # decodes: places held, arrival
    line.queue = FairLine(line.queue, ask_of, running, recent)
    if recent is not None:  # the last free place kept for a page within its part (components/serve/spare_place.py)
        spare_place.install(line, lambda head: line.queue.over_part(head))
