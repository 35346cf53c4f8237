"""Issue 35 item 7: the page and /config are built once per key (components/serve/page_cache.py), at the ASGI level
against a stand-in for Gradio that counts its builds; no server, no sleeps (the build bucket's clock is injected)."""
from __future__ import annotations

import asyncio

import pytest

from components.serve.client_limits import Rate
from components.serve.door_checks import Refusal
from components.serve.page_cache import BUILD_BURST, MAX_ENTRIES, PageCache
from tests.support.app_server import served  # noqa: F401  (the fixture)


class Builder:
    """Stand-in for Gradio's page routes: answers 200 with a body naming the build, counts builds."""

    def __init__(self, status=200, headers=(), chunks=1):
        self.builds, self.status, self.headers, self.chunks = 0, status, list(headers), chunks

    async def __call__(self, scope, receive, send):
        self.builds += 1
        await asyncio.sleep(0)  # another request may arrive meanwhile
        await send({"type": "http.response.start", "status": self.status, "headers": self.headers})
        for i in range(self.chunks):
            await send({"type": "http.response.body", "body": f"build {self.builds} part {i};".encode(),
                        "more_body": i < self.chunks - 1})


def scope(path="/config", headers=(), query=b"", method="GET"):
    return {"type": "http", "path": path, "method": method, "query_string": query, "headers": list(headers),
            "scheme": "http", "root_path": ""}


async def fetch(cache, app, sc, client="ip:10.0.0.1", app_id=1):
    out = []

    async def send(message):
        out.append(message)

    async def receive():
        return {"type": "http.disconnect"}

    await cache.serve(sc, receive, send, app, client, app_id, "too fast")
    return out[0]["status"], b"".join(m.get("body", b"") for m in out[1:])


def run(coro):
    return asyncio.run(coro)


def test_a_class_loading_the_page_costs_one_build():
    cache, app = PageCache(), Builder()
    first = run(fetch(cache, app, scope()))
    for _ in range(30):
        assert run(fetch(cache, app, scope(headers=[(b"cookie", b"_ga=1; theme=dark")]))) == first
    assert app.builds == 1 and first == (200, b"build 1 part 0;")
    run(fetch(cache, app, scope(path="/")))
    assert app.builds == 2  # the page is its own key


def test_concurrent_requests_for_one_key_wait_for_one_build():
    cache, app = PageCache(), Builder(chunks=3)

    async def together():
        return await asyncio.gather(*(fetch(cache, app, scope(), client=f"ip:10.0.0.{i}") for i in range(20)))

    answers = run(together())
    assert app.builds == 1 and len(set(answers)) == 1 and answers[0][1] == b"build 1 part 0;build 1 part 1;build 1 part 2;"


@pytest.mark.parametrize("change", [
    {"headers": [(b"host", b"other.example")]}, {"headers": [(b"x-forwarded-host", b"mirror.example")]},
    {"headers": [(b"x-forwarded-proto", b"https")]}, {"query": b"page=x"},
    {"headers": [(b"cookie", b"access-token=abc")]}, {"headers": [(b"cookie", b"session=xyz; _ga=1")]},
], ids=["host", "forwarded-host", "proto", "query", "gradio-auth", "oauth-session"])
def test_what_the_answer_depends_on_is_in_the_key(change):
    cache, app = PageCache(), Builder()
    run(fetch(cache, app, scope()))
    assert run(fetch(cache, app, scope(**change))) == (200, b"build 2 part 0;") and app.builds == 2
    run(fetch(cache, app, scope(), app_id=2))  # an app rebuilt in this process: never the old one's answer
    assert app.builds == 3


@pytest.mark.parametrize("builder", [Builder(status=500), Builder(headers=[(b"set-cookie", b"a=b")])],
                         ids=["not-200", "sets-a-cookie"])
def test_answers_that_may_not_be_shared_are_never_kept(builder):
    cache = PageCache()
    assert run(fetch(cache, builder, scope()))[1] == b"build 1 part 0;"
    assert run(fetch(cache, builder, scope()))[1] == b"build 2 part 0;"


def test_only_gets_are_cached():
    cache, app = PageCache(), Builder()
    run(fetch(cache, app, scope(method="HEAD")))
    run(fetch(cache, app, scope(method="HEAD")))
    assert app.builds == 2


def test_builds_are_bounded_per_client_and_entries_in_all():
    now = [0.0]
    cache, app = PageCache(Rate(lambda: 2.0, lambda: BUILD_BURST, clock=lambda: now[0])), Builder()
    run(fetch(cache, app, scope()))
    for i in range(int(BUILD_BURST) - 1):  # a class of 40 signed-in students at once: every page built
        run(fetch(cache, app, scope(headers=[(b"cookie", f"session={i}".encode())])))
    with pytest.raises(Refusal) as refused:  # new keys past the burst: refused, one line
        run(fetch(cache, app, scope(query=b"page=new")))
    assert refused.value.status == 429 and refused.value.message == "too fast"
    run(fetch(cache, app, scope(query=b"page=new"), client="ip:10.0.0.2"))  # another client: its own bucket
    assert run(fetch(cache, app, scope()))[0] == 200  # a kept answer needs no build
    now[0] += 1.0  # two builds a second come back
    run(fetch(cache, app, scope(query=b"page=new2")))
    for i in range(MAX_ENTRIES + 5):
        run(fetch(cache, app, scope(query=f"q={i}".encode()), client=f"ip:10.1.0.{i}"))
    assert cache.entries() == MAX_ENTRIES and app.builds == BUILD_BURST + 2 + MAX_ENTRIES + 5


def test_the_launched_app_serves_its_page_and_config_from_one_build(served):
    """The real routes: a second visitor (another address, other cookies) gets the same bytes without a build,
    and the config is the app's own (its dependencies)."""
    httpx = pytest.importorskip("httpx")
    from components.serve import front_door

    _, url = served
    for route in ("config?from=test", "?from=test"):  # a query of its own: a key no other test made
        built = front_door.PAGES.built
        first = httpx.get(url + route, headers={"x-forwarded-for": "10.36.0.1"}, timeout=60)
        again = httpx.get(url + route, headers={"x-forwarded-for": "10.36.0.2", "cookie": "_ga=2"}, timeout=60)
        assert first.status_code == again.status_code == 200 and first.content == again.content
        assert front_door.PAGES.built == built + 1
    assert httpx.get(url + "config", timeout=60).json()["dependencies"]
