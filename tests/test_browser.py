"""A real browser (Debian Chromium via Playwright): example on screen, scrubbing, every plot mounts, a run completes.

Saves docs/screenshot.png. Skips when Playwright or /usr/bin/chromium is missing.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
CHROMIUM = os.environ.get("S2D2_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--no-first-run", "--disable-sync"]

sync_api = pytest.importorskip("playwright.sync_api")
if not Path(CHROMIUM).exists():
    pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium)", allow_module_level=True)

from test_app_client import RANDOM_MODEL, served  # noqa: E402,F401  (the launched-app fixture)


@pytest.fixture(scope="module")
def page(served):  # noqa: F811
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        pg = browser.new_page(viewport={"width": 1400, "height": 1000})
        errors: list[str] = []
        pg.on("pageerror", lambda e: errors.append(str(e)))
        pg.goto(served[1])
        pg.wait_for_selector("#canvas .s2d2-canvas", timeout=60_000)
        yield pg, errors
        browser.close()


def screenshot_path() -> Path:
    """docs/screenshot.png (the README's) when missing or S2D2_UPDATE_SCREENSHOT=1; else a temp file, so a test run
    does not leave the tracked image modified."""
    target = ROOT / "docs" / "screenshot.png"
    if os.environ.get("S2D2_UPDATE_SCREENSHOT") == "1" or not target.exists():
        target.parent.mkdir(exist_ok=True)
        return target
    return Path(os.environ.get("GRADIO_TEMP_DIR", "/tmp")) / "screenshot.png"


def _summary(pg) -> str:
    return pg.locator("#summary textarea").input_value()


def test_example_on_screen_scrub_and_plots(page):
    pg, errors = page
    assert _summary(pg).startswith("Start: prompt of")
    pg.wait_for_function("document.querySelectorAll('#routing .js-plotly-plot, #mask .js-plotly-plot').length == 2",
                         timeout=30_000)
    before = pg.locator("#canvas").inner_html()
    pg.get_by_role("button", name="Next ▶").click()
    pg.wait_for_function("document.querySelector('#summary textarea').value.startsWith('Block')", timeout=20_000)
    assert pg.locator("#canvas").inner_html() != before
    assert "Step 1 of" in _summary(pg)
    number = pg.locator("#step-slider input[type=number]")
    number.fill("3")
    number.press("Enter")
    pg.wait_for_function("document.querySelector('#summary textarea').value.includes('Step 3 of')", timeout=20_000)
    assert pg.locator("#canvas .tok.new").count() >= 1
    pg.locator("#canvas .tok.new").first.click()
    assert pg.locator("#token-detail").inner_text().startswith("position ")
    pg.locator("body").click(position={"x": 5, "y": 5})
    pg.keyboard.press("ArrowRight")
    pg.wait_for_function("document.querySelector('#summary textarea').value.includes('Step 4 of')", timeout=20_000)
    pg.keyboard.press("ArrowLeft")
    pg.wait_for_function("document.querySelector('#summary textarea').value.includes('Step 3 of')", timeout=20_000)
    assert pg.locator("#strip table, #strip .sum").count() >= 1
    pg.wait_for_timeout(500)
    pg.screenshot(path=str(screenshot_path()), full_page=True)
    pg.get_by_role("tab", name="Metrics & about").click()
    pg.wait_for_function("document.querySelectorAll('.js-plotly-plot').length >= 6", timeout=30_000)
    pg.get_by_role("tab", name="Learn").click()
    pg.wait_for_selector("#tour .s2d2-canvas", timeout=20_000)
    tour = pg.locator("#tour")
    tour.locator(".tour-next:visible").click()  # the walkthrough advances only through its own buttons
    tour.get_by_text("S2D2 looks at the").wait_for(state="visible", timeout=20_000)
    assert not tour.get_by_text("The model fills").is_visible()
    tour.locator(".tour-back:visible").click()
    tour.get_by_text("The model fills").wait_for(state="visible", timeout=20_000)
    tour.get_by_role("button", name="Show in Replay").first.click()
    pg.wait_for_function("document.querySelector('#summary textarea').value.includes('Step 1 of')", timeout=20_000)
    assert pg.locator("#canvas").is_visible()
    assert not errors, errors


def test_run_completes_in_browser(page):
    pg, errors = page
    pg.get_by_role("tab", name="Run", exact=True).click()
    model = "tiny" if (ROOT / "assets" / "tiny").exists() else RANDOM_MODEL
    box = pg.locator("#model input")
    box.fill(model)
    box.press("Enter")
    pg.locator("#prompt textarea").fill("2+3=")
    pg.get_by_role("button", name="▶ Record a run").click()
    pg.wait_for_function("document.querySelector('#run-status').innerText.includes('Done')", timeout=90_000)
    pg.wait_for_function("document.querySelector('#load-status').innerText.includes('run just recorded')",
                         timeout=30_000)
    pg.get_by_role("tab", name="Replay", exact=True).click()
    assert "measured trace" in pg.locator("body").inner_text()
    assert not errors, errors
