"""A real browser (Debian Chromium via Playwright) on the whole app, desktop (1366×900) and phone (390×844):
the first screen shows the verifier catching a wrong draft, the tour walks draft → … → both runs at 1366×900 and
390×844 (its pictures change in place, its τ_score control re-decides the plot), Run shows
few knobs and Stop keeps the partial trace, the LLaDA2 example shows its edit, the phone layout fits, and no
console errors.

One launched app for the module. docs/screenshot.png, docs/screenshot-tour.png and docs/screenshot-phone.png are
rewritten when S2D2_UPDATE_SCREENSHOT=1 (or when missing), each exactly what its viewport shows (1366×900, and
390×844 for the phone: what a visitor sees first, not a full page). Skips when Playwright or /usr/bin/chromium is
missing.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent.parent
ROOT = HERE.parent
from tests.support.browser_env import (DESKTOP, PHONE, WAIT_MS, open_app, painted, require_browser,
                                       show_numbers)

sync_api = require_browser()
pytestmark = pytest.mark.browser  # drives Chromium: left out by -m "not browser"

from tests.support.app_server import RANDOM_MODEL, SLOW_MODEL, served

STOP_KEYS = ("draft", "route", "verify", "reject", "resample", "skip", "calibration", "cost", "exact", "edit",
             "pipeline", "run")
SHIPPED_PAIR = any((ROOT / "assets" / "traces").glob("*.baseline.json"))


@pytest.fixture(scope="module")
def desktop(browser, served):  # noqa: F811
    pg, errors = open_app(browser, served[1], DESKTOP)
    yield pg, errors
    pg.close()


def shot_path(name: str) -> Path:
    """docs/<name> when missing or S2D2_UPDATE_SCREENSHOT=1; else a temp file, so a test run leaves the tracked
    images alone."""
    target = ROOT / "docs" / name
    if os.environ.get("S2D2_UPDATE_SCREENSHOT") == "1" or not target.exists():
        target.parent.mkdir(exist_ok=True)
        return target
    return Path(os.environ.get("GRADIO_TEMP_DIR", "/tmp")) / name


def screenshot(pg, name: str) -> None:
    """What the viewport shows, at its real size (never a full page): the README's pictures are first screens."""
    pg.evaluate("window.scrollTo(0, 0)")
    pg.wait_for_function("window.scrollY === 0", timeout=WAIT_MS)
    painted(pg)
    pg.screenshot(path=str(shot_path(name)), full_page=False)


def _summary(pg) -> str:
    return pg.locator("#summary textarea").input_value()


def _no_error_badges(pg) -> None:
    assert pg.locator(".toast-body").count() == 0, pg.locator(".toast-body").all_inner_texts()
    assert pg.locator("[data-testid='status-tracker'].error, .error-message").count() == 0


def _plots_mounted(pg, selector: str, n: int) -> None:
    pg.wait_for_function(f"document.querySelectorAll('{selector}').length >= {n}", timeout=WAIT_MS)


def test_first_screen_shows_the_catch(desktop):
    pg, errors = desktop
    if SHIPPED_PAIR:
        headline = pg.locator("#headline").inner_text()
        assert "✗" in headline and "✓" in headline and "rejected the draft" in headline
        canvas = pg.locator("#canvas")
        assert canvas.locator(".st-resampled.new").count() == 1 and canvas.locator(".st-resampled s").count() == 1
        assert pg.locator("#strip td.first-reject").count() > 0 and "✗ reject" in pg.locator("#strip").inner_text()
        _plots_mounted(pg, "#routing .js-plotly-plot, #mask .js-plotly-plot", 2)
        screenshot(pg, "screenshot.png")
        rejected = pg.locator("#canvas .st-resampled.new").get_attribute("data-pos")
        pg.locator(f"#canvas [data-pos='{rejected}']").click()  # pin the caught token, then switch runs
        pg.wait_for_function("document.querySelector('#token-detail [data-pinned]') !== null && "
                             "document.querySelector('#mask .gtitle').textContent.includes('outlined: position')",
                             timeout=WAIT_MS)  # the server has the pin too
        assert "resampled" in pg.locator("#token-detail").inner_text()
        show_numbers(pg)  # after the picture: the first screen shows them closed
        pg.get_by_text("Diffusion alone: same B, no verifier").click()
        pg.wait_for_function("document.querySelector('#summary textarea').value.includes('never verifies') && "
                             "document.querySelector('#canvas .st-resampled') === null",
                             timeout=WAIT_MS)  # each view is drawn by its own component: wait on both
        assert pg.locator("#headline").inner_text() == headline
        # the pinned detail follows the run on screen (row 4); no empty routing axes for the baseline (row 6)
        pg.wait_for_function("!document.querySelector('#token-detail').innerText.includes('resampled')",
                             timeout=WAIT_MS)
        assert f"position {rejected}" in pg.locator("#token-detail").inner_text()
        _plots_mounted(pg, "#routing .js-plotly-plot", 1)
        pg.wait_for_function("document.querySelector('#routing').textContent.includes('No routing')", timeout=WAIT_MS)
        pg.get_by_text("S2D2: draft, route, verify").click()
        pg.wait_for_function("document.querySelectorAll('#canvas .st-resampled').length == 1", timeout=WAIT_MS)
    assert not errors, errors


def test_the_opening_trace_downloads_with_the_page_load(browser, served):  # noqa: F811
    """The download's file is set by the page load (never published in /config): a fresh page downloads the
    trace on screen."""
    import json

    pg, errors = open_app(browser, served[1], DESKTOP)
    try:
        pg.locator("#files").click()
        button = pg.get_by_role("button", name="⬇ Download this trace (JSON)")
        for attempt in range(6):  # a press before the page load's event has set the file downloads nothing: again
            try:
                with pg.expect_download(timeout=WAIT_MS // 6) as download:
                    button.click()
                break
            except sync_api.TimeoutError:
                if attempt == 5:
                    raise
        data = json.loads(Path(download.value.path()).read_text(encoding="utf-8"))
        assert data["header"]["prompt_text"] and data["steps"] and download.value.suggested_filename.endswith(".json")
        assert not errors, errors
    finally:
        pg.close()


def test_scrub_keys_and_a_step_box_that_never_errors(desktop):
    pg, errors = desktop
    show_numbers(pg)
    pg.get_by_role("tab", name="Replay", exact=True).click()
    number = pg.locator("#step-slider input[type=number]")
    number.fill("0")
    number.press("Enter")
    pg.wait_for_function("document.querySelector('#summary textarea').value.startsWith('Start')", timeout=WAIT_MS)
    before = pg.locator("#canvas").inner_html()
    pg.locator("#next-btn").click()
    pg.wait_for_function("document.querySelector('#summary textarea').value.includes('Step 1 of')", timeout=WAIT_MS)
    # The summary and the canvas are outputs of one event, each drawn by its own component: wait on the canvas's
    # own change rather than assume it is drawn once the summary's text is (CI read it first once). A canvas that
    # never moves still fails.
    pg.wait_for_function("b => document.querySelector('#canvas').innerHTML !== b", arg=before, timeout=WAIT_MS)
    for typed, expect in (("1000", "Step 4 of"), ("-3", "Start"), ("", "Start")):  # clamped, clamped, ignored
        number.fill(typed)
        number.press("Tab")
        pg.wait_for_function(f"document.querySelector('#summary textarea').value.includes('{expect}')",
                             timeout=WAIT_MS)
        _no_error_badges(pg)
    number.fill("2")
    number.press("Enter")
    pg.wait_for_function("document.querySelector('#summary textarea').value.includes('Step 2 of')", timeout=WAIT_MS)
    tok = pg.locator("#canvas .tok.new").first
    tok.click()
    assert "◉ position " in pg.locator("#token-detail .s2d2-detail").inner_text()  # (the server's words may be first)
    # the line for the server's sentence is there from the click on ('…' until it comes), so nothing jumps then
    assert pg.locator("#token-detail [data-pinned] .words").count() == 1
    pg.wait_for_function("document.querySelector('#mask .gtitle') && "
                         "document.querySelector('#mask .gtitle').textContent.includes('outlined: position')",
                         timeout=WAIT_MS)
    pg.locator("body").click(position={"x": 5, "y": 5})
    pg.keyboard.press("ArrowRight")
    pg.wait_for_function("document.querySelector('#summary textarea').value.includes('Step 3 of')", timeout=WAIT_MS)
    pg.keyboard.press("ArrowLeft")
    pg.wait_for_function("document.querySelector('#summary textarea').value.includes('Step 2 of')", timeout=WAIT_MS)
    for _ in range(2):  # presses faster than a server round trip: none is dropped (row 14)
        pg.keyboard.press("ArrowLeft")
    pg.wait_for_function("document.querySelector('#summary textarea').value.startsWith('Start')", timeout=WAIT_MS)
    number.fill("2.5")  # a typed half step snaps to a step in the box too
    number.press("Tab")
    pg.wait_for_function("document.querySelector('#summary textarea').value.includes('Step 3 of')", timeout=WAIT_MS)
    assert number.input_value() == "3"
    pg.get_by_text("q (verifier)").click()
    pg.wait_for_function("document.querySelector('#legend').innerText.includes('background = q')", timeout=WAIT_MS)
    pg.get_by_text("state", exact=True).click()
    pg.get_by_role("tab", name="Metrics & about").click()
    _plots_mounted(pg, ".js-plotly-plot", 6)
    assert "what it means" in pg.locator("#metrics").inner_text()
    assert not errors, errors


def _wait_heading(pg, heading: str, same: bool = True) -> None:
    """Wait until the visible tour heading is (or, same=False, is no longer) `heading`."""
    op = "===" if same else "!=="
    pg.wait_for_function(f"[...document.querySelectorAll('#tour .prose.tour-text h3')].filter(e => e.offsetParent)"
                         f".map(e => e.innerText).join() {op} {heading!r}", timeout=WAIT_MS)


STRIP_COL_IN_VIEW = """() => {
      const wrap = document.querySelector('#tour-strip .tbl'), col = wrap && wrap.querySelector('th[data-watch]');
      if (!col) return false;
      const w = wrap.getBoundingClientRect(), r = col.getBoundingClientRect();
      const sticky = wrap.querySelector('th[scope=row]').getBoundingClientRect().width;
      return r.left >= w.left + sticky - 1 && r.right <= w.right + 1;
    }"""


def _strip_col_in_view(pg) -> bool:
    """Is the tour strip's outlined column inside its sideways-scrolling box (right of the sticky row labels)?"""
    return pg.evaluate(STRIP_COL_IN_VIEW)


@pytest.mark.parametrize("size", ["desktop", "phone"])
def test_tour_changes_in_place_and_its_route_control_redecides(browser, served, size):  # noqa: F811
    """Walk the tour at 1366×900 and 390×844: one strip element whose content grows stop by stop, the outlined
    column scrolled into view, the τ_score control re-deciding the plot, Show in Replay at the stop's step."""
    phone = size == "phone"
    pg, errors = open_app(browser, served[1], PHONE if phone else DESKTOP)
    try:
        show_numbers(pg)
        pg.get_by_role("tab", name="Learn").click()
        tour = pg.locator("#tour")
        tour.locator(".prose.tour-text:visible").wait_for(timeout=WAIT_MS)
        headings, keys = [], []
        while True:
            text = tour.locator(".prose.tour-text:visible")
            headings.append(text.locator("h3").inner_text())
            keys.append(next(k for k in STOP_KEYS if tour.locator(f".tour-{k}").is_visible()))
            if keys[-1] == "draft":
                assert pg.locator("#tour-canvas .s2d2-canvas .st-drafted").count() > 1
                assert pg.locator("#tour-canvas .s2d2-canvas .st-resampled").count() == 0
            if keys[-1] == "route" and SHIPPED_PAIR:
                # the stop's own views first (they come after its heading, and a τ typed before they land is drawn
                # over by them: the plot would show the old τ under the new box on a slow server)
                pg.wait_for_function("(() => { const t = document.querySelector('#tour-routing .gtitle'); "
                                     "return t !== null && t.closest('#tour-routing').offsetParent !== null; })()",
                                     timeout=WAIT_MS)
                box = pg.locator("#tour-tau input[type=number]")
                box.fill("0.5")
                box.press("Enter")
                pg.wait_for_function("document.querySelector('#tour-route-note').innerText.includes('instead of "
                                     "skip')", timeout=WAIT_MS)
                pg.wait_for_function("document.querySelector('#tour-routing .gtitle') && document.querySelector("
                                     "'#tour-routing .gtitle').textContent.includes('τ_score = 0.5')", timeout=WAIT_MS)
                _no_error_badges(pg)
            if keys[-1] == "verify":
                strip = pg.locator("#tour-strip").inner_text()
                assert "q(x₀)" in strip and "reject" not in strip and "discarded" not in strip
                pg.evaluate("document.querySelector('#tour-strip').dataset.probe = 'same element'")
                pg.wait_for_function("document.querySelector('#tour-mask .gtitle') && document.querySelector("
                                     "'#tour-mask .gtitle').textContent.includes('the MASK copy of position')",
                                     timeout=WAIT_MS)
            if keys[-1] == "reject":  # the same strip element, now with the test, scrolled to the rejected column
                pg.wait_for_function("document.querySelector('#tour-strip').innerText.includes('✗ reject')",
                                     timeout=WAIT_MS)
                assert pg.evaluate("document.querySelector('#tour-strip').dataset.probe") == "same element"
                assert "↻" not in pg.locator("#tour-strip").inner_text()
                pg.wait_for_function("(() => { const c = document.querySelector('#tour-strip th[data-watch]'); "
                                     "return c && c.classList.contains('first-reject'); })()", timeout=WAIT_MS)
                pg.wait_for_function(STRIP_COL_IN_VIEW, timeout=WAIT_MS)  # it scrolls there (maybe smoothly)
                assert _strip_col_in_view(pg)
            if keys[-1] == "resample":  # the stop's pictures arrive after its heading: wait for them under load
                pg.wait_for_function("document.querySelectorAll('#tour-canvas .st-resampled.new').length === 1 && "
                                     "document.querySelector('#tour-residual .rs-tbl') !== null", timeout=WAIT_MS)
                assert "↻" in pg.locator("#tour-strip").inner_text() and pg.locator("#tour-residual .rs-tbl").count()
                if not phone:
                    screenshot(pg, "screenshot-tour.png")
            if keys[-1] == "pipeline":  # several blocks outlined at once, and their lives over the run
                pg.wait_for_function("document.querySelectorAll('#tour-canvas [data-block]').length >= 2",
                                     timeout=WAIT_MS)
                pg.locator("#tour-lifecycle .js-plotly-plot").wait_for(timeout=WAIT_MS)
            if keys[-1] == "run" and SHIPPED_PAIR:
                before = pg.locator("#tour-lockstep .s2d2-lockstep").get_attribute("data-moment")
                assert pg.locator("#tour-lockstep [data-watch]").count() == 2  # the parting token, both runs
                box = pg.locator("#tour-moment input[type=number]")
                box.fill("0")
                box.press("Enter")
                pg.wait_for_function("document.querySelector('#tour-lockstep .s2d2-lockstep').dataset.moment === '0'",
                                     timeout=WAIT_MS)
                assert before != "0" and pg.locator("#tour-lockstep [data-watch]").count() == 0
            if phone:  # no stop's pictures widen the page (wide tables scroll inside their own box)
                assert pg.evaluate("document.documentElement.scrollWidth") <= PHONE["width"], keys[-1]
            nxt = pg.locator("#tour-next")
            if not nxt.is_enabled():
                break
            nxt.click()
            _wait_heading(pg, headings[-1], same=False)
        assert [h.split(" · ")[0] for h in headings] == [str(i + 1) for i in range(len(headings))]
        if SHIPPED_PAIR:
            assert keys == list(STOP_KEYS)
        pg.locator("#tour-back").click()
        _wait_heading(pg, headings[-2])
        show = pg.locator("#tour-show")
        pg.wait_for_function("!document.querySelector('#tour-next').disabled", timeout=WAIT_MS)  # the stop's views came
        step = show.inner_text().split()[2]  # "Show step N in Replay": the stop's own trace at that step
        show.click()
        pg.locator("#canvas").wait_for(state="visible", timeout=WAIT_MS)
        pg.wait_for_function(f"document.querySelector('#summary textarea').value.includes('Step {step} of')",
                             timeout=WAIT_MS)
        if phone:
            assert pg.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
        assert not errors, errors
    finally:
        pg.close()


def _wait_replay_shows_run(pg, headline: str) -> None:
    """After a run the Replay tab opens on it, its one-line story above the canvas."""
    pg.wait_for_function(f"document.querySelector('#headline').innerText.startsWith({headline!r})", timeout=WAIT_MS)
    pg.locator("#canvas").wait_for(state="visible", timeout=WAIT_MS)


def test_run_shows_few_knobs_and_stop_keeps_the_partial_trace(desktop):
    pg, errors = desktop
    pg.get_by_role("tab", name="Run", exact=True).click()
    settings = pg.locator("#run-settings")
    visible = settings.locator("[id^=knob-]:visible")
    assert 0 < visible.count() <= 8
    assert pg.locator("#advanced [id^=knob-]:visible").count() == 0  # Advanced is closed
    assert pg.locator("#preset input").input_value().startswith("Verify when it expects a gain")
    box = pg.locator("#model input")
    box.fill(SLOW_MODEL)
    box.press("Enter")
    gen = pg.locator("#knob-gen_length input[type=number]")
    gen.fill("400")  # the random model's context is 512 positions
    gen.press("Tab")
    pg.get_by_role("button", name="▶ Record a run").click()
    pg.wait_for_function("['Decoding', '⚠'].some(s => document.querySelector('#run-status').innerText.includes(s))",
                         timeout=WAIT_MS)
    assert "Decoding" in pg.locator("#run-status").inner_text()
    pg.get_by_role("button", name="■ Stop").click()
    pg.wait_for_function("document.querySelector('#run-status').innerText.includes('Stopped — partial trace kept')",
                         timeout=WAIT_MS)
    # a late progress update must never overwrite the final line: once the server holds no job and no decode,
    # every message of the run has been sent, and the page, which applies them in order, has shown them all
    import threading
    import time

    from components.serve import gpu_slot

    def idle() -> bool:
        return gpu_slot.JOBS.active() == 0 and not any(t.name == "s2d2-record" for t in threading.enumerate())

    deadline = time.monotonic() + 60  # a bound on a hang only
    while not idle() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert idle(), "the stopped run still holds its job"
    _wait_replay_shows_run(pg, "Stopped — partial trace")
    painted(pg)
    assert "Stopped — partial trace kept" in pg.locator("#run-status").inner_text()
    pg.get_by_role("tab", name="Run", exact=True).click()
    model = "tiny" if (ROOT / "assets" / "tiny").exists() else RANDOM_MODEL
    box.fill(model)
    box.press("Enter")
    gen.fill("32")
    gen.press("Tab")
    pg.locator("#prompt textarea").fill("2+3=")
    pg.get_by_role("button", name="▶ Record a run").click()
    pg.wait_for_function("document.querySelector('#run-status').innerText.includes('Done')", timeout=WAIT_MS)
    _wait_replay_shows_run(pg, "S2D2 answered")
    assert pg.locator("#example input").input_value() == ""  # no stale example name after a run
    pg.locator("#files").get_by_text("This trace: details").click()
    assert "measured trace" in pg.locator("#trace-title").inner_text()
    assert "run just recorded" in pg.locator("#load-status").inner_text()
    assert not errors, errors


def test_each_upload_replaces_the_last_message(desktop, tmp_path):
    """A results file on the trace box says which box takes it; a PNG after it gets its own message, no toast
    (row 11)."""
    pg, errors = desktop
    pg.get_by_role("tab", name="Replay", exact=True).click()
    pg.locator("#files").get_by_text("This trace: details").click()
    results = tmp_path / "results.json"
    results.write_text('{"version": 1, "meta": {}, "cells": []}')
    png = tmp_path / "picture.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)))
    box = pg.locator("#files input[type=file]").first
    box.set_input_files(str(results))
    pg.wait_for_function("document.querySelector('#load-status').innerText.includes('Sweep tab')", timeout=WAIT_MS)
    box.set_input_files(str(png))
    pg.wait_for_function("document.querySelector('#load-status').innerText.includes('picture.png')", timeout=WAIT_MS)
    assert "Sweep tab" not in pg.locator("#load-status").inner_text()
    _no_error_badges(pg)
    assert not errors, errors


LLADA2_EXAMPLE = "Editing fixes a wrong digit · LLaDA2"


def test_llada2_example_shows_its_edit_and_run_offers_the_editing_knobs(desktop):
    """The LLaDA2 example opens on the step where the model edits a digit it decoded (old token struck through, in
    the legend); picking the LLaDA2 model in Run switches to S2D2 with self-correction and shows τ_edit."""
    pg, errors = desktop
    show_numbers(pg)
    if not (ROOT / "assets" / "traces" / "08-editing-fixes-a-wrong-digit--LLaDA2.json").exists():
        pytest.skip("no shipped LLaDA2 example trace")
    pg.get_by_role("tab", name="Replay", exact=True).click()
    pg.locator("#example input").click()
    pg.get_by_role("option", name=LLADA2_EXAMPLE).click()
    pg.wait_for_function("document.querySelector('#headline').innerText.includes('corrected itself')", timeout=WAIT_MS)
    edited = pg.locator("#canvas .st-edited.new")
    assert edited.count() == 1 and edited.locator("s").inner_text() == "2" and "1" in edited.inner_text()
    assert "edited (self-correction)" in pg.locator("#legend").inner_text()
    assert "1 edited ('2' → '1')" in _summary(pg)
    _no_error_badges(pg)
    if (ROOT / "assets" / "tiny-llada2").exists():
        pg.get_by_role("tab", name="Run", exact=True).click()
        pg.locator("#model input").click()
        pg.get_by_role("option", name="tiny-llada2").click()
        pg.wait_for_function("document.querySelector('#preset input').value.includes('edits at p > 0.5')",
                             timeout=WAIT_MS)
        assert pg.locator("#knob-editing_threshold").is_visible()
        assert 0 < pg.locator("#run-settings [id^=knob-]:visible").count() <= 8
        assert pg.locator("#knob-kv_reuse").count() == 0 or not pg.locator("#knob-kv_reuse").is_visible()
    assert not errors, errors


PIPELINE_EXAMPLE = "Pipeline · blocks in flight · D2F"


def test_pipeline_example_shows_several_blocks_in_flight(desktop):
    """The D2F example replays with several blocks outlined at once, each tagged with its state, and the mask viewer
    draws D2F's block-causal mask; docs/screenshot-pipeline.png is that view."""
    pg, errors = desktop
    path = ROOT / "assets" / "traces" / "10-pipeline--blocks-in-flight--D2F.json"
    if not path.exists():
        pytest.skip("no shipped pipeline example trace")
    import s2d2

    trace = s2d2.Trace.from_json(path.read_text())
    step = 1 + max(range(len(trace.steps)), key=lambda i: len(trace.steps[i].in_flight))
    pg.get_by_role("tab", name="Replay", exact=True).click()
    show_numbers(pg)
    pg.locator("#example input").click()
    pg.get_by_role("option", name=PIPELINE_EXAMPLE).click()
    pg.wait_for_function("document.querySelector('#headline').innerText.includes('D2F alone')", timeout=WAIT_MS)
    number = pg.locator("#step-slider input[type=number]")
    number.fill(str(step))
    number.press("Enter")
    pg.wait_for_function(f"document.querySelector('#summary textarea').value.includes('Step {step} of')",
                         timeout=WAIT_MS)
    pg.wait_for_function("document.querySelectorAll('#canvas [data-block]').length >= 3", timeout=WAIT_MS)
    assert pg.locator("#canvas .blk-tag").count() >= 3 and "joined at step" in pg.locator("#canvas").inner_text()
    assert "blocks in flight" in pg.locator("#legend").inner_text()
    pg.get_by_role("radio", name="draft", exact=True).check()  # the step's draft forward, not its verifier
    pg.wait_for_function("document.querySelector('#mask .gtitle') && "
                         "document.querySelector('#mask .gtitle').textContent.includes('D2F')", timeout=WAIT_MS)
    _no_error_badges(pg)
    pg.locator("#canvas").screenshot(path=str(shot_path("screenshot-pipeline.png")))
    assert not errors, errors


def test_phone_layout(browser, served):  # noqa: F811
    pg, errors = open_app(browser, served[1], PHONE)
    try:
        if SHIPPED_PAIR:
            assert pg.locator("#canvas .st-resampled.new").count() == 1 and "✗" in pg.locator("#headline").inner_text()
        _plots_mounted(pg, "#routing .js-plotly-plot", 1)
        assert pg.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]  # nothing overflows the page
        strip = pg.locator("#strip .s2d2-strip .tbl")
        assert pg.evaluate("(e) => getComputedStyle(e).overflowX", strip.element_handle()) == "auto"
        bar = pg.locator("#step-slider").bounding_box()
        for button in ("#prev-btn", "#next-btn"):
            box = pg.locator(button).bounding_box()
            middle = box["y"] + box["height"] / 2
            assert bar["y"] <= middle <= bar["y"] + bar["height"], f"the scrubber wraps at {button}"
            assert box["height"] >= 44 and box["width"] >= 44, (button, box)  # a finger's reach (walk: 44 x 26)
        assert pg.locator("#routing .modebar-container:visible").count() == 0
        if SHIPPED_PAIR:  # the first screen: the story, the canvas around the rejected token and its evidence (row 2)
            pg.evaluate("window.scrollTo(0, 0)")
            rejected = pg.locator("#canvas .st-resampled.new")
            for part in (pg.locator("#headline"), rejected, pg.locator("#token-detail .evidence")):
                box = part.bounding_box()
                assert box["y"] >= 0 and box["y"] + box["height"] <= PHONE["height"], box
            assert "q = " in pg.locator("#token-detail .evidence details.numbers").text_content()  # one tap away
            # the strip opens scrolled to the column its text names
            col = pg.locator("#strip th.first-reject").bounding_box()
            tbl = strip.bounding_box()
            assert tbl["x"] <= col["x"] and col["x"] + col["width"] <= tbl["x"] + tbl["width"]
        screenshot(pg, "screenshot-phone.png")
        pg.get_by_role("tab", name="Learn").click()
        pg.locator("#tour .prose.tour-text:visible").wait_for(timeout=WAIT_MS)
        assert "tap" in pg.locator("#tour .prose.tour-text:visible").inner_text().lower()
        for button in ("#tour-back", "#tour-next"):
            assert pg.locator(button).bounding_box()["height"] >= 44, button
        assert not errors, errors
    finally:
        pg.close()
