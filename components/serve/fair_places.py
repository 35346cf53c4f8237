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
