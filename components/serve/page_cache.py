"""The page and its config, built once and served again: the front door's cache of `GET /` and `GET /config`.

Gradio builds both per request (a deep copy of the whole app's config, tens of ms of CPU; issue 35 measured 200 GETs
of /config at 8.1 s of CPU, none refused), yet their bytes depend only on the request's route, query, the headers
Gradio reads to write the app's root URL (Host, X-Forwarded-Host, X-Forwarded-Proto) and the cookies that say who
is signed in (`access-token*`: Gradio's auth; `session`: the OAuth session). So the front door keeps the finished
answer per (app, route, query, those headers, those cookies): a class loading the page from one address costs one
build. What still costs a build, a key not seen yet, is bounded per client by a bucket of its own (BUILD_RATE a
second, bursts of BUILD_BURST: a class of 40 signed-in students still gets in at once), and concurrent requests for
the same key wait for the one build instead of each making their own.

Invariants: only a complete 200 answer without Set-Cookie and under MAX_BYTES is kept; at most MAX_ENTRIES answers
(the least recently used are dropped) and MAX_TOTAL_BYTES in all; an app rebuilt in the same process (tests reload
app.py) never gets the old app's answer (the key holds the app's identity: Gradio's random 64-bit app id, never a
memory address that a new app could reuse).
"""
from __future__ import annotations

import asyncio
from collections import OrderedDict
from typing import Any, Awaitable, Callable, Optional

from components.serve.client_limits import Rate
from components.serve.door_checks import Refusal

MAX_ENTRIES = 64
MAX_BYTES = 8 << 20  # one answer
MAX_TOTAL_BYTES = 64 << 20
BUILD_RATE, BUILD_BURST = 2.0, 40.0
KEY_HEADERS = (b"host", b"x-forwarded-host", b"x-forwarded-proto")
AUTH_COOKIES = ("access-token", "session")  # prefixes of the cookie names Gradio reads for the signed-in user

Send = Callable[[dict], Awaitable[None]]
Receive = Callable[[], Awaitable[dict]]
App = Callable[[dict, Receive, Send], Awaitable[None]]
Answer = tuple[dict, bytes]  # the response start message and the whole body


def cache_key(scope: dict, app_id: Any) -> tuple:
    """What the built answer depends on (see the module docstring)."""
    headers = {k.lower(): v for k, v in scope.get("headers", ()) if k.lower() in KEY_HEADERS}
    cookies = b";".join(sorted(part.strip() for k, v in scope.get("headers", ()) if k.lower() == b"cookie"
                               for part in v.split(b";") if auth_cookie(part)))
    return (app_id, scope.get("path", ""), scope.get("query_string", b""), scope.get("root_path", ""),
            scope.get("scheme", ""), tuple(sorted(headers.items())), cookies)


def auth_cookie(part: bytes) -> bool:
    name = part.split(b"=", 1)[0].strip().decode("latin-1")
    return any(name.startswith(prefix) for prefix in AUTH_COOKIES)


class PageCache:
    """Finished answers of the page routes by cache_key; `serve` answers one request from it or builds it."""

    def __init__(self, builds: Optional[Rate] = None) -> None:
        self.builds = builds or Rate(lambda: BUILD_RATE, lambda: BUILD_BURST)
        self._answers: "OrderedDict[tuple, Answer]" = OrderedDict()
        self._building: dict[tuple, list] = {}  # key -> [its lock, requests using it]
        self.built = 0  # builds so far (tests and the benchmark read it)

    def entries(self) -> int:
        return len(self._answers)

    def total_bytes(self) -> int:
        return sum(len(body) for _, body in self._answers.values())

    async def serve(self, scope: dict, receive: Receive, send: Send, app: App, client: str, app_id: Any,
                    too_fast: str) -> None:
        """Answer a GET from the cache, or build it (once per key at a time; Refusal(429, too_fast) when the
        client has spent its builds) and keep it when it may be kept."""
        if scope.get("method", "GET") != "GET":
            return await app(scope, receive, send)
        key = cache_key(scope, app_id)
        entry = self._building.setdefault(key, [asyncio.Lock(), 0])
        entry[1] += 1  # requests using this lock: it is forgotten when the last one is done
        try:
            async with entry[0]:
                answer = self._hit(key)
                if answer is None:
                    if not self.builds.allow(client):
                        raise Refusal(429, too_fast)
                    answer = await self._build(scope, receive, send, app, key)
        finally:
            entry[1] -= 1
            if not entry[1]:
                self._building.pop(key, None)
        if answer is not None:
            await send(answer[0])
            await send({"type": "http.response.body", "body": answer[1]})

    def _hit(self, key: tuple) -> Optional[Answer]:
        answer = self._answers.get(key)
        if answer is not None:
            self._answers.move_to_end(key)
        return answer

    async def _build(self, scope: dict, receive: Receive, send: Send, app: App, key: tuple) -> Optional[Answer]:
        """Run the app, holding its answer back; one that may be kept is kept and returned (the caller sends it).
        Any other (not 200, a cookie set, over MAX_BYTES) goes through as it comes, and None is returned."""
        held: list[dict] = []
        size, passing = 0, False

        async def capture(message: dict) -> None:
            nonlocal size, passing
            if passing:
                return await send(message)
            held.append(message)
            size += len(message.get("body", b""))
            start = held[0]
            if start.get("status") != 200 or size > MAX_BYTES or any(
                    k.lower() == b"set-cookie" for k, _ in start.get("headers", ())):
                passing = True  # not for keeping: what was held goes out, then the rest as it comes
                for kept in held:
                    await send(kept)

        await app(scope, receive, capture)
        self.built += 1
        bodies = [m for m in held if m.get("type") == "http.response.body"]
        if passing or not held or not bodies or bodies[-1].get("more_body"):
            for message in held if not passing else ():
                await send(message)  # an answer cut short: sent as it was
            return None
        answer = (held[0], b"".join(m.get("body", b"") for m in bodies))
        self._keep(key, answer)
        return answer

    def _keep(self, key: tuple, answer: Answer) -> None:
        self._answers[key] = answer
        self._answers.move_to_end(key)
        while len(self._answers) > MAX_ENTRIES or (len(self._answers) > 1 and self.total_bytes() > MAX_TOTAL_BYTES):
            self._answers.popitem(last=False)
