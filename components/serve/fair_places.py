"""Whether a member of a unit may take one more held place (a queue place, an open stream) when the unit is full.

A unit (an address or an account) may hold `cap` places of a kind: events pending in the queue, open event streams
and heartbeats (components/serve/client_limits.py sizes the caps by the unit's open pages). As one count per unit,
a flooder behind a school's address could fill the cap and every classmate was refused with it. The rule here is
work-conserving and hierarchical, like the CPU share and the request rate:

- while the unit holds fewer than `cap`, anyone of it may take a place (a page alone may use them all);
- once it holds `cap`, a member (components/serve/roster.py: a page, or REST for every other session) may still take
  one while it holds less than its part, cap / (members holding places, counting itself), at least one: the page
  that filled the unit is refused, the others are not;
- a unit never holds twice `cap`: that is the bound, whoever asks (the server's own bounds, the queue size and
  RESERVED places, stay in force too). A class's pages each hold one or two places, so the room between the cap
  and twice it is theirs even after a flooder filled the cap.

Pure: reads only its arguments.
"""
from __future__ import annotations

from typing import Mapping

Ask = tuple[str, str]  # (unit, member), as components/serve/fair_order.py names a place's holder


def may_take(held: Mapping[str, int], member: str, cap: int) -> bool:
    """May `member` take one more place, given the places each member of its unit `held` (see the module
    docstring)?"""
    total = sum(held.values())
    if total < cap:
        return True
    if total >= 2 * cap:
        return False
    holders = {m for m, n in held.items() if n > 0} | {member}
    return held.get(member, 0) < max(1, cap // len(holders))


def may_queue(held: Mapping[Ask, int], ask: Ask, line: int) -> bool:
    """May `ask` (a unit's member) put one more event in a server queue holding `held` events per (unit, member),
    once the queue is past half of `line`? Only while it holds less than its part: the line split equally
    between the units holding events (and `ask`'s), then equally between that unit's members holding events (and
    `ask`'s member), at least one place. So a stranger who filled the queue waits for its events to drain while a
    class's students still join, and a flooder behind the class's address is one student among them. The queue's
    own size (Gradio's max_size) stays the bound."""
    units = {unit for (unit, _), n in held.items() if n > 0} | {ask[0]}
    mates = {member for (unit, member), n in held.items() if n > 0 and unit == ask[0]} | {ask[1]}
    return held.get(ask, 0) + 1 <= max(1.0, line / len(units) / len(mates))  # parts add up to the line, not more
