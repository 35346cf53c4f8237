"""The request rate of one unit (an address or an account), split between its pages while more than one is asking.

The front door (components/serve/front_door.py) limits how many event requests a unit sends: S2D2_CLIENT_RATE a
second with bursts of three times that, both scaled by the unit's open pages (client_limits.unit_rate_scale). As one
bucket per unit, that rule let one person behind a school's address spend the whole class's allowance: a flooder's
requests emptied the bucket and every classmate's step was refused with it.

So the allowance is hierarchical, as the CPU share is (components/serve/cpu_share.py), and work-conserving:

- each member of the unit (components/serve/roster.py: a page whose heartbeat is open, or REST, every other session
  of the unit together) has its recent use: the requests it was allowed, decaying with time constant burst / rate;
- a member nobody else in its unit is asking beside may use the unit's whole allowance: up to `burst` recent
  requests, refilled at `rate` a second once full, as the single bucket was;
- while other members of the unit are asking (their recent use is above ASKING), a member is allowed a request only
  while its recent use is under its part, burst / (members asking), never under one request: so a page past its part
  is refused, and the others are not.

Bounds: each member's recent use is at most its allowance, so the unit's total is at most one burst (and, for the
moment after a page that was alone is joined by others, at most two: the newcomers take their parts while the page
that was alone decays back to its own). Refused requests are not counted: refusing costs nothing later. Forged
session hashes never multiply a share: the caller passes roster members, and every hash that never opened a page is
REST; a page that closes is forgotten (`forget`). `clock` is injectable (tests move it instead of sleeping); every map is bounded.
"""
from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from typing import Callable, Optional

MAX_UNITS = 10_000  # units remembered (the quietest are forgotten: their use had decayed)
MAX_MEMBERS = 256  # members remembered per unit (the roster counts at most S2D2_UNIT_SESSIONS, plus REST)
ASKING = 0.05  # recent use (requests) above which a member counts as asking


class FairRate:
    """Recent requests per (unit, member) and the fair-part rule of the module docstring. `rate()` and `burst()` are
    the settings for a lone visitor (burst defaults to three times the rate)."""

    def __init__(self, rate: Callable[[], float], burst: Optional[Callable[[], float]] = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._rate, self._burst, self.clock = rate, burst, clock
        self._units: "OrderedDict[str, dict[str, tuple[float, float]]]" = OrderedDict()  # unit -> member -> (use, at)
        self._lock = threading.Lock()

    def allow(self, unit: str, member: str, scale: float = 1.0, now: Optional[float] = None) -> bool:
        """Count one request of `member` (of `unit`) if it is within its allowance; True if allowed. `scale`: how
        many times the settings the unit gets (more open pages, more requests)."""
        now = self.clock() if now is None else now
        rate = max(1e-9, self._rate() * scale)
        top = (self._burst() if self._burst is not None else 3 * self._rate()) * scale
        tau = top / rate  # a full allowance refills at `rate` a second
        with self._lock:
            members = self._units.pop(unit, {})
            self._units[unit] = members  # most recently active last
            uses = {m: decayed(use, now - at, tau) for m, (use, at) in members.items()}
            mine = uses.pop(member, 0.0)
            asking = sum(use > ASKING for use in uses.values())
            ok = mine + 1.0 <= allowance(top, asking)
            members[member] = (mine + 1.0 if ok else mine, now)
            if len(members) > MAX_MEMBERS:  # forget the quietest
                quiet = min((m for m in members if m != member), key=lambda m: uses.get(m, 0.0))
                del members[quiet]
            while len(self._units) > MAX_UNITS:
                self._units.popitem(last=False)
            return ok


    def forget(self, unit: str, member: str) -> None:
        """`member` left its unit (its page closed): it no longer asks, so it holds no part of the others' allowance.
        Its use is dropped rather than left to decay, else a page opened after a closed one got a half part for
        the next ~12 s (a student's tour clicks refused on a Space nobody else was using)."""
        with self._lock:
            members = self._units.get(unit)
            if members is not None:
                members.pop(member, None)


def allowance(top: float, others_asking: int) -> float:
    """The recent use a member may reach: the whole burst alone, its equal part beside `others_asking` members,
    never under one request (a page always gets its next request once its own use has decayed)."""
    return max(1.0, top / (1 + others_asking))


def decayed(use: float, elapsed: float, tau: float) -> float:
    """`use` after `elapsed` seconds of exponential decay with time constant `tau`."""
    return use * math.exp(-max(0.0, elapsed) / tau)
