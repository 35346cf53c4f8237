"""Which waiting event gets the next free place: work-conserving, hierarchical fair order.

A free place always goes to someone who waits (idle capacity is never held back). Which one: the unit (an address
or an account, components/serve/identity.py) that holds the fewest places, counting those it already runs in
and those given out earlier in this order; within that unit, the member (a counted session, or the unit's REST,
components/serve/roster.py) that holds the fewest; ties go to whoever arrived first. So a class alone fills every
place in arrival order; a stranger beside a class of thirty gets the next free place and every second one after
(the class keeps at least half); a flooder behind the class's address is one member among the students, and the
forged hashes it sends are one more (REST), not a class of their own.

With `used` (a number per member, and per unit, lower first: the handlers' lines pass 1 for over its fair part of the
server's handler CPU and 0 for within it, components/serve/cpu_share.py `over_part`), ties on places held go to the
unit, then the member, with the lower number, before arrival order: a student within their part goes ahead of a
flooder's next event even when neither runs anything at this moment (with a few handlers running at once, places
held are nearly always equal; what each used recently tells them apart).

A page that has an event running in this line waits behind every waiting event of a page that has none, whatever
their units hold; among each of the two, the order above. So a student's step never waits behind a second event
of a page already served (beside a stranger on another address, places held by unit let the stranger's next step
go ahead of a student's first). Work-conserving: a busy page's event still takes any place nobody else waits for.
(Measured beside a flooder, docs/operating-a-space.md: the flooder's eight pages rarely run two steps at once, so
the rule changes little there; its pages get more than a student's part by holding places longer, not by number.)

Pure: `fair_order` reads only its arguments (tests check it without a queue, a clock or threads). It runs each time
Gradio's line is read or joined, on its event loop, so it takes O(n log n) for n waiting events.
"""
from __future__ import annotations

import heapq
from collections import Counter, defaultdict, deque
from typing import Mapping, Optional, Sequence

Ask = tuple[str, str]  # (unit, member) of one waiting event


def fair_order(waiting: Sequence[Ask], held: Mapping[Ask, int], used: Optional[Mapping[Ask, float]] = None,
               unit_used: Optional[Mapping[str, float]] = None) -> list[int]:
    """The indices of `waiting` (in arrival order) in the order they should get places, given the places each
    (unit, member) `held` already and, optionally, each member's recent use (`used`) and each unit's
    (`unit_used`: all its members', idle ones included; by default the sum of `used`), missing ones 0. Every
    index appears once: the order only decides who goes first. The waiting events of members with an event
    running (held) come after those of members with none; each of the two in hierarchical fair order."""
    used = used or {}
    units: Counter = Counter()
    members: Counter = Counter()
    for (unit, member), n in held.items():
        units[unit] += n
        members[(unit, member)] += n
    unit_use: Counter = Counter()
    if unit_used is None:
        for (unit, _), seconds in used.items():
            unit_use[unit] += seconds
    else:
        unit_use.update(unit_used)
    running = {ask for ask, n in held.items() if n > 0}
    idle = [i for i, ask in enumerate(waiting) if ask not in running]
    busy = [i for i, ask in enumerate(waiting) if ask in running]
    tally = (units, members, used, unit_use)
    return _hierarchical(waiting, idle, *tally) + _hierarchical(waiting, busy, *tally)


def _hierarchical(waiting: Sequence[Ask], indices: list[int], units: Counter, members: Counter,
                  used: Mapping[Ask, float], unit_use: Mapping[str, float]) -> list[int]:
    """`indices` (ascending) of `waiting` in fair order: the unit, then the member, holding the fewest places (the
    counters, updated as places are given out), then the lower recent use, then arrival."""
    queued: dict[Ask, deque] = defaultdict(deque)  # each member's waiting indices, in arrival order
    for i in indices:
        queued[waiting[i]].append(i)
    by_unit: dict[str, list] = defaultdict(list)  # unit -> heap of (places, use, first index, member)
    for ask, mine in queued.items():
        by_unit[ask[0]].append((members[ask], used.get(ask, 0.0), mine[0], ask[1]))
    lines = []  # heap of (places, use, first index, unit)
    for unit, heap in by_unit.items():
        heapq.heapify(heap)
        lines.append((units[unit], unit_use.get(unit, 0.0), min(entry[2] for entry in heap), unit))
    heapq.heapify(lines)
    order: list[int] = []
    while lines:
        _, _, _, unit = heapq.heappop(lines)
        heap = by_unit[unit]
        _, _, _, member = heapq.heappop(heap)
        ask = (unit, member)
        order.append(queued[ask].popleft())
        units[unit] += 1
        members[ask] += 1
        if queued[ask]:
            heapq.heappush(heap, (members[ask], used.get(ask, 0.0), queued[ask][0], member))
        if heap:
            heapq.heappush(lines, (units[unit], unit_use.get(unit, 0.0), min(entry[2] for entry in heap), unit))
    return order
