"""Share a moment, in a real browser (Debian Chromium via Playwright):

- the exported HTML replay opened from a file:// URL at 1366×900 and 390×844: its slider, ◀ ▶ and arrow keys move
  the canvas to the right tokens (the app's states and text for that step), with no console error and no request
  beyond the file itself; a hostile trace's page runs nothing and draws no element from the trace;
- the app opened by a link lands on the example, run and step it names; "Copy link to this moment" gives that link;
  a hostile link is ignored with one line and no error badge; the HTML replay downloads and opens offline.

Skips when Playwright or /usr/bin/chromium is missing.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent.parent
ROOT = HERE.parent

from tests.support.browser_env import DESKTOP, PHONE, WAIT_MS, require_browser, show_numbers

require_browser()
pytestmark = pytest.mark.browser  # drives Chromium: left out by -m "not browser"

from fixtures import trace_factory as tf
from tests.support.html_replay import hostile_trace, text_content, token_classes
from tests.support.app_server import served

from components.files import html_replay as he
from components.files.examples import list_examples, load_pair
from components.views.step_views import render_step
from components.replay.share_row import COPY_LABEL, MAKE_LABEL
from components.files.traces import load_example

ASSETS = ROOT / "assets" / "traces"
EXAMPLES = list_examples(ASSETS)
PAIR = next((ex for ex in EXAMPLES.values() if ex.baseline is not None), None)
TOKENS_JS = "[...document.querySelectorAll('#canvas [data-pos]')].map(e => [Number(e.dataset.pos), e.className])"


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    """Exported replays: the opening example's S2D2 run (or a synthetic one), and a trace of hostile strings."""
    out = tmp_path_factory.mktemp("replays")
    trace = load_pair(PAIR)[0] if PAIR else tf.mixed()
    files = {}
    for name, t in (("example", trace), ("hostile", hostile_trace())):
        files[name] = (out / f"{name}.html", t)
        he.write_replay(t, files[name][0], start=0)
    return files


def _open_file(browser, path: Path, viewport: dict):
    phone = viewport is PHONE
    pg = browser.new_page(viewport=viewport, is_mobile=phone, has_touch=phone)
    problems: list[str] = []
    pg.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    pg.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type in ("error", "warning")
          else None)
    pg.on("dialog", lambda d: (problems.append(f"dialog: {d.message}"), d.dismiss()))
    url = path.as_uri()
    pg.on("request", lambda r: problems.append(f"request: {r.url}") if r.url.split("#")[0] != url else None)
    pg.goto(url)
    pg.wait_for_selector("#canvas .s2d2-canvas")
    return pg, problems


def _expect_step(pg, trace, step: int) -> None:
    """The page shows step `step`: its label, and the app's canvas tokens (position, state classes, text)."""
    pg.wait_for_function(f"document.getElementById('step-label').textContent === 'Step {step} of {len(trace.steps)}'",
                         timeout=WAIT_MS)
    views = render_step(trace, step)
    assert [tuple(t) for t in pg.evaluate(TOKENS_JS)] == token_classes(views["canvas"])
    assert pg.locator("#canvas").text_content() == text_content(views["canvas"])
    assert pg.locator("#summary").text_content() == views["summary"]
    assert pg.locator("#strip").text_content() == text_content(views["strip"])
    assert pg.locator("#step").input_value() == str(step)


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_the_exported_replay_scrubs_offline(browser, pages, viewport, tmp_path):
    path, trace = pages["example"]
    pg, problems = _open_file(browser, path, viewport)
    n = len(trace.steps)
    _expect_step(pg, trace, 0)
    pg.locator("#step").fill(str(min(2, n)))  # the slider
    _expect_step(pg, trace, min(2, n))
    pg.locator("#step").focus()
    pg.keyboard.press("ArrowLeft")  # the focused slider steps itself
    _expect_step(pg, trace, min(2, n) - 1)
    pg.locator("#summary").click()
    for key, expect in (("ArrowRight", min(2, n)), ("ArrowRight", min(3, n)), ("End", n), ("ArrowRight", n),
                        ("Home", 0), ("ArrowLeft", 0)):
        pg.keyboard.press(key)
        _expect_step(pg, trace, expect)
    pg.locator("#next").click()
    _expect_step(pg, trace, 1)
    pg.locator("#prev").click()
    _expect_step(pg, trace, 0)
    assert pg.locator("#prev").is_disabled()
    pg.locator("#step").fill(str(n))
    tok = pg.locator("#canvas .tok.new").first
    tok.click()
    assert pg.locator("#detail").text_content() == tok.get_attribute("title")
    if viewport is PHONE:  # the page never scrolls sideways; the scrubber and the canvas are on the first screen
        assert pg.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
        pg.evaluate("window.scrollTo(0, 0)")
        for sel in ("#step", "#canvas"):
            assert pg.locator(sel).bounding_box()["y"] < PHONE["height"], sel
    pg.screenshot(path=str(tmp_path / "replay.png"), full_page=True)
    assert not problems, problems
    pg.close()


def test_a_step_in_the_fragment_opens_that_step(browser, pages):
    path, trace = pages["example"]
    pg = browser.new_page(viewport=DESKTOP)
    pg.goto(path.as_uri() + "#step=1")
    _expect_step(pg, trace, 1)
    pg.close()


def test_a_hostile_traces_replay_runs_nothing_and_draws_nothing_from_the_trace(browser, pages):
    path, trace = pages["hostile"]
    pg, problems = _open_file(browser, path, DESKTOP)
    for step in range(len(trace.steps) + 1):
        pg.locator("#step").fill(str(step))
        _expect_step(pg, trace, step)
        pg.locator("#canvas .tok").first.hover()
        assert pg.evaluate("document.querySelectorAll('img, svg, iframe, object, embed, script').length") == 2
        assert pg.evaluate("window.__pwned") is None
    assert "</script><img" in pg.locator("h1").text_content()  # the model name, as text
    assert not problems, problems
    pg.close()


# -- the app: a link opens a moment; the link of the moment on screen; the HTML replay download ---------------------

@pytest.mark.skipif(PAIR is None, reason="needs the shipped example pair")
def test_a_link_opens_the_app_on_its_moment_and_copy_link_gives_it_back(browser, served):  # noqa: F811
    from components.replay.share_links import example_slug

    _, url = served
    query = f"?example={example_slug(PAIR)}&run=baseline&step=3"
    ctx = browser.new_context(viewport=DESKTOP)
    ctx.grant_permissions(["clipboard-read", "clipboard-write"], origin=url.rstrip("/"))
    pg = ctx.new_page()
    errors: list[str] = []
    pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    pg.goto(url + query)
    pg.wait_for_selector("#canvas .s2d2-canvas", timeout=WAIT_MS)
    show_numbers(pg)
    pg.wait_for_function("document.querySelector('#summary textarea').value.includes('Step 3 of')", timeout=WAIT_MS)
    assert "never verifies" in pg.locator("#summary textarea").input_value()
    pg.wait_for_function("(document.querySelector('#run-toggle input[type=radio]:checked') || {value: ''})"
                         ".value.startsWith('Diffusion alone')", timeout=WAIT_MS)  # its own component: wait on it
    assert not pg.locator("#share-note").is_visible()
    pg.get_by_role("button", name=COPY_LABEL).click()
    pg.wait_for_function("document.querySelector('#share-link textarea') && "
                         "document.querySelector('#share-link textarea').value.startsWith('http')", timeout=WAIT_MS)
    assert pg.locator("#share-link textarea").input_value() == url + query
    assert pg.evaluate("navigator.clipboard.readText()") == url + query
    assert pg.locator("#share-status").inner_text().startswith("Copied to the clipboard")
    pg.get_by_role("button", name=MAKE_LABEL).click()
    button = pg.locator("#html-file")
    button.wait_for(state="visible", timeout=WAIT_MS)
    with pg.expect_download() as dl:
        button.click()
    saved = Path(os.environ.get("GRADIO_TEMP_DIR", "/tmp")) / "downloaded-replay.html"
    dl.value.save_as(saved)
    baseline = load_pair(PAIR)[1]
    assert saved.read_text(encoding="utf-8") == he.replay_html(baseline, 3).html
    assert not errors, errors
    ctx.close()


def test_a_hostile_link_is_ignored_in_one_line_with_no_error_badge(browser, served):  # noqa: F811
    _, url = served
    pg = browser.new_page(viewport=PHONE, is_mobile=True, has_touch=True)
    errors: list[str] = []
    pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    pg.goto(url + "?example=..%2F..%2Fetc%2Fpasswd&run=%3Cscript%3Ealert(1)%3C%2Fscript%3E&step=1e9")
    note = pg.locator("#share-note")
    note.wait_for(state="visible", timeout=WAIT_MS)
    text = note.inner_text()
    assert text.startswith("⚠ Part of this link was ignored:") and "is not one of the shipped examples" in text
    assert pg.locator("#share-note script, #share-note img").count() == 0
    assert pg.locator(".toast-body").count() == 0
    assert pg.locator("[data-testid='status-tracker'].error, .error-message").count() == 0
    first = next(iter(list_examples(Path(os.environ.get("S2D2_EXAMPLE_TRACES", ASSETS))).values()), None)
    if first is not None:
        assert pg.locator("#example input").input_value() == first.label
    assert not errors, errors
    pg.close()


def test_the_share_controls_never_error_on_an_upload(browser, served, tmp_path):  # noqa: F811
    _, url = served
    pg = browser.new_page(viewport=DESKTOP)
    errors: list[str] = []
    pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    pg.goto(url)
    pg.wait_for_selector("#canvas .s2d2-canvas", timeout=WAIT_MS)
    path = tmp_path / "up.json"
    path.write_text(tf.mixed().to_json())
    pg.locator("#files").click()
    with pg.expect_file_chooser() as fc:
        pg.locator("#upload").click()
    fc.value.set_files(str(path))
    pg.wait_for_function("document.querySelector('#load-status').innerText.includes('uploaded trace')",
                         timeout=WAIT_MS)
    pg.get_by_role("button", name=COPY_LABEL).click()
    pg.wait_for_function("document.querySelector('#share-status').innerText.includes('shipped examples only')",
                         timeout=WAIT_MS)
    assert not pg.locator("#share-link").is_visible()
    pg.get_by_role("button", name=MAKE_LABEL).click()
    pg.locator("#html-file").wait_for(state="visible", timeout=WAIT_MS)
    assert pg.locator(".toast-body").count() == 0
    assert not errors, errors
    pg.close()


@pytest.mark.skipif(not any(ASSETS.glob("*.json")), reason="no shipped examples")
def test_shipped_example_pages_open_clean(browser, tmp_path):
    """Every shipped example's replay opens with no console error (the page script runs under its own CSP)."""
    for label, example in EXAMPLES.items():
        path = tmp_path / f"{example.path.stem}.html"
        he.write_replay(load_example(example.path), path)
        pg, problems = _open_file(browser, path, DESKTOP)
        pg.keyboard.press("End")
        assert not problems, (label, problems)
        pg.close()
