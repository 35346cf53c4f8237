"""Issue 28 row 6 in a real browser at 1366×900 and 390×844: the mask plot's title has its own room above the
heatmap; the routing plot's titles fit its width; the verification table's sticky row labels are opaque and cover
the columns scrolled under them; the pipeline chart keeps a label per block; on the tour's route stop the plot sits
right under the τ_score slider that drives it.

One launched app for the module (tests/support/app_server.py). Skips when Playwright or /usr/bin/chromium is
missing, or without the shipped example pair.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.browser_env import DESKTOP, PHONE, WAIT_MS, open_app, painted, require_browser

require_browser()

from tests.support.app_server import served  # noqa: E402,F401  (the fixture)

ROOT = Path(__file__).resolve().parents[2]
if not any((ROOT / "assets" / "traces").glob("*.baseline.json")):
    pytest.skip("no shipped example pair", allow_module_level=True)

SIZES = {"desktop": DESKTOP, "phone": PHONE}


# the tour stop on screen ("route"), or null while none is laid out
SHOWN_STOP = ("['draft', 'route', 'verify', 'reject', 'resample', 'skip', 'calibration', 'cost', 'exact', 'edit', "
              "'pipeline', 'run'].find(k => [...document.querySelectorAll('#tour .tour-' + k)]"
              ".some(e => e.offsetParent !== null)) ?? null")


def _open(browser, url: str, size: str):
    return open_app(browser, url, SIZES[size])


def _stop(pg, key: str) -> None:
    """Walk the tour (Next) to the stop `key`: after each click, wait until the stop on screen is another one."""
    for _ in range(14):
        if pg.locator(f"#tour .tour-{key}").is_visible():
            return
        shown = pg.evaluate(SHOWN_STOP)
        pg.locator("#tour-next").click()
        pg.wait_for_function(f"(() => {{ const s = {SHOWN_STOP}; return s !== null && s !== {shown!r}; }})()",
                             timeout=WAIT_MS)
    raise AssertionError(f"no tour stop {key}")


def _box(pg, selector: str):
    pg.wait_for_selector(selector, timeout=WAIT_MS)
    return pg.locator(selector).first.bounding_box()


@pytest.mark.parametrize("size", ["desktop", "phone"])
def test_plot_titles_fit_and_the_tau_slider_sits_by_its_plot(browser, served, size):  # noqa: F811
    pg, errors = _open(browser, served[1], size)
    try:
        width = SIZES[size]["width"]
        plot = _box(pg, "#routing .js-plotly-plot")  # Replay's routing plot: its titles within its width
        for i in range(pg.locator("#routing .infolayer .annotation").count()):
            a = pg.locator("#routing .infolayer .annotation").nth(i).bounding_box()
            assert plot["x"] - 1 <= a["x"] and a["x"] + a["width"] <= plot["x"] + plot["width"] + 1, (i, a, plot)
        pg.get_by_role("tab", name="Learn").click()
        pg.locator("#tour .prose.tour-text:visible").wait_for(timeout=WAIT_MS)
        _stop(pg, "route")
        tau = _box(pg, "#tour-tau")
        routing = _box(pg, "#tour-routing .js-plotly-plot")
        assert 0 <= routing["y"] - (tau["y"] + tau["height"]) <= 250, (tau, routing)  # was ~1,050 px on a phone
        _stop(pg, "verify")
        pg.wait_for_function("document.querySelector('#tour-mask .gtitle') && document.querySelector('#tour-mask "
                             ".gtitle').textContent.includes('MASK copy')", timeout=WAIT_MS)
        title = _box(pg, "#tour-mask .gtitle")
        heat = _box(pg, "#tour-mask .nsewdrag")
        assert title["y"] + title["height"] <= heat["y"], (title, heat)  # four lines above, not over, the top row
        assert title["x"] >= 0 and title["x"] + title["width"] <= width
        assert not errors, errors
    finally:
        pg.close()


def test_phone_strip_labels_cover_the_scrolled_columns(browser, served):  # noqa: F811
    pg, errors = _open(browser, served[1], "phone")
    try:
        tbl = pg.locator("#strip .s2d2-strip .tbl")
        tbl.scroll_into_view_if_needed()
        pg.evaluate("(e) => { e.scrollLeft = 0; e.scrollLeft = 160; }", tbl.element_handle())
        painted(pg)  # the scrolled frame is drawn
        frame = tbl.bounding_box()
        labels = pg.locator("#strip .s2d2-strip tr > th:first-child")
        assert labels.count() >= 3
        for i in range(labels.count()):
            th = labels.nth(i)
            box = th.bounding_box()
            assert abs(box["x"] - frame["x"]) <= 1, (i, box, frame)  # stuck to the left edge while scrolled
            bg = th.evaluate("e => getComputedStyle(e).backgroundColor")
            assert bg.startswith("rgb(") or bg.endswith(", 1)"), bg  # opaque
            # what the eye sees at the label's centre is the label, not a scrolled cell printed over it
            hit = pg.evaluate("([x, y]) => { const e = document.elementFromPoint(x, y); return e && "
                              "e.closest('tr > th:first-child') !== null; }",
                              [box["x"] + box["width"] / 2, box["y"] + box["height"] / 2])
            assert hit, i
        assert not errors, errors
    finally:
        pg.close()


def test_phone_pipeline_chart_keeps_a_label_per_block(browser, served):  # noqa: F811
    pg, errors = _open(browser, served[1], "phone")
    try:
        pg.get_by_role("tab", name="Learn").click()
        pg.locator("#tour .prose.tour-text:visible").wait_for(timeout=WAIT_MS)
        _stop(pg, "pipeline")
        chart = _box(pg, "#tour-lifecycle .js-plotly-plot")
        ticks = pg.locator("#tour-lifecycle .ytick text").evaluate_all("els => els.map(e => e.textContent)")
        assert len(ticks) >= 4 and ticks == [f"block {i + 1}" for i in range(len(ticks))], ticks
        boxes = [pg.locator("#tour-lifecycle .ytick text").nth(i).bounding_box() for i in range(len(ticks))]
        gaps = [b["y"] - a["y"] for a, b in zip(boxes, boxes[1:])]
        assert min(gaps) >= 28, gaps  # rows a finger can tell apart (they were about 17 px)
        title = _box(pg, "#tour-lifecycle .gtitle")
        assert chart["x"] <= title["x"] and title["x"] + title["width"] <= chart["x"] + chart["width"] + 1
        assert not errors, errors
    finally:
        pg.close()


# Issue 38 row 4: at the first frame painted with a stop's words, which pictures stand under them (DOM order =
# screen order), and whether the verification table already shows its test rows.
FIRST_FRAME = """([key, kinds]) => { window.s2d2FirstFrame = new Promise((done) => {
  const poll = () => {
    const words = [...document.querySelectorAll('#tour .tour-' + key)].some(e => e.offsetParent !== null);
    if (!words) { requestAnimationFrame(poll); return; }
    const shown = kinds.filter(k => {
      const e = document.getElementById('tour-' + k);
      return e && e.offsetParent !== null;
    });
    const strip = document.getElementById('tour-strip');
    done({shown, strip: strip && strip.offsetParent !== null ? strip.innerText : ''});
  };
  requestAnimationFrame(poll);
}); }"""


@pytest.mark.parametrize("size", ["desktop", "phone"])
def test_each_stop_arrives_with_the_pictures_its_words_name(browser, served, size):  # noqa: F811
    from components.tour.material import tour_stops
    from components.tour.stops import KINDS
    from tests.support.tour_material import opening_material

    stops = tour_stops(opening_material())
    pg, errors = _open(browser, served[1], size)
    try:
        pg.get_by_role("tab", name="Learn").click()
        pg.locator("#tour .prose.tour-text:visible").wait_for(timeout=WAIT_MS)
        for stop in stops[1:]:
            pg.evaluate(FIRST_FRAME, [stop.key, list(KINDS)])  # watching from before the press
            pg.locator("#tour-next").click()
            first = pg.evaluate("window.s2d2FirstFrame")
            assert first["shown"] == list(stop.kinds), (stop.key, first["shown"])  # not the last stop's pictures
            if stop.key == "reject":
                assert "draw u" in first["strip"] and "outcome" in first["strip"]  # the test rows the words name
        assert not errors, errors
    finally:
        pg.close()


TABLE = """(sel) => { const s = document.querySelector(sel); const t = s.querySelector('.tbl');
  const hint = s.querySelector('.s2d2-scroll');
  return {over: t.scrollWidth > t.clientWidth + 1, hint: !!hint && hint.offsetParent !== null,
          cols: s.querySelectorAll('thead tr:last-child th[scope=col]').length}; }"""


@pytest.mark.parametrize("size", ["desktop", "phone"])
def test_the_verification_table_fits_or_says_it_scrolls(browser, served, size):  # noqa: F811
    pg, errors = _open(browser, served[1], size)
    try:
        pg.wait_for_selector("#strip .s2d2-strip .tbl", timeout=WAIT_MS)
        tables = [pg.evaluate(TABLE, "#strip .s2d2-strip")]  # Replay's, at the opening step
        pg.get_by_role("tab", name="Learn").click()
        pg.locator("#tour .prose.tour-text:visible").wait_for(timeout=WAIT_MS)
        _stop(pg, "resample")
        pg.wait_for_selector("#tour-strip .s2d2-strip .tbl", timeout=WAIT_MS)
        tables.append(pg.evaluate(TABLE, "#tour-strip .s2d2-strip"))
        for t in tables:
            assert t["cols"] == 16 and t["hint"] == t["over"], t  # it scrolls only where it says so
            assert t["over"] == (size == "phone"), t  # all 16 columns fit at 1366 px
        assert not errors, errors
    finally:
        pg.close()


def test_a_token_tapped_in_the_tour_shows_its_details_on_a_phone(browser, served):  # noqa: F811
    """Stop 1 says "tap a token to see it": on a phone (no hover titles) the tap puts the token's details in a box
    under the canvas."""
    pg, errors = _open(browser, served[1], "phone")
    try:
        pg.get_by_role("tab", name="Learn").click()
        pg.locator("#tour .prose.tour-text:visible").wait_for(timeout=WAIT_MS)
        tok = pg.locator("#tour-canvas [data-pos][title]").last
        tok.wait_for(timeout=WAIT_MS)
        pos = tok.get_attribute("data-pos")
        tok.tap()
        box = pg.locator("#tour-canvas .tour-tap")
        box.wait_for(state="visible", timeout=WAIT_MS)
        assert box.inner_text().startswith(f"◉ position {pos}"), box.inner_text()
        assert box.bounding_box()["width"] <= 390, box.bounding_box()
        assert not errors, errors
    finally:
        pg.close()


def test_the_tour_counts_stops_not_steps_on_a_phone(browser, served):  # noqa: F811
    """Gradio heads the walkthrough on a narrow screen "Step 1/12: Draft", right above the decoding's own steps;
    the page says "Stop 1 of 12:", and keeps saying it as the stops advance."""
    pg, errors = _open(browser, served[1], "phone")
    try:
        pg.get_by_role("tab", name="Learn").click()
        pg.locator("#tour .prose.tour-text:visible").wait_for(timeout=WAIT_MS)
        said = "(t) => document.querySelector('#tour').innerText.includes(t)"
        pg.wait_for_function(said, arg="Stop 1 of ", timeout=WAIT_MS)
        pg.locator("#tour-next").click()
        pg.wait_for_function(said, arg="Stop 2 of ", timeout=WAIT_MS)
        assert "Step 1/" not in pg.locator("#tour").inner_text() and "Step 2/" not in pg.locator("#tour").inner_text()
        assert not errors, errors
    finally:
        pg.close()
