"""Fair shares of the server's Python time, so no visitor (and no number of addresses) takes the interpreter.

The app's event handlers (replay steps, views, uploads, the tour) run in one Python process, and one interpreter
runs Python on one core at a time. The per-request bounds (components/serve/client_limits.py) cap how many events
a visitor sends, not what each costs: a step of the heaviest trace an upload may hold costs about 80 ms.

So the event guard (components/serve/event_guard.py) measures the CPU time each handler's own thread spent
(`time.thread_time`: waiting for the interpreter or the machine is not charged) and charges it to the session's
member of its unit (components/serve/roster.py: a unit is an address or an account; a member is a counted
session, or the unit's REST). What each member used is remembered with exponential decay over
S2D2_CPU_WINDOW_S seconds (its recent use, in CPU seconds).

Work-conserving and hierarchical: the server gives out at most S2D2_CPU_SHARE CPU seconds per second, all units
together (its bound: the share times the window, in recent use). Below that bound nobody is refused, however much
they use: the capacity is idle, and it goes to whoever asks. Only while the server's total recent use is at its
bound AND others have events waiting or running is it divided: equally between the units that ask now, then
equally between a unit's asking members; a member whose recent use is over its part times the window is refused a
new event, with one line saying when to try again. A member under its part is never refused. So a class alone
gets everything; beside one stranger, at least half, split between its students; a flooder behind the class's
address gets one student's part once the server is busy; and however many addresses flood, the total stays at
the bound (each overshoots by at most the one event that took it over).

Why the total decides, not only the member's part: with thirty students asking at once, a part is a thirtieth of
the share, and a student whose one step cost a cold drawing went over it and was refused while the server's core
sat mostly idle (issue 35 figure (b): 1 refusal in 450 steps; a flaky test with six students).
"""
from __future__ import annotations

import math
import threading
import time
from collections import Counter, OrderedDict
from typing import Callable, Iterable, Optional

from components.serve.fair_order import Ask
from components.serve.settings import env_int, env_number

OVER_SHARE = ("You have used your share of the server's time for now, and other visitors are waiting: try again "
              "in about {seconds} s.")
MAX_MEMBERS = 20_000  # members remembered (the quietest are forgotten: their use had decayed)
FORGOTTEN_S = 1e-3  # recent use below this counts as idle


def cpu_share() -> float:
    """S2D2_CPU_SHARE: handler CPU seconds per second the server gives out while visitors wait, all units
    together, default 0.75 (three quarters of the one interpreter)."""
    return env_number("S2D2_CPU_SHARE", 0.75, 0.01, 64)


def handler_slots() -> int:
    """S2D2_HANDLER_CONCURRENCY: events of one kind (a replay step, an upload, ...) whose handlers run at once,
    default 4 (Gradio's default_concurrency_limit; decodes have their own slots). Running handlers share the one
    interpreter, and Gradio's event loop holds it too: one line of 4 (or 2) for every kind together was measured
    slower for a class beside a flooder than 4 per kind on a loaded two-core machine (a handler waiting for the
    interpreter holds its place), so the places stay per kind (docs/operating-a-space.md, the teacher's page)."""
    return env_int("S2D2_HANDLER_CONCURRENCY", 4, 1, 64)


def cpu_window_s() -> float:
    """S2D2_CPU_WINDOW_S: seconds over which a member's CPU use is remembered (decay time), default 10."""
    return env_number("S2D2_CPU_WINDOW_S", 10, 0.5, 3600)


class CpuShare:
    """Recent CPU use per (unit, member), and the fair-part rule (see the module docstring). `clock` is injectable
    (tests move it instead of sleeping)."""

    def __init__(self, share: Callable[[], float] = cpu_share, window: Callable[[], float] = cpu_window_s,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._share, self._window, self.clock = share, window, clock
        self._used: "OrderedDict[Ask, tuple[float, float]]" = OrderedDict()  # ask -> (use at `last`, last)
        # unit -> (use at `last`, last): the sum of its members' decayed uses (decay is linear, so one total
        # decays as the sum does), idle members included
        self._units: "OrderedDict[str, tuple[float, float]]" = OrderedDict()
        self._total = (0.0, clock())  # every member's use together, decayed as theirs: (use at `last`, last)
        self._lock = threading.Lock()

    def charge(self, ask: Ask, seconds: float, now: Optional[float] = None) -> None:
        """Add `seconds` of CPU to `ask`'s recent use."""
        with self._lock:
            now = self.clock() if now is None else now
            self._used[ask] = (self._decayed(ask, now) + max(0.0, seconds), now)
            self._used.move_to_end(ask)
            self._units[ask[0]] = (self._decayed_in(self._units, ask[0], now) + max(0.0, seconds), now)
            self._units.move_to_end(ask[0])
            self._total = (self._decayed_total(now) + max(0.0, seconds), now)
            while len(self._used) > MAX_MEMBERS:
                self._used.popitem(last=False)
            while len(self._units) > MAX_MEMBERS:
                self._units.popitem(last=False)

    def used(self, ask: Ask, now: Optional[float] = None) -> float:
        """`ask`'s recent use (CPU seconds, decayed)."""
        with self._lock:
            return self._decayed(ask, self.clock() if now is None else now)

    def total(self, now: Optional[float] = None) -> float:
        """The server's total recent use (CPU seconds, decayed), every unit together, forgotten ones included."""
        with self._lock:
            return self._decayed_total(self.clock() if now is None else now)

    def busy(self, now: Optional[float] = None) -> bool:
        """Whether the server's total recent use is at its bound (the share times the window): only then is
        anyone refused (see the module docstring)."""
        return self.total(now) >= self._share() * self._window()

    def recent(self, asks: Iterable[Ask]) -> tuple[dict[Ask, float], dict[str, float]]:
        """The recent use of each of `asks` and of each of their units (all its members), read at one moment."""
        with self._lock:
            now = self.clock()
            members = {ask: self._decayed(ask, now) for ask in set(asks)}
            units = {unit: self._decayed_in(self._units, unit, now) for unit, _ in members}
        return members, units

    def over_part(self, asks: Iterable[Ask]) -> tuple[dict[Ask, float], dict[str, float]]:
        """Which of `asks` (the members with events in one waiting line, running or waiting) are over their fair part
        among them (1.0) or within it (0.0), and which of their units: what the line's fair order breaks ties on
        (components/serve/fair_queue.py). Over or within, not the use itself: ordering by the raw use let students
        whose steps cost nothing (a cached drawing) go ahead again and again of a classmate whose one step cost
        50 ms, who then waited the whole window; within their parts, pages keep arrival order."""
        active = set(asks)
        members, units = self.recent(active)
        window, share = self._window(), self._share()
        mates = Counter(unit for unit, _ in active)  # as `part` divides, counted once: this runs on Gradio's loop
        over = {ask: float(use > share / len(mates) / mates[ask[0]] * window) for ask, use in members.items()}
        return over, {unit: float(use > share / max(1, len(mates)) * window) for unit, use in units.items()}

    def part(self, ask: Ask, contenders: Iterable[Ask]) -> float:
        """`ask`'s fair part (CPU seconds per second) among the members asking now: `contenders` (their events wait
        or run) and `ask` itself. A unit that asked a minute ago and is idle now does not shrink anyone's part (its
        decayed use lingers for minutes; counting it would hold a class to a share split with nobody)."""
        active = set(contenders) | {ask}
        units = {unit for unit, _ in active}
        mates = {member for unit, member in active if unit == ask[0]}
        return self._share() / len(units) / len(mates)

    def refusal(self, ask: Ask, contenders: Callable[[], list]) -> Optional[str]:
        """The line that refuses `ask` a new event, or None: refused only while the server's total recent use is
        at its bound (`busy`), another member has an event waiting or running (`contenders()`, read only then: it
        scans the queue) and `ask`'s recent use is over its fair part times the window."""
        now = self.clock()
        use, window = self.used(ask, now), self._window()
        if use <= FORGOTTEN_S or not self.busy(now):
            return None
        others = [a for a in contenders() if a != ask]
        if not others:
            return None
        allowance = self.part(ask, others) * window
        if use <= allowance:
            return None
        wait = window * math.log(use / allowance)  # until the decayed use is back under the allowance
        return OVER_SHARE.format(seconds=max(1, math.ceil(wait)))

    def _decayed_total(self, now: float) -> float:
        use, last = self._total
        return use * math.exp(-max(0.0, now - last) / self._window())

    def _decayed(self, ask: Ask, now: float) -> float:
        return self._decayed_in(self._used, ask, now)

    def _decayed_in(self, table: "OrderedDict", key: object, now: float) -> float:
        use, last = table.get(key, (0.0, now))
        return use * math.exp(-max(0.0, now - last) / self._window())


CPU_SHARE = CpuShare()
