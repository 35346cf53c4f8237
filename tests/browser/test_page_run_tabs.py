"""Issue 36 in the browser, after a Run decoded in the page: unticking "Decode in my browser" and running the same
sampled settings again on the server gives the same answer (both draw from the counter stream, and the line under
Seed says so); Learn and Compare work with the page's trace as the session's, and Replay still shows it after them.

Needs the bundled `tiny` model, its export and the pinned runtime; skips, saying which is missing, without them.
"""
from __future__ import annotations

import re

from tests.support.app_server import served  # noqa: F401  (the fixture)
from tests.support.browser_env import DESKTOP, PHONE, WAIT_MS, open_app, pick_option, require_browser
from tests.support.page_run_page import Uploads, require_page_decoding, title

sync_api = require_browser()

SIZE = re.compile(r"(\d+) steps?, (\d+) forwards?")  # "23 steps, 41 forwards" in a finished Run's status


def _sampled_settings(pg) -> None:
    """Always verify, block 16 (sdar-config-b) at temperature 1 on the third example prompt, seed 0: torch's stream
    routes this decode differently from the counter stream (tests/app/test_random_stream.py)."""
    from components.run.knobs import EXAMPLE_PROMPTS

    pg.get_by_role("tab", name="Run", exact=True).click()
    pg.locator("#prompt textarea").fill(EXAMPLE_PROMPTS[2])
    pick_option(pg, "#preset", "sdar-config-b", "Always verify, block 16 · sdar-config-b")
    pg.wait_for_function("document.querySelector('#knob-block_length input[type=number]').value === '16'",
                         timeout=WAIT_MS)
    pg.locator("#advanced").get_by_text("Advanced").click()
    temperature = pg.locator("#knob-temperature input[type=number]")
    temperature.fill("1")
    temperature.press("Tab")


def _run(pg, done: str) -> str:
    """Press Run and wait for the status that contains `done`; the status."""
    before = pg.locator("#run-status").inner_text()
    pg.locator("#run").click()
    pg.wait_for_function(f"(t => t.includes({done!r}) && t !== {before!r})"
                         "(document.querySelector('#run-status').innerText)", timeout=WAIT_MS)
    return pg.locator("#run-status").inner_text()


def test_the_server_gives_the_pages_answer_and_learn_and_compare_work_after_a_page_run(browser, served):  # noqa: F811
    require_page_decoding()
    _, url = served
    pg, errors = open_app(browser, url, DESKTOP)
    uploads = Uploads(pg)
    _sampled_settings(pg)
    stream = pg.locator("#run-stream").inner_text()
    assert stream.startswith("Random stream: the shared counter stream."), stream
    in_page = _run(pg, "Done in your browser")
    page_answer = pg.locator("#output textarea").input_value()
    assert uploads.trace()["header"]["config"]["rng"] == "counter"
    pg.wait_for_function("document.querySelector('#headline').innerText.startsWith('S2D2 answered')",
                         timeout=WAIT_MS)
    assert "decoded in the browser" in title(pg)
    # Learn: the tour steps on; it does not replace the session's trace, which Replay still shows.
    pg.get_by_role("tab", name="Learn").click()
    tour = pg.locator("#tour")
    heading = tour.locator(".prose.tour-text:visible h3").inner_text(timeout=WAIT_MS)
    pg.locator("#tour-next").click()
    pg.wait_for_function(f"[...document.querySelectorAll('#tour .prose.tour-text h3')].filter(e => "
                         f"e.offsetParent).map(e => e.innerText).join() !== {heading!r}", timeout=WAIT_MS)
    assert "decoded in the browser" in title(pg)
    # Compare: its lanes run on the server with the same stream, and say so; Replay keeps the page's trace.
    pg.get_by_role("tab", name="Compare").click()
    pg.locator("#cmp-empty").wait_for(timeout=WAIT_MS)
    pg.get_by_role("button", name="▶ Run all lanes").click()
    pg.wait_for_function("document.querySelector('#cmp-status').innerText.startsWith('Ran ')", timeout=WAIT_MS)
    assert "Random draws came from the shared counter stream" in pg.locator("#cmp-status").inner_text()
    assert "decoded in the browser" in title(pg)
    # The same settings and seed on the server: the same answer, the same steps and forwards.
    pg.get_by_role("tab", name="Run", exact=True).click()
    pg.locator("#in-page input[type=checkbox]").uncheck()
    on_server = _run(pg, "✓ Done in ")
    assert "in your browser" not in on_server
    assert pg.locator("#run-where").inner_text().strip() == "Decoded on the server (Decode in my browser is off)."
    assert SIZE.search(on_server).groups() == SIZE.search(in_page).groups(), (in_page, on_server)
    assert pg.locator("#output textarea").input_value() == page_answer
    assert "decoded on the server" in title(pg)
    assert not errors, errors
    pg.close()


def test_a_page_trace_over_the_upload_limit_is_not_sent_and_the_run_says_what_to_do(browser, served,  # noqa: F811
                                                                                   monkeypatch):
    """On a phone, with the server taking at most 10 kB: the page decodes, sends nothing, and the Run's status is one
    line with both sizes and what to do; nothing replaces the session's trace."""
    require_page_decoding()
    _, url = served
    pg, errors = open_app(browser, url, PHONE)
    uploads = Uploads(pg)
    before = " ".join(title(pg).split())
    monkeypatch.setenv("S2D2_MAX_UPLOAD_MB", "0.01")  # read when the Run is planned: the page's hand-off limit
    pg.get_by_role("tab", name="Run", exact=True).click()
    status = _run(pg, "too large to hand to the server").splitlines()[-1]  # under Gradio's own timer line
    assert re.fullmatch(r"⚠ Your browser decoded this run, but its trace is too large to hand to the server "
                        r"\(\d+ kB, more than the 10 kB the server takes\)\. Untick Decode in my browser to "
                        r"decode it on the server, or shorten the Generation length\. Nothing was kept\.",
                        status.strip()), status
    assert uploads.posts == 0 and " ".join(title(pg).split()) == before  # nothing sent, the session's trace kept
    assert not errors, errors
    pg.close()
