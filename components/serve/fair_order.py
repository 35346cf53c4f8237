"""Which waiting decode gets the next free place: work-conserving, hierarchical fair order.

A free place always goes to someone who waits (idle capacity is never held back). Which one: the unit (an address
or an account, components/serve/identity.py) that holds the fewest places, counting those it already decodes in
and those given out earlier in this order; within that unit, the member (a counted session, or the unit's REST,
components/serve/roster.py) that holds the fewest; ties go to whoever arrived first. So a class alone fills every
place in arrival order; a stranger beside a class of thirty gets the next free place and every second one after
(the class keeps at least half); a flooder behind the class's address is one member among the students, and the
forged hashes it sends are one more (REST), not a class of their own.

Pure: `fair_order` reads only its arguments (tests check it without a queue, a clock or threads).
"""
from __future__ import annotations

from collections import Counter
from typing import Mapping, Sequence

Ask = tuple[str, str]  # (unit, member) of one waiting decode


def fair_order(waiting: Sequence[Ask], held: Mapping[Ask, int]) -> list[int]:
    """The indices of `waiting` (in arrival order) in the order they should get places, given the places each
    (unit, member) `held` already. Every index appears once: the order only decides who goes first."""
    units: Counter = Counter()
    members: Counter = Counter()
    for (unit, member), n in held.items():
        units[unit] += n
        members[(unit, member)] += n
    left = list(range(len(waiting)))
    order: list[int] = []
    while left:
        # the unit holding the fewest places; among equals the one whose first waiting decode arrived first
        unit = min(left, key=lambda i: (units[waiting[i][0]], i))
        unit_name = waiting[unit][0]
        mine = [i for i in left if waiting[i][0] == unit_name]
        pick = min(mine, key=lambda i: (members[waiting[i]], i))
        order.append(pick)
        left.remove(pick)
        units[unit_name] += 1
        members[waiting[pick]] += 1
    return order

