"""The app's front door: an ASGI middleware in front of every Gradio route (app.py installs it with
`launch(app_kwargs={"middleware": [Middleware(FrontDoor)]})`), so each request meets it before Gradio does.

Every request's query is capped (MAX_QUERY_BYTES: 414), the page and /config are rate-limited and built once per
key (components/serve/page_cache.py: a class loading the page costs one build), and a page route that fails answers
one line. For every API request it
- reads every body as JSON, whatever its Content-Type says (FastAPI parses any spelling of a JSON type, or no
  header, as JSON, and some Gradio routes call request.json() on any body), so no spelling skips a rule below;
- rate-limits the client's events (components/serve/fair_rate.py: the client is components/serve/identity.py's key,
  its allowance scaled by its open pages, `unit_rate_scale`, and split between its pages while more than one asks,
  so one page behind a school's address cannot spend the class's allowance; the session hash is read from the body
  first, which is why a body is read before its request is rated); Stop, the one event run outside the queue
  (POST /run/predict), has an allowance of its own, so a client that has spent its allowance on other events can
  still stop its decode; the page routes (the page, /config, /info) have a bucket of their own, so events never
  spend what opening the page needs;
- caps the body (MAX_JSON_BYTES; an upload at the upload limit), refuses JSON nested deeper than 32 levels or a
  string over 8,192 characters (components/serve/door_checks.py: nothing sent is echoed back at length), and
  replaces lone surrogates (they would break Gradio's encoder);
- refuses a private event called by name (`/gradio_api/call/<name>`, or `/run/<name>` without an fn_index): the
  page calls events by index, only the public API by name;
- makes room for a new session hash, or refuses it, before Gradio creates its state (client_limits `Sessions`), for an
  event and for a heartbeat alike; refuses a heartbeat or /cancel naming another client's session, and frees a
  decode's registration when /cancel removed its queued event (gpu_slot.Jobs.withdraw);
- refuses a chained event (`.then`) joined by index except once per finished run of its parent in the same
  session (components/serve/chains.py);
- refuses an event by index sent with fewer values than it takes, and Gradio's /deep_link (which would write the
  session's every value to a file anyone can fetch by path);
- caps the events a session has pending (S2D2_CLIENT_QUEUED: waiting or running, counted in Gradio's own queue)
  and those of its unit (waiting, running, or finished but unread: S2D2_CLIENT_QUEUED per counted session of the
  unit, components/serve/roster.py, at most S2D2_UNIT_QUEUED; once the unit is full, a page under its part still
  gets a place, components/serve/fair_places.py); once the queue is half full (of its size less RESERVED places),
  lets in only a unit's page under its part of it (fair_places.may_queue: a stranger who filled the queue waits
  for its events to drain while a class still joins; a unit with nothing queued always joins); and keeps every
  waiting line (decode places, replay steps) in fair order (components/serve/fair_queue.py);
- counts a session whose heartbeat is open as one of its unit's members (components/serve/roster.py);
- checks an upload against the disk budget and the client's upload allowance (components/serve/disk_budget.py);
- counts open event streams and heartbeats per session, for the decode watchdog (gpu_slot.Jobs.silence) and the
  session policy, and caps them per client (per page within it once the client is full);
- answers a page's event requests refused with 429 again and again a moment late, so a flooder's own connections
  absorb its speed, not the event loop (components/serve/refusal_hold.py: bounded, only persistent refusals);
- answers a failed file request, or any request Gradio fails on, with one line and no server path.
Decode-specific rules (one per session and per client) are the decode's validator, gpu_slot.admit_decode.
"""
from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections import Counter
from types import SimpleNamespace
from typing import Any, Awaitable, Callable, Optional
from urllib.parse import parse_qs

from s2d2.limits import limits

from components.serve.page_cache import PageCache
from components.serve import gpu_slot
from components.serve.identity import request_key, scope_key
from components.serve.disk_budget import DISK
from components.serve.door_checks import (Refusal, checked, count_values, file_values, header, read_body,
                                          refuse_page_only, replay, with_length)
from components.serve.door_replies import (QUEUE_NEARLY_FULL, TOO_FAST, TOO_MANY_NEW, TOO_MANY_QUEUED, TOO_MANY_STREAMS,
                                          Send, quiet_errors, reply)
from components.serve.gradio_lookup import blocks_of, by_name, session_of_event
from components.serve import fair_queue
from components.serve.chains import CHAINS, UNCHAINED, door_parent
from components.serve.client_limits import (Listeners, Rate, Sessions, client_queued, client_rate, new_session_burst,
                                            new_session_rate, page_burst, queue_events, trim_sessions, unit_queued,
                                            unit_rate_scale, unit_streams, unread_decay_s)
from components.serve.fair_order import Ask
from components.serve.fair_places import may_queue, may_take
from components.serve.fair_rate import FairRate
from components.serve.refusal_hold import HOLD
from components.serve.cancel_free import after_cancel
from components.serve.roster import REST, ROSTER, unit_sessions

API = "/gradio_api"
MAX_JSON_BYTES = 256 * 1024
MAX_SESSION_CHARS = 128
RESERVED = 8  # queue places kept for clients with nothing queued
MAX_QUERY_BYTES = 16 * 1024  # a share link's query is under 1 kB (components/replay/share_links.py: 120 characters a value)
RATED_PAGES = {"/config", ""}  # page routes outside the API that build a config per request
RATED_API_PAGES = {"/info", "/openapi.json"}  # the API's description: what an API client reads to open the app
LOG = logging.getLogger("s2d2.app")

RATE, STOP_RATE = FairRate(client_rate), FairRate(client_rate)  # events, per page within the client
# Uploads name no session, so they cannot be split by page: a bucket of their own, the unit's whole rate (growing with
# its pages), so a class's page Runs handing off their traces are not held to one page's part of the events' rate.
UPLOAD_RATE = FairRate(client_rate)
PAGE_RATE = Rate(client_rate, page_burst)  # the page routes: their own bucket (see the module docstring)
SESSIONS, LISTENERS = Sessions(), Listeners()
PAGES = PageCache()  # the page and /config, built once per key
NEW_SESSIONS = Rate(new_session_rate, new_session_burst)  # a new session costs Gradio a copy of the page config
JOINING: Counter = Counter()  # (unit, member) -> events admitted that Gradio has not put in its queue yet

Receive = Callable[[], Awaitable[dict]]


def install() -> None:
    """Connect the decode watchdog to the stream counts: a decode whose session has no open event stream stops
    (gpu_slot.Jobs.cancelled). app.py calls this once, where it installs the front door."""
    gpu_slot.JOBS.silence = LISTENERS.silence


class FrontDoor:
    """ASGI middleware; see the module docstring."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http":
            return await self.app(scope, receive, send)
        started = False

        async def tracked(message: dict) -> None:
            nonlocal started
            started = started or message.get("type") == "http.response.start"
            await send(message)

        path = scope.get("path", "")
        try:
            if len(scope.get("query_string", b"")) > MAX_QUERY_BYTES:
                raise Refusal(414, f"This address is longer than {MAX_QUERY_BYTES // 1024} kB: a link of this app "
                                   "is much shorter.")
            if path.startswith(API):
                await self._route(scope, receive, tracked)
            elif path.rstrip("/") in RATED_PAGES:  # rated, and built once per key (components/serve/page_cache.py)
                client = scope_key(scope)
                if not PAGE_RATE.allow(client, scale=unit_rate_scale(ROSTER.count(client))):
                    raise Refusal(429, TOO_FAST)
                app_id = getattr(blocks_of(scope), "app_id", None)  # Gradio's random id of this app's Blocks
                await PAGES.serve(scope, receive, tracked, self.app, client, app_id, TOO_FAST)
            else:
                await self.app(scope, receive, tracked)
        except Refusal as refusal:
            if not started:
                await reply(send, refusal.status, refusal.message)
        except Exception as exc:  # one line, no traceback of a request's values, no server path
            LOG.warning("request %s failed: %s: %s", path[:120], type(exc).__name__, str(exc)[:200])
            if not started:
                await reply(send, 500, "The server could not handle this request.")

    async def _route(self, scope: dict, receive: Receive, send: Send) -> None:
        sub, method, client = scope["path"][len(API):], scope.get("method", "GET"), scope_key(scope)
        if method == "POST":
            if sub.rstrip("/") == "/upload":  # an upload names no session: the unit's own upload bucket
                if not UPLOAD_RATE.allow(client, REST, scale=unit_rate_scale(ROSTER.count(client))):
                    raise Refusal(429, TOO_FAST)
                return await self._upload(scope, receive, send, client)
            return await self._json(scope, receive, send, sub, client)
        if method == "GET":
            if sub.rstrip("/") == "/deep_link":  # Gradio would write the session's every value to a fetchable file
                raise Refusal(404, "This app has no deep links: the Share button makes a link to a moment.")
            if sub.rstrip("/") in RATED_API_PAGES and \
                    not PAGE_RATE.allow(client, scale=unit_rate_scale(ROSTER.count(client))):
                raise Refusal(429, TOO_FAST)
            if sub.rstrip("/") == "/queue/data":
                # the last value, as Starlette's query_params reads it (the stream counted is the one served)
                session = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("session_hash", [""])[-1]
                return await self._stream(scope, receive, send, session, client, heartbeat=False)
            if sub.startswith("/heartbeat/"):
                return await self._stream(scope, receive, send, sub.split("/")[2], client, heartbeat=True)
            if sub.startswith("/call/") and sub.count("/") >= 3:
                session = session_of_event(blocks_of(scope), sub.rstrip("/").rsplit("/", 1)[1])
                return await self._stream(scope, receive, send, session, client, heartbeat=False)
            if sub.startswith(("/file=", "/file/")):
                return await self.app(scope, receive, quiet_errors(send))
        return await self.app(scope, receive, send)

    async def _json(self, scope: dict, receive: Receive, send: Send, sub: str, client: str) -> None:
        stop = sub.rstrip("/") == "/run/predict"
        try:
            body = await read_body(scope, receive, MAX_JSON_BYTES)
        except Refusal:
            rated(client, None, stop)  # a refused body is rated too, as the unit's REST
            raise
        if not body:
            rated(client, None, stop)
            return await self.app(scope, replay(body, receive), send)
        # Every body is read as JSON, whatever its Content-Type says: FastAPI parses any spelling of a JSON type
        # (and a body without the header) as JSON, and some Gradio routes call request.json() on any body; the
        # app's API takes nothing else (uploads go to /upload).
        try:
            data = json.loads(body)
        except (RecursionError, ValueError) as exc:
            rated(client, None, stop)  # an unreadable body is rated too, as the unit's REST
            raise Refusal(400, "The request is nested too deeply to read." if isinstance(exc, RecursionError) else
                          "The request body is not valid JSON (this app's API takes JSON only).") from None
        session = data.get("session_hash") if isinstance(data, dict) else None
        try:
            cleaned, changed, ask = admitted(sub, data, client, session, blocks_of(scope), stop)
        except Refusal as refusal:
            if refusal.status == 429:  # a page refused again and again gets its answers late (refusal_hold.py)
                await HOLD.hold((client, ROSTER.member(client, session if isinstance(session, str) else None)))
            raise
        if changed:
            body = json.dumps(cleaned).encode()
            scope = with_length(scope, len(body))
        if ask is not None:
            JOINING[ask] += 1  # admitted, not yet in Gradio's queue: counted until Gradio answers
        try:
            await self.app(scope, replay(body, receive), send)
        finally:
            if ask is not None:
                JOINING[ask] -= 1
                if JOINING[ask] <= 0:
                    del JOINING[ask]
        if sub.rstrip("/") == "/cancel" and isinstance(cleaned, dict) and blocks_of(scope) is not None:
            after_cancel(cleaned, client, blocks_of(scope))

    async def _upload(self, scope: dict, receive: Receive, send: Send, client: str) -> None:
        length = header(scope, b"content-length")
        cap = limits().max_upload_bytes + 64 * 1024  # one file at the limit, with its multipart envelope
        if length is None or not length.isdigit():
            raise Refusal(411, "Send the upload with its length (Content-Length).")
        if int(length) > cap:
            raise Refusal(413, f"File too large: the limit is {limits().max_upload_mb:g} MB.")
        problem = await asyncio.to_thread(DISK.admit_upload, client, int(length))
        if problem:
            raise Refusal(429 if "per visitor" in problem else 507, problem)
        try:
            await self.app(scope, receive, send)
        except Exception:  # e.g. a file part without a name: Gradio fails on it
            raise Refusal(400, "The upload could not be read: send one file, with its name, as form data.") from None

    async def _stream(self, scope: dict, receive: Receive, send: Send, session: str, client: str,
                      heartbeat: bool) -> None:
        owner = SESSIONS.owner(session)
        if heartbeat and owner is not None and owner != client:
            # a heartbeat's close ends the session (Gradio closes its events, runs unload): its own client only
            raise Refusal(403, "This session belongs to another visitor.")
        if heartbeat:  # its close creates the session's state (the unload event); a result stream creates none
            admit_session(session, client, blocks_of(scope))
        member = stream_member(client, session, heartbeat)
        if not LISTENERS.open(session, client, heartbeat, cap=unit_streams(ROSTER.count(client)), member=member):
            raise Refusal(429, TOO_MANY_STREAMS)
        if heartbeat:  # an open page: the session counts as one of its unit's members (components/serve/roster.py)
            ROSTER.arrive(client, session)
        try:
            await self.app(scope, receive, send)
        finally:
            LISTENERS.close(session, client, heartbeat, member=member)
            if heartbeat:
                heartbeat_closed(client, session)


def admitted(sub: str, data: Any, client: str, session: Any, blocks: Any,
             stop: bool) -> tuple[Any, bool, Optional[Ask]]:
    """Raise Refusal unless an event request's parsed body `data` may pass: its rate, its values, its session's
    owner, its room in the queue. Returns the body as Gradio gets it, whether it changed, and the (unit, member)
    of an event that joins the queue (None for other requests)."""
    rated(client, session, stop)
    cleaned, changed = checked(data)
    if sub.startswith("/call/") and not sub.startswith("/call/v2/") and isinstance(cleaned, dict) \
            and not cleaned.get("session_hash"):
        # An API call without a session hash is given one, so it is fenced like any other (one decode per
        # session, the watchdog); GET /call/<name>/<event_id> still finds it (Gradio looks the event up).
        cleaned["session_hash"], changed = "call-" + uuid.uuid4().hex, True
    if sub.rstrip("/") == "/cancel" and isinstance(cleaned, dict) \
            and SESSIONS.owner(str(cleaned.get("session_hash"))) not in (None, client):
        raise Refusal(403, "This session belongs to another visitor.")
    ask = admit_request(sub, cleaned, client, blocks) if blocks is not None and isinstance(cleaned, dict) else None
    return cleaned, changed, ask


def heartbeat_closed(client: str, session: str) -> None:
    """A heartbeat of `session` closed: at its last one the page has left its unit, so it stops counting
    (components/serve/roster.py) and holds no part of the unit's request rate (FairRate.forget)."""
    ROSTER.leave(client, session)
    if ROSTER.member(client, session) == REST:
        RATE.forget(client, session)
        STOP_RATE.forget(client, session)


def admit_request(sub: str, data: dict, client: str, blocks: Any) -> Optional[Ask]:
    """Raise Refusal unless this event may enter: known and callable this way, room for its session, room in the
    queue for this client. Returns the (unit, member) of an event that joins the queue (None for other requests)."""
    fns = blocks.fns
    path = sub.strip("/").split("/")
    index = data.get("fn_index")
    index = index if isinstance(index, int) and not isinstance(index, bool) else None
    if path[0] == "call" and len(path) >= 2:
        fn = by_name(fns, path[-1])
        if fn is None or fn.api_visibility == "private" or fn.fn is None:
            raise Refusal(404, "No such endpoint.")
    elif path[0] in ("run", "api") and len(path) >= 2:
        fn = fns.get(index) if index is not None else by_name(fns, path[-1])
        if fn is None or (index is None and fn.api_visibility == "private"):
            raise Refusal(404, "No such endpoint.")
    elif path == ["queue", "join"]:
        fn = fns.get(index) if index is not None else None
        if fn is None:
            raise Refusal(400, "Unknown event.")
    else:
        fn = None
    refuse_page_only(fn)
    if path == ["queue", "join"] or path[:2] == ["call", path[-1]]:
        count_values(fn, data.get("data"), by_index=path[0] == "queue")
        file_values(fn, data.get("data"), by_index=path[0] == "queue")
    session = data.get("session_hash")
    admit_session(session, client, blocks)
    if fn is None or path[0] not in ("call", "queue"):
        return None
    ask = (client, ROSTER.member(client, session if isinstance(session, str) else None))
    check_room(blocks._queue, ask, session)
    parent = door_parent(fns, fn) if path == ["queue", "join"] else None
    if parent is not None and not CHAINS.take(session if isinstance(session, str) else None, parent):
        raise Refusal(409, UNCHAINED)  # a chained event is never refused by the CPU share: joined only as the page does
    if getattr(fn, "queue", True) is not False:  # every waiting line in fair order: decode places, replay steps
        fair_queue.install(blocks._queue, fn, event_client)
    if isinstance(session, str) and session:
        LISTENERS.joined(session)
    return ask


def check_room(queue: Any, ask: Ask, session: Any) -> None:
    """Raise Refusal unless `ask`'s event (its unit and page) may join `queue`: the session's and the unit's caps
    (fair_places.may_take), and its part of a half-full queue (fair_places.may_queue). Counted: the events in
    Gradio's queue, those admitted but not in it yet (JOINING: a burst of joins all pass the door before Gradio
    adds the first), and the unit's unread results."""
    client, member = ask
    events = queue_events(queue)
    asks = Counter((event_client(e), ROSTER.member(event_client(e), e.session_hash)) for e in events) + JOINING
    unread = getattr(queue, "pending_event_ids_session", {})  # pushed, result not yet read
    recent = LISTENERS.recent(SESSIONS.of(client), unread_decay_s())  # the penalty decays (client_limits)
    pending = Counter({m: n for (unit, m), n in asks.items() if unit == client})
    unread_by: Counter = Counter()
    for s in recent:
        unread_by[ROSTER.member(client, s)] += len(unread.get(s, ()))
    mine = max(sum(pending.values()), sum(unread_by.values()))
    own = sum(e.session_hash == session for e in events) if isinstance(session, str) else 0
    cap = unit_queued(ROSTER.count(client))
    if own >= client_queued() or not (may_take(pending, member, cap) and may_take(unread_by, member, cap)):
        raise Refusal(429, TOO_MANY_QUEUED)
    line = limits().queue_size - RESERVED  # past half of it, the places are shared fairly (fair_places.may_queue)
    # ...and at the line itself only a unit with nothing queued joins: the parts add up to the line only among the
    # units holding events now, so units that filled the first half before others came (each under its part
    # then) took the queue past it, and Gradio's max_size refused an honest visitor's step (issue 35 figure (d))
    if mine and (sum(asks.values()) >= line or
                 (sum(asks.values()) >= line // 2 and not may_queue(asks, ask, line))):
        raise Refusal(429, QUEUE_NEARLY_FULL)


def rated(client: str, session: Any, stop: bool = False) -> None:
    """Raise Refusal unless an event request of `session`'s page (the unit's REST for any other session) is within
    its part of `client`'s request rate (components/serve/fair_rate.py); `stop`: Stop's own allowance."""
    member = ROSTER.member(client, session if isinstance(session, str) else None)
    if not (STOP_RATE if stop else RATE).allow(client, member, scale=unit_rate_scale(ROSTER.count(client))):
        raise Refusal(429, TOO_FAST)


def stream_member(client: str, session: str, heartbeat: bool) -> str:
    """Whose part of `client`'s open streams a stream of `session` holds: its page's (components/serve/roster.py);
    a heartbeat opening a page the roster will count holds its own page's part already (the roster counts it only
    once the heartbeat is open); every other session's, the unit's REST."""
    member = ROSTER.member(client, session)
    if member == REST and heartbeat and session and ROSTER.count(client) < unit_sessions():
        return session
    return member


def admit_session(session: Any, client: str, blocks: Any) -> None:
    """Make room for a session hash Gradio does not hold yet (client_limits.Sessions), or raise Refusal. Every request
    that can create a session's state passes here: events, and heartbeats (whose close runs the unload event)."""
    if not isinstance(session, str) or not session:
        return
    if len(session) > MAX_SESSION_CHARS:
        raise Refusal(400, "Session id too long.")
    holder = getattr(blocks, "state_holder", None)
    if holder is None:
        return
    if session not in holder.session_data and SESSIONS.owner(session) is None and not NEW_SESSIONS.allow(client):
        raise Refusal(429, TOO_MANY_NEW)
    problem = SESSIONS.admit(session, client, holder, limits().max_sessions, LISTENERS, gpu_slot.JOBS.holds,
                             pages=ROSTER.count(client))
    if problem:
        raise Refusal(503, problem)
    trim_sessions(holder)


def event_client(event: Any) -> str:
    """The client key of a queued Gradio event (cached on it): its request's, read as the front door reads it."""
    key = getattr(event, "_s2d2_client", None)
    if key is None:
        key = request_key(getattr(event, "request", None) or SimpleNamespace(headers={}, client=None))
        try:
            event._s2d2_client = key
        except AttributeError:
            pass
    return key
