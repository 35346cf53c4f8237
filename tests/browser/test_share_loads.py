"""Issue 29, row 7: a share link opens its moment on every load, also when one address loads it again and again
(a class behind one NAT, a visitor reloading). The pages closed before leave results they never read; those must
not count against the next page's queue allowance (components/serve/client_limits.py). Debian Chromium via Playwright; skips
without it."""
from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent.parent

from tests.support.browser_env import DESKTOP, WAIT_MS, require_browser, show_numbers

sync_api = require_browser()

from tests.support.app_server import served

from components.files.examples import list_examples
from components.replay.share_links import example_slug

LOADS = 6  # before the fix, half of six loads in a row from one address lost their moment to a 429
STEP_3 = ("document.querySelector('#summary textarea') && "
          "document.querySelector('#summary textarea').value.includes('Step 3 of')")


def test_a_link_opens_its_moment_on_every_load_from_one_address(browser, served):  # noqa: F811
    _, url = served
    pair = next((e for e in list_examples(HERE.parent / "assets" / "traces").values() if e.baseline is not None),
                None)
    if pair is None:
        import pytest

        pytest.skip("no shipped example pair")
    query = f"?example={example_slug(pair)}&run=baseline&step=3"
    lost = []
    for i in range(LOADS):
        ctx = browser.new_context(viewport=DESKTOP)
        page = ctx.new_page()
        refused: list[str] = []
        page.on("response", lambda r: refused.append(f"{r.status} {r.url[len(url):][:40]}")
                if r.status >= 400 else None)
        page.goto(url + query)
        try:
            page.wait_for_selector("#canvas .s2d2-canvas", timeout=WAIT_MS)
            show_numbers(page)
            page.wait_for_function(STEP_3, timeout=WAIT_MS)
        except sync_api.TimeoutError:
            lost.append((i, page.locator("#headline").inner_text()[:60], refused))
        ctx.close()
    assert lost == [], lost
