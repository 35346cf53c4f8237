"""Who counts as a student: the sessions of each unit of fairness that divide that unit's share.

A unit is what components/serve/identity.py keys a request by: a signed-in account, else a network address (a
class behind one school NAT is one unit). While others wait, each fairness rule (components/serve/fair_order.py,
components/serve/cpu_share.py, components/serve/fair_rate.py, components/serve/fair_places.py) divides capacity
equally between units, then equally between the *members* of a unit. A member is a session that was admitted as a real page: its heartbeat is open (the front door, 
components/serve/front_door.py, reports heartbeats here). Every other session of the unit (an API call with a
fresh hash, a forged hash that never opened a heartbeat) is folded into one member, REST, so minting hashes never
multiplies a unit's share. A unit counts at most S2D2_UNIT_SESSIONS members (default 48: a class of 40 with room
to spare); sessions beyond that are folded into REST too, so even real pages cannot multiply a share without bound.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Optional

from components.serve.settings import env_int

REST = "~rest"  # the member standing for every session of a unit that does not count on its own
MAX_UNITS = 10_000  # units remembered (the quietest are forgotten first)


def unit_sessions() -> int:
    """S2D2_UNIT_SESSIONS: sessions of one unit (address or account) that count as its members, default 48."""
    return env_int("S2D2_UNIT_SESSIONS", 48, 1, 10_000)


class Roster:
    """The counted sessions of each unit, in the order their pages opened. Invariant: a unit never holds more than
    `unit_sessions()` members, and a session is a member of one unit only (the first that admitted it)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._units: "OrderedDict[str, OrderedDict[str, int]]" = OrderedDict()  # unit -> session -> open beats
        self._unit_of: dict[str, str] = {}

    def arrive(self, unit: str, session: str) -> bool:
        """A heartbeat of `session` opened: count it as a member of `unit` if there is room; True if it counts."""
        with self._lock:
            owner = self._unit_of.get(session)
            if owner is not None:
                if owner == unit:
                    self._units[unit][session] += 1
                return owner == unit
            members = self._units.pop(unit, OrderedDict())
            self._units[unit] = members  # most recently active last
            if len(members) >= unit_sessions():
                return False
            members[session] = 1
            self._unit_of[session] = unit
            while len(self._units) > MAX_UNITS:
                _, gone = self._units.popitem(last=False)
                for s in gone:
                    self._unit_of.pop(s, None)
            return True

    def leave(self, unit: str, session: str) -> None:
        """A heartbeat of `session` closed: the session stops counting when its last one has."""
        with self._lock:
            members = self._units.get(unit)
            if members is None or session not in members:
                return
            members[session] -= 1
            if members[session] <= 0:
                del members[session]
                self._unit_of.pop(session, None)
                if not members:
                    del self._units[unit]

    def member(self, unit: str, session: Optional[str]) -> str:
        """The member `session` counts as within `unit`: itself if counted, else REST."""
        members = self._units.get(unit)
        return session if session and members is not None and session in members else REST

    def count(self, unit: str) -> int:
        """How many sessions of `unit` count (0 for a unit with no open page)."""
        return len(self._units.get(unit, ()))


ROSTER = Roster()
