"""Per-client bounds the front door (components/serve/front_door.py) applies before Gradio sees a request. Pure policy
objects, keyed by components/serve/identity.py's client key; every map is bounded (the quietest clients are forgotten).

- `Rate`: a token bucket per client: over the page routes (the page, /config, the API's description:
  S2D2_CLIENT_RATE per second, bursts of `page_burst`), and over the sessions a client opens
  (S2D2_CLIENT_NEW_SESSIONS per second, bursts of S2D2_CLIENT_NEW_SESSIONS_BURST): each new session costs Gradio a
  copy of the page's config (tens of ms of CPU), whatever route made it. Event requests are rated per page within
  the client (components/serve/fair_rate.py), so the page routes have a bucket of their own: a flooder's events
  never keep a classmate from opening the page.
- `queue_events`: the events in Gradio's queue, waiting or running. The front door caps a session's pending events
  (S2D2_CLIENT_QUEUED) and a client's (`unit_queued`: that many per counted session of the client, bounded by
  S2D2_UNIT_QUEUED): those waiting or running, and those finished whose result its sessions have not read yet
  (Gradio keeps them until they are read), so a client that never reads cannot pile up results quickly either.
  Unread results count for S2D2_UNREAD_DECAY_S seconds after their session last joined the queue: the penalty
  decays on that clock, so visitors behind one NAT with a careless neighbour are let in again within a minute, and
  results left by a page that closed (its heartbeat ended) do not count at all.
- `Sessions`: who minted which session hash, and which session gives way to a new one. A client may hold
  S2D2_CLIENT_SESSIONS sessions (beyond that its own sessions give way first); the app holds S2D2_MAX_SESSIONS.
  A newcomer always gets in while any session can give way: the least recently used idle one (never one with a
  decode queued or running, nor an event in flight), its visitor told with their next event. Every way a session
  comes to exist (an event, a heartbeat, whose close runs the unload event) passes this.
- `Listeners`: open event streams and heartbeats per session, for the decode watchdog (guard.Jobs.silence) and
  for the idle test above, capped per client and, once a client holds its cap, per page within it
  (components/serve/fair_places.py).
- `trim_sessions`: Gradio keeps, per session, a copy of every component's config with the last value sent (about
  0.4 MB at the start, plus the last views: 1-2 MB for the heaviest trace), read only by deep links, which this
  app does not offer; trimming it to the components an event touched since keeps a session's own memory to its
  last views.
"""
from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import Any, Callable, Optional

from components.serve.fair_places import may_take
from components.serve.settings import env_number

MAX_CLIENTS = 10_000  # clients remembered by each map


def client_rate() -> float:
    return env_number("S2D2_CLIENT_RATE", 20, 0.1, 10_000)


def client_queued() -> int:
    return int(env_number("S2D2_CLIENT_QUEUED", 6, 1, 10_000))


def unit_queued_cap() -> int:
    """S2D2_UNIT_QUEUED: events one unit (address or account) may have pending, however many pages it has open,
    default 48."""
    return int(env_number("S2D2_UNIT_QUEUED", 48, 1, 10_000))


def unit_queued(members: int) -> int:
    """Events a unit with `members` counted sessions (components/serve/roster.py) may have pending: S2D2_CLIENT_QUEUED
    for each (at least one), never more than S2D2_UNIT_QUEUED. A class of 12 behind one address may queue 12 Runs
    and their views; a lone visitor keeps the single-visitor cap."""
    return min(client_queued() * max(1, members), max(client_queued(), unit_queued_cap()))


def unit_streams(members: int) -> int:
    """Event streams and heartbeats a unit with `members` counted sessions may hold open: S2D2_CLIENT_STREAMS, and
    two more for each counted session beyond the first 16 (a page holds a heartbeat and, while an event is in
    flight, its stream): 64 by default, 128 for a class of 48 pages. Bounded, as the members are."""
    return client_streams() + 2 * max(0, members - 16)


def unit_rate_scale(members: int) -> float:
    """How many times S2D2_CLIENT_RATE (and its burst) a unit with `members` counted sessions gets: one for a lone
    visitor, one more for every four open pages (a student's page sends a request or two a second at most)."""
    return 1.0 + max(0, members - 1) / 4.0


def page_burst() -> float:
    """Page-route requests (the page, /config, /info) one client may send at once: three for each of the
    S2D2_CLIENT_NEW_SESSIONS_BURST page loads a class may make at once, at least the event burst (3x the rate)."""
    return max(3 * client_rate(), 3 * new_session_burst())


def client_sessions() -> int:
    return int(env_number("S2D2_CLIENT_SESSIONS", 32, 1, 100_000))


def client_session_cap(pages: int) -> int:
    """Sessions one client may hold: S2D2_CLIENT_SESSIONS, or its open pages and 8 more when that is larger (a
    class of 40 behind one address keeps every student's page; bounded, as open pages are per unit)."""
    return max(client_sessions(), pages + 8) if pages > 0 else client_sessions()


def client_streams() -> int:
    return int(env_number("S2D2_CLIENT_STREAMS", 64, 2, 100_000))


def session_idle_s() -> float:
    return env_number("S2D2_SESSION_IDLE_S", 600, 1, 86_400)


def unread_decay_s() -> float:
    """S2D2_UNREAD_DECAY_S: seconds results a client never read count against its queue cap, default 60."""
    return env_number("S2D2_UNREAD_DECAY_S", 60, 1, 86_400)


class Rate:
    """Token buckets: `rate()` tokens per second, up to `burst` (default 3x the rate), one per request; `clock` is
    injectable (tests move it instead of sleeping)."""

    def __init__(self, rate: Callable[[], float] = client_rate, burst: Optional[Callable[[], float]] = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._rate, self._burst, self.clock = rate, burst, clock
        self._buckets: "OrderedDict[str, tuple[float, float]]" = OrderedDict()
        self._lock = threading.Lock()

    def allow(self, client: str, now: Optional[float] = None, scale: float = 1.0) -> bool:
        """Take one token of `client`'s bucket; with `scale`, the bucket's rate and size are that many times the
        setting (a unit with many open pages, `unit_rate_scale`)."""
        now = self.clock() if now is None else now
        rate = self._rate() * scale
        top = (self._burst() if self._burst is not None else 3 * self._rate()) * scale
        with self._lock:
            tokens, last = self._buckets.pop(client, (top, now))
            tokens = min(top, tokens + (now - last) * rate)
            ok = tokens >= 1.0
            self._buckets[client] = (tokens - 1.0 if ok else tokens, now)
            while len(self._buckets) > MAX_CLIENTS:
                self._buckets.popitem(last=False)
            return ok


def new_session_rate() -> float:
    """S2D2_CLIENT_NEW_SESSIONS: new sessions (page loads) one client may open per second, default 2."""
    return env_number("S2D2_CLIENT_NEW_SESSIONS", 2, 0.01, 10_000)


def new_session_burst() -> float:
    """S2D2_CLIENT_NEW_SESSIONS_BURST: new sessions one client may open at once, default 40 (a class)."""
    return env_number("S2D2_CLIENT_NEW_SESSIONS_BURST", 40, 1, 100_000)


def queue_events(queue: Any, running: bool = True) -> list[Any]:
    """Every event in a Gradio queue: waiting (per concurrency id) and, with `running`, running."""
    waiting = [e for q in getattr(queue, "event_queue_per_concurrency_id", {}).values() for e in list(q.queue)]
    if not running:
        return waiting
    return waiting + [e for job in list(getattr(queue, "active_jobs", ()) or ()) if job for e in job]


class Listeners:
    """Open event streams and heartbeats per session, and when a session's last stream closed."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock  # injectable: tests move it instead of sleeping
        self._lock = threading.Lock()
        self._streams: dict[str, int] = {}
        self._beats: dict[str, int] = {}
        self._closed: "OrderedDict[str, float]" = OrderedDict()
        self._joined: "OrderedDict[str, float]" = OrderedDict()  # sessions that joined the queue over HTTP
        self._left: "OrderedDict[str, None]" = OrderedDict()  # sessions whose page closed (last heartbeat ended)
        self._held: dict[str, dict[str, int]] = {}  # client -> member -> open streams and heartbeats

    def joined(self, session: str, now: Optional[float] = None) -> None:
        with self._lock:
            self._joined.pop(session, None)
            self._joined[session] = self.clock() if now is None else now
            while len(self._joined) > 50_000:
                self._joined.popitem(last=False)

    def open(self, session: str, client: str, heartbeat: bool = False, cap: Optional[int] = None,
             member: str = "") -> bool:
        """Register an open stream of `member` (components/serve/roster.py) of `client`; False (not registered) when
        the client holds `cap` (default S2D2_CLIENT_STREAMS; the front door passes `unit_streams`) and `member` holds
        its part of them already (components/serve/fair_places.py). Close it with the same `member`."""
        with self._lock:
            held = self._held.setdefault(client, {})
            if not may_take(held, member, client_streams() if cap is None else cap):
                if not held:
                    self._held.pop(client, None)
                return False
            held[member] = held.get(member, 0) + 1
            table = self._beats if heartbeat else self._streams
            table[session] = table.get(session, 0) + 1
            if heartbeat:
                self._left.pop(session, None)
            return True

    def close(self, session: str, client: str, heartbeat: bool = False, now: Optional[float] = None,
              member: str = "") -> None:
        with self._lock:
            held = self._held.get(client, {})
            left = held.get(member, 1) - 1
            if left > 0:
                held[member] = left
            else:
                held.pop(member, None)
                if not held:
                    self._held.pop(client, None)
            table = self._beats if heartbeat else self._streams
            n = table.get(session, 1) - 1
            if n > 0:
                table[session] = n
            else:
                table.pop(session, None)
                if heartbeat:  # the page left: Gradio closes its events, whose results nobody will read
                    self._left[session] = None
                    while len(self._left) > 50_000:
                        self._left.popitem(last=False)
                else:
                    self._closed.pop(session, None)
                    self._closed[session] = self.clock() if now is None else now
                    while len(self._closed) > 50_000:
                        self._closed.popitem(last=False)

    def active(self, session: str) -> bool:
        return session in self._streams or session in self._beats

    def streaming(self, session: str) -> bool:
        """An event stream is open: an event of the session is in flight."""
        return session in self._streams

    def beating(self, session: str) -> bool:
        """A heartbeat is open: the session's page is open in a tab."""
        return session in self._beats

    def recent(self, sessions: list[str], within: float) -> list[str]:
        """The sessions among `sessions` that joined the queue in the last `within` seconds (by `clock`) and whose
        page has not closed (a closed tab's unfinished results are never read: they must not lock out the next
        page its visitor, or a classmate behind the same NAT, opens)."""
        now = self.clock()
        with self._lock:
            return [s for s in sessions
                    if s not in self._left and now - self._joined.get(s, -float("inf")) < within]

    def silence(self, session: str, now: float) -> Optional[float]:
        """Seconds since the session last had an open event stream (0 while one is open; infinity when it never
        had one); None for a session that never joined over HTTP (a handler called directly)."""
        if session not in self._joined:
            return None
        if session in self._streams:
            return 0.0
        closed = self._closed.get(session)
        return float("inf") if closed is None else now - closed


TRIM_ABOVE = 48  # configs a session may hold before it is trimmed (the app's events touch fewer at a time)


def trim_sessions(holder: Any) -> int:
    """Clear the per-session config copies Gradio keeps for deep links (see the module docstring); returns how
    many sessions were trimmed."""
    trimmed = 0
    for state in list(getattr(holder, "session_data", {}).values()):
        values = getattr(state, "config_values", None)
        if isinstance(values, dict) and len(values) > TRIM_ABOVE:
            values.clear()
            trimmed += 1
    return trimmed


FULL = "◷ The server is at its visitor capacity and every session is in use: try again in a few minutes."
EVICTED = ("ℹ This page was idle and the server needed room for a new visitor, so its session was cleared: the "
           "views now start from the opening example. Upload your trace (or run it) again to go on.")


class Sessions:
    """Which client minted each session hash, and the session-count policy (see the module docstring).

    A new session always gets in while some session can give way. The one that gives way is, in this order: a
    session idle for S2D2_SESSION_IDLE_S with no open tab (no heartbeat), then any session with no open tab, then
    one whose tab is open but idle; least recently used first within each. Never one with a decode queued or
    running (`busy`) or an event stream open (an event in flight). A session cleared while its tab was open is
    remembered, and its visitor gets the EVICTED note with their next event (`evicted_note`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owner: "OrderedDict[str, str]" = OrderedDict()  # session -> client, least recently seen first
        self._evicted: "OrderedDict[str, None]" = OrderedDict()  # cleared while their tab was open

    def admit(self, session: str, client: str, holder: Any, capacity: int, listeners: Listeners,
              busy: Callable[[str], bool] = lambda s: False, pages: int = 0) -> Optional[str]:
        """Called before Gradio creates state for a session hash it does not hold yet: makes room in `holder`
        (Gradio's StateHolder) for it, or returns the message refusing it (only when every session is busy).
        `pages`: the client's open pages (components/serve/roster.py): they raise its own cap
        (`client_session_cap`)."""
        with self._lock:
            data = holder.session_data
            if session not in data:
                mine = [s for s, who in self._owner.items() if who == client and s in data]
                if len(mine) >= client_session_cap(pages):  # the client's own sessions give way first
                    self._evict(holder, self._victim(holder, listeners, busy, set(mine)), listeners)
                if len(data) >= capacity:
                    victim = self._victim(holder, listeners, busy, None)
                    if victim is None:
                        return FULL
                    self._evict(holder, victim, listeners)
            owner = self._owner.get(session)
            if owner is None or owner == client:  # a session keeps the client that minted it
                self._owner.pop(session, None)
                self._owner[session] = client
            if len(self._owner) > 2 * capacity + 1000:  # forget sessions Gradio no longer holds
                self._owner = OrderedDict((s, c) for s, c in self._owner.items() if s in data or s == session)
            return None

    def owner(self, session: str) -> Optional[str]:
        return self._owner.get(session)

    def of(self, client: str) -> list[str]:
        """The sessions `client` minted that are still known."""
        with self._lock:
            return [s for s, who in self._owner.items() if who == client]

    def evicted_note(self, session: str) -> Optional[str]:
        """The EVICTED note, once, for a session cleared while its tab was open; None otherwise."""
        with self._lock:
            return EVICTED if self._evicted.pop(session, 0) is None else None

    def _victim(self, holder: Any, listeners: Listeners, busy: Callable[[str], bool],
                among: Optional[set]) -> Optional[str]:
        import datetime

        idle = datetime.timedelta(seconds=session_idle_s())
        wall = datetime.datetime.now()
        used = getattr(holder, "time_last_used", {})
        best, best_tier = None, 3
        for session in list(holder.session_data):  # Gradio keeps it least recently used first
            if (among is not None and session not in among) or busy(session) or listeners.streaming(session):
                continue
            last = used.get(session)
            tier = 2 if listeners.beating(session) else 0 if last is None or wall - last >= idle else 1
            if tier < best_tier:
                best, best_tier = session, tier
                if tier == 0:
                    break
        return best

    def _evict(self, holder: Any, session: Optional[str], listeners: Listeners) -> None:
        if session is None:
            return
        with holder.lock:
            holder.session_data.pop(session, None)
            holder.time_last_used.pop(session, None)
        if listeners.beating(session):
            self._evicted[session] = None
            while len(self._evicted) > 50_000:
                self._evicted.popitem(last=False)
        self._owner.pop(session, None)
