"""A newcomer's screens in Chromium at 1366×900 and 390×844 (issue "Teaching v3", rows 1-4): the first screen tells
the story in words with the glyph key beside the canvas and the numbers one tap away; the Run box says what the
bundled model knows and notices a prompt outside it; no typed value is changed or cut without a visible line; on a
phone the page follows the action (Record -> the status, the finished run and "Show in Replay" -> the headline).

docs/first-screen-desktop.png and docs/first-screen-phone.png are rewritten when S2D2_UPDATE_SCREENSHOT=1 (or when
missing): exactly what each viewport shows first.
"""
from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import pytest

from tests.support.browser_env import DESKTOP, PHONE, WAIT_MS, open_app, record_ended, require_browser, typed

sync_api = require_browser()

from tests.support.app_server import RANDOM_MODEL, SLOW_MODEL, served  # noqa: E402,F401

ROOT = Path(__file__).resolve().parents[2]
SHIPPED_PAIR = any((ROOT / "assets" / "traces").glob("*.baseline.json"))
# the Replay tab shows the run just recorded (a run's headline; the opening example's starts "Diffusion alone")
RUN_SHOWN = ("(() => { const h = document.querySelector('#headline'); return h && h.offsetParent !== null && "
             "h.innerText.startsWith('S2D2 answered'); })()")
SIZES = {"desktop": DESKTOP, "phone": PHONE}


def _open(browser, url: str, size: str):
    return open_app(browser, url, SIZES[size])


FIRST_ANSWER_MS = 30_000  # a press unanswered this long is pressed again, as a visitor would (never a pass by itself)


def _press_until_said(pg, words: str, errors: list) -> None:
    """Press Record and wait for `words` in its status. A press that gets no answer at all is pressed once more, as
    a visitor does, and what the page showed and sent for the first is reported as a warning (so it is seen in CI's
    summary, not lost); a second press that gets none fails, with both reports. Why: twice in CI the third press of
    the long-prompt test (a 2.5 seed) got no line in 180 s and the server held no job; never reproduced here
    (bisected over the suite's prefix and a full collection), cause unknown."""
    sent: list = []
    pg.on("request", lambda r: sent.append((r.post_data or "")[:200]) if "queue/join" in r.url else None)
    said = f"document.querySelector('#run-status').innerText.includes({words!r})"
    shown = """() => ({status: document.querySelector('#run-status')?.innerText.slice(0, 300),
      seed: document.querySelector('#knob-seed input')?.value,
      prompt: document.querySelector('#prompt textarea')?.value.slice(0, 40),
      toasts: [...document.querySelectorAll('.toast-body')].map(t => t.innerText)})"""
    reports = []
    for timeout in (FIRST_ANSWER_MS, WAIT_MS):
        pg.get_by_role("button", name="▶ Record a run").click()
        try:
            pg.wait_for_function(said, timeout=timeout)
            break
        except sync_api.TimeoutError:
            reports.append(f"shown {pg.evaluate(shown)}; sent {sent[-4:]}; console {errors}")
            record_ended(pg)
    else:
        raise AssertionError(f"Record never said {words!r}: " + " | then: ".join(reports))
    if reports:
        warnings.warn(f"Record's first press got no answer in {FIRST_ANSWER_MS // 1000} s: {reports[0]}")


def _in_view(pg, selector: str) -> bool:
    """Is the element laid out and wholly inside the viewport (vertically)?"""
    return pg.evaluate("""(sel) => {
      const el = document.querySelector(sel);
      if (!el || el.offsetParent === null) return false;
      const r = el.getBoundingClientRect();
      return r.height > 0 && r.top >= 0 && r.bottom <= window.innerHeight;
    }""", selector)


def _top_in_upper_third(selector: str) -> str:
    # -1: a scrolled element can sit a sub-pixel above the top
    return (f"(() => {{ const el = document.querySelector({selector!r}); if (!el || el.offsetParent === null) "
            f"return false; const t = el.getBoundingClientRect().top; return t >= -1 && t <= innerHeight / 3; }})()")


@pytest.mark.parametrize("size", ["desktop", "phone"])
def test_the_first_screen_speaks_words_first_with_the_key_beside_the_canvas(browser, served, size):  # noqa: F811
    pg, errors = _open(browser, served[1], size)
    try:
        pg.evaluate("window.scrollTo(0, 0)")
        assert _in_view(pg, "#legend .s2d2-legend"), "the glyph key is off the first screen"
        legend = pg.locator("#legend").bounding_box()
        assert legend["y"] < pg.locator("#canvas").bounding_box()["y"]  # just above the canvas
        assert "✓" in pg.locator("#legend").inner_text()
        # the body's font is the one the theme serves (components/theme.py), loaded: never Montserrat Alternates
        assert pg.evaluate("getComputedStyle(document.querySelector('#intro')).fontFamily").startswith('"IBM Plex Sans"')
        assert pg.evaluate("""document.fonts.ready.then(() => [...document.fonts].some(
            f => f.family.replace(/["']/g, '') === 'IBM Plex Sans' && f.status === 'loaded'))""")
        assert _in_view(pg, ".tour-pointer") and "Learn" in pg.locator(".tour-pointer").inner_text()
        for label, _, _ in served[0].TABS:  # every tab named on the first screen, none behind a "⋯" menu (phone:
            # two rows of tabs)
            assert pg.get_by_role("tab", name=label, exact=True).is_visible(), label
        assert pg.locator("#tabs .overflow-menu").count() == 0 or not pg.locator("#tabs .overflow-menu").is_visible()
        # what the models know, on the first screen (issue 38 row 1)
        assert _in_view(pg, "#intro .knows") and "Jane Austen" in pg.locator("#intro .knows").inner_text()
        if SHIPPED_PAIR:
            words = pg.locator("#token-detail .evidence .words")
            assert _in_view(pg, "#token-detail .evidence .words")
            text = words.inner_text()
            assert text.startswith("The model first guessed") and "picked" in text and "q =" not in text
            numbers = pg.locator("#token-detail details.numbers")
            assert numbers.get_attribute("open") is None and "q = " not in pg.locator("#token-detail").inner_text()
            numbers.locator("summary").click()  # one tap away
            assert "q = " in pg.locator("#token-detail").inner_text()
            step = pg.locator("#step-words").inner_text()
            assert step.startswith("This step.") and "guessed" in step and "K̂" not in step
            assert pg.locator("#summary textarea").is_hidden()  # the formula line is behind its accordion
            pg.locator("#step-numbers").get_by_text("This step in numbers").click()
            pg.locator("#summary textarea").wait_for(state="visible", timeout=WAIT_MS)
            assert "K̂" in pg.locator("#summary textarea").input_value()
        assert not errors, errors
        # The picture is of a fresh first screen: a new page, not a reload (a reload aborts this page's requests
        # still in flight, and on a busy machine the browser logs each as "Connection errored out").
        pg.close()
        pg, errors = _open(browser, served[1], size)
        pg.evaluate("window.scrollTo(0, 0)")
        pg.wait_for_timeout(300)  # a picture of a settled page, not a synchronisation
        name = f"first-screen-{size}.png"
        target = ROOT / "docs" / name
        if os.environ.get("S2D2_UPDATE_SCREENSHOT") == "1" or not target.exists():
            pg.screenshot(path=str(target), full_page=False)
        assert not errors, errors
    finally:
        pg.close()


def test_the_run_box_says_what_the_bundled_model_knows(browser, served):  # noqa: F811
    from components.run.knobs import EXAMPLE_PROMPTS
    from components.views.prompt_scope import fits

    pg, errors = _open(browser, served[1], "desktop")
    try:
        pg.get_by_role("tab", name="Run", exact=True).click()
        box = pg.locator("#prompt textarea")
        assert fits(box.input_value())  # the default prompt is one the bundled model knows
        assert "arithmetic word problems" in pg.locator("#prompt").inner_text()
        assert pg.locator("#prompt-scope").inner_text().strip() == ""
        box.fill("Write a haiku about the sea")
        box.blur()  # the line comes when the visitor leaves the box (or presses Enter)
        pg.wait_for_function("document.querySelector('#prompt-scope').innerText.includes('only knows')",
                             timeout=WAIT_MS)
        pg.get_by_text(EXAMPLE_PROMPTS[1][:30], exact=False).first.click()  # an example from the held-out set
        pg.wait_for_function("document.querySelector('#prompt-scope').innerText.trim() === ''", timeout=WAIT_MS)
        assert fits(box.input_value())
        assert not errors, errors
    finally:
        pg.close()


def _slider_boxes(pg) -> list[str]:
    """The names (aria-labels) of the visible number boxes that belong to a slider (a range input beside them): a
    box is found again by its name, since the page may re-render (and renumber) its inputs while a test types."""
    return pg.evaluate("""() => [...document.querySelectorAll('input[type=number]')]
      .filter(b => b.offsetParent !== null && b.closest('.head') && b.closest('.head').parentElement
        .querySelector(':scope > .slider_input_container input[type=range]')).map(b => b.getAttribute('aria-label'))""")


@pytest.mark.parametrize("tab", ["Replay", "Run", "Compare"])  # Learn's: test_the_learn_tau_box_…
def test_every_slider_box_shows_the_value_used_and_says_why(browser, served, tab):  # noqa: F811
    """Type a number above each visible slider's range: the box shows the largest value (the one the app uses) and a
    line under it says what was typed; a value back in range removes the line."""
    pg, errors = _open(browser, served[1], "desktop")
    try:
        pg.get_by_role("tab", name=tab, exact=True).click()
        pg.wait_for_function("[...document.querySelectorAll('input[type=range]')].some(r => r.offsetParent)",
                             timeout=WAIT_MS)
        if tab == "Run":  # and every knob behind Advanced
            pg.locator("#advanced").get_by_text("Advanced").click()
            pg.locator("#advanced input[type=range]").first.wait_for(timeout=WAIT_MS)
        boxes = _slider_boxes(pg)
        assert boxes, f"no slider in {tab}"
        for i, name in enumerate(boxes):
            box = pg.locator(f"input[type=number][aria-label={json.dumps(name, ensure_ascii=False)}]:visible").nth(boxes[:i].count(name))
            wrap = box.locator("xpath=ancestor::div[contains(@class,'head')][1]/..")
            hi = wrap.locator("input[type=range]").get_attribute("max")
            lo = wrap.locator("input[type=range]").get_attribute("min")
            typed = float(hi) + 100
            note = wrap.locator(".clamp-note")
            for attempt in range(3):  # the page's load event may re-render the slider under the first typing
                box.fill(f"{typed:g}")
                try:
                    # caught as typed, before Enter: Replay's Step snaps its own value at once, and a line checked only
                    # at the change event missed it (about 1 run in 7)
                    pg.wait_for_function("([b, hi]) => Number(b.value) === hi", arg=[box.element_handle(), float(hi)],
                                         timeout=WAIT_MS // 6)
                    box.press("Enter")
                    note.wait_for(state="visible", timeout=WAIT_MS // 6)
                    break
                except sync_api.TimeoutError:
                    if attempt == 2:
                        raise
            assert float(box.input_value()) == float(hi), (tab, i)
            assert note.inner_text() == f"{typed:g} is above the largest value, {float(hi):g}: set to {float(hi):g}, " \
                                        "the value used."
            box.fill(f"{float(lo):g}")  # a value in range: the line goes
            box.press("Enter")
            note.wait_for(state="detached", timeout=WAIT_MS)
            assert float(box.input_value()) == float(lo)
        assert not errors, errors
    finally:
        pg.close()


def test_a_slider_box_names_the_number_typed_key_by_key_and_says_when_it_was_left_empty(browser, served):  # noqa: F811
    """9999 typed key by key into Block length: the box is set to the largest value as the second 9 arrives, and
    the line names 9999 (it named "649": the keys after the clamp were appended to the value shown). A box left
    empty (or holding what is not a number) is set to the smallest value by Gradio; a line says so, and a line
    left from an earlier value goes."""
    pg, errors = _open(browser, served[1], "desktop")
    try:
        pg.get_by_role("tab", name="Run", exact=True).click()
        knob = pg.locator("#knob-block_length")
        box, bar = knob.locator("input[type=number]"), knob.locator("input[type=range]")
        note = knob.locator(".clamp-note")
        box.wait_for(timeout=WAIT_MS)
        lo, hi = (float(bar.get_attribute(k)) for k in ("min", "max"))
        box.click()
        box.press("Control+a")
        box.press("Backspace")
        box.press_sequentially("9999")
        box.press("Tab")
        note.wait_for(state="visible", timeout=WAIT_MS)
        assert note.inner_text() == f"9999 is above the largest value, {hi:g}: set to {hi:g}, the value used."
        assert float(box.input_value()) == hi
        box.click()
        box.press("Control+a")
        box.press("Backspace")
        box.press("Tab")
        pg.wait_for_function("n => n.textContent.startsWith('An empty box')", arg=note.element_handle(),
                             timeout=WAIT_MS)
        assert note.inner_text() == f"An empty box is not a number: set to {lo:g}, the value used."
        pg.wait_for_function("([b, r, lo]) => Number(b.value) === lo && Number(r.value) === lo",
                             arg=[box.element_handle(), bar.element_handle(), lo], timeout=WAIT_MS)
        assert not errors, errors
    finally:
        pg.close()


def test_the_learn_tau_box_drives_the_plot_with_the_value_it_shows(browser, served):  # noqa: F811
    """τ_score typed as 100 on the Route stop: the box shows the largest value, and the note under the plot reads
    the same value (the one the re-decided plot uses)."""
    pg, errors = _open(browser, served[1], "desktop")
    try:
        pg.get_by_role("tab", name="Learn").click()
        pg.locator("#tour .prose.tour-text:visible").wait_for(timeout=WAIT_MS)
        box = pg.locator("#tour-tau input[type=number]")
        for _ in range(12):
            if box.is_visible():
                break
            heading = pg.locator("#tour .prose.tour-text:visible h3").inner_text()
            pg.locator("#tour-next").click()
            pg.wait_for_function(f"[...document.querySelectorAll('#tour .prose.tour-text h3')].filter(e => "
                                 f"e.offsetParent).map(e => e.innerText).join() !== {heading!r}", timeout=WAIT_MS)
        if not box.is_visible():
            pytest.skip("no τ_score control in this tour (an example without a score-threshold run)")
        hi = float(pg.locator("#tour-tau input[type=range]").get_attribute("max"))
        box.fill("100")
        box.press("Enter")
        pg.locator("#tour-tau .clamp-note").wait_for(timeout=WAIT_MS)
        assert float(box.input_value()) == hi
        assert "100 is above the largest value" in pg.locator("#tour-tau .clamp-note").inner_text()
        pg.wait_for_function(f"document.querySelector('#tour-route-note').innerText.includes('τ_score = {hi:g}')",
                             timeout=WAIT_MS)
        assert not errors, errors
    finally:
        pg.close()


def test_a_long_prompt_is_refused_whole_and_a_refused_run_clears_the_last_output(browser, served):  # noqa: F811
    pg, errors = _open(browser, served[1], "desktop")
    try:
        pg.get_by_role("tab", name="Run", exact=True).click()
        model = pg.locator("#model input")
        model.fill(RANDOM_MODEL)
        model.press("Enter")
        gen = pg.locator("#knob-gen_length input[type=number]")
        gen.fill("8")
        gen.press("Enter")
        pg.get_by_role("button", name="▶ Record a run").click()
        pg.wait_for_function("document.querySelector('#run-status').innerText.includes('Done')", timeout=WAIT_MS)
        pg.wait_for_function(RUN_SHOWN, timeout=WAIT_MS)  # the Replay tab opened on it
        pg.get_by_role("tab", name="Run", exact=True).click()
        assert pg.locator("#live .tok").count() > 0
        box = pg.locator("#prompt textarea")
        box.fill("x" * 20_000)
        assert len(box.input_value()) == 20_000  # the box never cuts a pasted text
        assert "20,000 characters: a run takes at most 2,000" in pg.locator("#prompt .length-note").inner_text()
        pg.get_by_role("button", name="▶ Record a run").click()
        pg.wait_for_function("document.querySelector('#run-status').innerText.includes('longer than 2,000')",
                             timeout=WAIT_MS)
        assert "Nothing was cut" in pg.locator("#run-status").inner_text()
        record_ended(pg)  # before the next press (it would be dropped while this one finishes)
        assert pg.locator("#live .tok").count() == 0 and pg.locator("#output textarea").input_value() == ""
        box.fill("")
        assert pg.locator("#prompt .length-note").count() == 0
        pg.get_by_role("button", name="▶ Record a run").click()
        pg.wait_for_function("document.querySelector('#run-status').innerText.includes('Type a prompt')",
                             timeout=WAIT_MS)
        record_ended(pg)
        seed = pg.locator("#knob-seed input")
        if not seed.is_visible():  # the seed sits under Advanced
            pg.locator("#advanced").get_by_text("Advanced").click()
        box.fill("2+3=")
        typed(pg, seed, "2.5")
        _press_until_said(pg, "whole number", errors)
        assert seed.input_value() == "2.5"  # never rounded behind the visitor's back
        assert not errors, errors
    finally:
        pg.close()


@pytest.mark.parametrize("size", ["desktop", "phone"])
def test_the_page_follows_the_action(browser, served, size):  # noqa: F811
    """Record: the status comes into the upper third of the screen; the run's end: Replay at its headline with the
    canvas on screen; Learn's "Show in Replay": the same."""
    pg, errors = _open(browser, served[1], size)
    try:
        pg.get_by_role("tab", name="Run", exact=True).click()
        model = pg.locator("#model input")
        model.fill(SLOW_MODEL)  # 20 ms a forward: the run lasts long enough to be followed
        model.press("Enter")
        gen = pg.locator("#knob-gen_length input[type=number]")
        gen.fill("400")
        gen.press("Enter")
        record = pg.get_by_role("button", name="▶ Record a run")
        record.scroll_into_view_if_needed()
        record.click()
        pg.wait_for_function(_top_in_upper_third("#run-status"), timeout=WAIT_MS)
        pg.wait_for_function(RUN_SHOWN, timeout=WAIT_MS)  # the run ends on its own (about 12 s)
        pg.wait_for_function(_top_in_upper_third("#headline"), timeout=WAIT_MS)
        assert pg.evaluate("document.querySelector('#canvas').getBoundingClientRect().top < innerHeight")
        pg.get_by_role("tab", name="Learn").click()
        show = pg.locator("#tour-show")
        show.scroll_into_view_if_needed()
        show.click()
        pg.wait_for_function("document.querySelector('#headline').offsetParent !== null", timeout=WAIT_MS)
        pg.wait_for_function(_top_in_upper_third("#headline"), timeout=WAIT_MS)
        assert pg.evaluate("document.querySelector('#canvas').getBoundingClientRect().top < innerHeight")
        assert not errors, errors
    finally:
        pg.close()


def test_a_long_dropdown_choice_ends_in_an_ellipsis_clear_of_its_arrow_on_a_phone(browser, served):  # noqa: F811
    """The preset's words are longer than a phone's box: they end in "…" before the arrow, not under it."""
    pg, errors = _open(browser, served[1], "phone")
    try:
        pg.get_by_role("tab", name="Run", exact=True).click()
        pg.locator("#preset input").wait_for(timeout=WAIT_MS)
        got = pg.evaluate("""() => {
          const box = document.querySelector('#preset input'), arrow = document.querySelector('#preset .icon-wrap');
          const s = getComputedStyle(box), r = box.getBoundingClientRect(), a = arrow.getBoundingClientRect();
          return {ellipsis: s.textOverflow, clipped: box.scrollWidth > box.clientWidth,
                  textRight: r.right - parseFloat(s.paddingRight), arrowLeft: a.left};
        }""")
        assert got["clipped"] and got["ellipsis"] == "ellipsis", got
        assert got["textRight"] <= got["arrowLeft"] + 1, got
        assert not errors, errors
    finally:
        pg.close()
