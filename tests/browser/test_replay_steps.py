"""Replay steps in the browser (components/replay/js/), in Chromium at 1366×900 and 390×844: for every shipped
example (both runs of a pair) and a fresh Run, ◀ ▶, the slider and Play show exactly the server's rendering of each
step (canvas, strip, words, summary, detail, residual, the routing plot's step marker, the mask viewer), and no
server event is sent per step: the requests to /gradio_api/queue/join are counted while stepping."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest

from tests.support.browser_env import DESKTOP, PHONE, WAIT_MS, open_app, require_browser, show_numbers
from tests.support.step_views_page import expect_step

sync_api = require_browser()
pytestmark = pytest.mark.browser

from tests.support.app_server import RANDOM_MODEL, served

ROOT = Path(__file__).resolve().parent.parent.parent

class Joins:
    """The server events the page sends (POSTs to /gradio_api/queue/join), by the name of their function."""

    def __init__(self, pg: Any, url: str) -> None:
        import httpx

        deps = httpx.get(url.rstrip("/") + "/config").json()["dependencies"]
        self.names = {d["id"]: d.get("api_name") for d in deps}
        self.sent: list[str] = []
        pg.on("request", self._seen)

    def _seen(self, request: Any) -> None:
        if urlparse(request.url).path.endswith("/queue/join") and request.method == "POST":
            self.sent.append(str(self.names.get(json.loads(request.post_data or "{}").get("fn_index"))))

    def since(self, mark: int) -> list[str]:
        return [name for name in self.sent[mark:] if name != "reset_share"]  # the opening's, never a step's


def step_through(pg: Any, trace: Any, joins: Joins) -> None:
    """From step 0: ▶ to the end, the slider to the middle, ◀, then Play to the end; each step the server's
    rendering, and no server event for any of it."""
    n = len(trace.steps)
    mark = len(joins.sent)
    for step in range(1, n + 1):
        pg.locator("#next-btn").click()
        expect_step(pg, trace, step)
    middle = n // 2
    pg.locator("#step-slider input[type=range]").fill(str(middle))
    expect_step(pg, trace, middle)
    if middle:
        pg.locator("#prev-btn").click()
        expect_step(pg, trace, middle - 1)
    speed = pg.locator("#play-speed input[type=number]")
    speed.fill("4")
    speed.press("Tab")
    pg.locator("#play").click()
    pg.wait_for_function("document.querySelector('#play').innerText.includes('Play')", timeout=WAIT_MS)
    expect_step(pg, trace, n)  # Play ran to the end and stopped itself
    assert joins.since(mark) == [], joins.since(mark)


def shipped() -> list[tuple[str, str, Any]]:
    """(link query, label, trace) for every shipped example and the baseline of each pair."""
    from components.files.examples import examples_dir, list_examples, load_pair
    from components.replay.share_links import example_slug

    out = []
    for label, ex in list_examples(examples_dir()).items():
        main, partner = load_pair(ex)
        out.append((f"?example={example_slug(ex)}&run=s2d2&step=0", label, main))
        if partner is not None:
            out.append((f"?example={example_slug(ex)}&run=baseline&step=0", f"{label} (baseline)", partner))
    return out


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_every_shipped_example_steps_in_the_browser_as_the_server_draws_it(browser, served, viewport):  # noqa: F811
    _, url = served
    for query, label, trace in shipped():
        pg, errors = open_app(browser, url + query, viewport)
        joins = Joins(pg, url)
        show_numbers(pg)
        expect_step(pg, trace, 0)
        step_through(pg, trace, joins)
        assert not errors, (label, errors)
        pg.close()


def test_a_fresh_run_steps_in_the_browser_as_the_server_draws_it(browser, served, tmp_path):  # noqa: F811
    from components.files.traces import load_example

    _, url = served
    pg, errors = open_app(browser, url, DESKTOP)
    joins = Joins(pg, url)
    pg.get_by_role("tab", name="Run", exact=True).click()
    box = pg.locator("#model input")
    box.fill("tiny" if (ROOT / "assets" / "tiny").exists() else RANDOM_MODEL)
    box.press("Enter")
    gen = pg.locator("#knob-gen_length input[type=number]")
    gen.fill("32")
    gen.press("Tab")
    pg.locator("#prompt textarea").fill("2+3=")
    pg.get_by_role("button", name="▶ Record a run").click()
    pg.wait_for_function("document.querySelector('#headline').innerText.startsWith('S2D2 answered')",
                         timeout=WAIT_MS)  # Replay shows the run
    pg.locator("#files").get_by_text("This trace: details").click()
    with pg.expect_download() as download:
        pg.get_by_role("button", name="⬇ Download this trace (JSON)").click()
    saved = tmp_path / "run.json"
    download.value.save_as(saved)
    trace = load_example(saved)
    show_numbers(pg)
    number = pg.locator("#step-slider input[type=number]")
    number.fill("0")
    number.press("Enter")
    expect_step(pg, trace, 0)
    step_through(pg, trace, joins)
    assert not errors, errors
    pg.close()


def test_a_pinned_token_is_drawn_by_the_server_and_only_then(browser, served):  # noqa: F811
    """A pinned token's details follow the scrubber (the server draws them: one event per step while pinned)."""
    _, url = served
    query, _, trace = shipped()[0]
    pg, errors = open_app(browser, url + query, DESKTOP)
    joins = Joins(pg, url)
    show_numbers(pg)
    expect_step(pg, trace, 0)
    pg.locator("#next-btn").click()
    expect_step(pg, trace, 1)
    pos = pg.locator("#canvas .tok.new[data-pos]").first.get_attribute("data-pos")
    mark = len(joins.sent)
    pg.locator(f"#canvas [data-pos='{pos}']").click()
    pg.wait_for_function("document.querySelector('#mask .gtitle').textContent.includes('outlined: position')",
                         timeout=WAIT_MS)
    pg.locator("#next-btn").click()
    pg.wait_for_function(f"document.querySelector('#summary textarea').value.includes('Step 2 of') && "
                         f"document.querySelector('#token-detail [data-pinned=\"{pos}\"]') !== null",
                         timeout=WAIT_MS)
    assert joins.since(mark) == ["select_position", "server_step"], joins.since(mark)
    assert not errors, errors
    pg.close()
