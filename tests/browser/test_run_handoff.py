"""Issue 38 row 9: Run -> Replay under load. Several visitors press Record at once (each its own address, as a
class behind a proxy); each page's Run tab must end with its run's whole answer and the "Done" line by the time
Replay opens on that run: the final update is never lost behind the chained event that opens Replay."""
from __future__ import annotations

import pytest

from tests.support.browser_env import DESKTOP, PHONE, WAIT_MS, require_browser

sync_api = require_browser()

from tests.support.app_server import served  # noqa: E402,F401

PAGES = 4
ROUNDS = 3


def _open(browser, url: str, visitor: int, viewport: dict):
    context = browser.new_context(viewport=viewport, extra_http_headers={"X-Forwarded-For": f"10.38.9.{visitor}"})
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.goto(url)
    pg.wait_for_selector("#canvas .s2d2-canvas", timeout=WAIT_MS)
    pg.get_by_role("tab", name="Run", exact=True).click()
    pg.locator("#run").wait_for(timeout=WAIT_MS)
    pg.locator("#in-page input[type=checkbox]").uncheck()  # the server's Run is what this checks (not the page's)
    return context, pg, errors


def _replay_opened(pg) -> None:
    """Wait until this page's Replay tab is the selected one again (the chained event opened it)."""
    pg.wait_for_function("(() => { const t = [...document.querySelectorAll('[role=tab]')].find(b => "
                         "b.innerText.trim() === 'Replay'); "
                         "return t && t.getAttribute('aria-selected') === 'true'; })()",
                         timeout=WAIT_MS)


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_every_run_of_a_class_ends_with_its_answer_and_done_line(browser, served, viewport):  # noqa: F811
    pages = [_open(browser, served[1], i + 1, viewport) for i in range(PAGES)]
    finals = []  # (the Done line after its time, the answer) of every run: the same prompt and seed, the same run
    try:
        for _ in range(ROUNDS):
            for _, pg, _ in pages:  # Replay is selected again after each round: back to Run first
                pg.get_by_role("tab", name="Run", exact=True).click()
                pg.locator("#run").wait_for(timeout=WAIT_MS)
            for _, pg, _ in pages:  # the class presses Record together
                pg.locator("#run").click()
            for _, pg, errors in pages:
                _replay_opened(pg)
                # Replay is open: the Run tab already holds the run's final line and its whole answer
                status = pg.locator("#run-status").inner_text().strip()
                output = pg.locator("#output textarea").input_value()
                assert status.startswith("✓ Done in "), status
                assert output.strip(), (status, output)
                finals.append((status.split(" s: ", 1)[1], output))
                assert not errors, errors
        assert len(set(finals)) == 1, set(finals)  # every page shows the whole of the one answer
    finally:
        for context, _, _ in pages:
            context.close()
