"""The Run's status shows one true line at each moment (newcomer walk, 2026-12): Record pressed says at once that the
run is on its way; a Run decoded in the page goes loading -> decoding -> checking -> done, never beside the server's
"Starting in your browser" line nor falling back to it; "now shows this run" only once Replay does. And the line under
the preset says what was changed from it (B = 1 after "block 4").

Every status the page shows is recorded in the page as it changes (a MutationObserver), with whether Replay was the
selected tab then; the test waits on the run's end, never on time."""
from __future__ import annotations

import re

import pytest

from components.run.run_choice import STARTING
from tests.support.app_server import served  # noqa: F401  (the fixture)
from tests.support.browser_env import DESKTOP, PHONE, WAIT_MS, open_app, record_ended, require_browser
from tests.support.page_run_page import require_page_decoding

require_browser()

# Record each status the visitor sees in #run-status (the page's line and Gradio's text, those shown; Gradio's
# timer is no status), and whether Replay was the selected tab, at the next frame after each change: as painted.
RECORD = """() => {
  window.s2d2Seen = [];
  const note = () => {
    const root = document.querySelector('#run-status');
    if (!root) return;
    const text = [...root.querySelectorAll('.s2d2-page-progress, [data-testid=markdown-wrapper]')]
      .filter(e => e.checkVisibility()).map(e => e.innerText.trim()).filter(Boolean).join(' | ');
    const tab = [...document.querySelectorAll('[role=tab]')].find(b => b.innerText.trim() === 'Replay');
    const replay = !!tab && tab.getAttribute('aria-selected') === 'true';
    const last = window.s2d2Seen[window.s2d2Seen.length - 1];
    if (!last || last[0] !== text || last[1] !== replay) window.s2d2Seen.push([text, replay]);
  };
  new MutationObserver(() => requestAnimationFrame(note)).observe(document.body, {subtree: true, childList: true, characterData: true,
    attributes: true});
  note();
}"""
REPLAY_OPEN = """() => { const t = [...document.querySelectorAll('[role=tab]')].find(b => b.innerText.trim() ===
  'Replay'); return !!t && t.getAttribute('aria-selected') === 'true'
  && document.querySelector('#run-status').innerText.includes('now shows this run'); }"""


def _record(pg, in_page: bool) -> list[tuple[str, bool]]:
    """Press Record on the Run tab and wait until Replay is open on the run; every status seen meanwhile."""
    pg.get_by_role("tab", name="Run", exact=True).click()
    box = pg.locator("#in-page input[type=checkbox]")
    box.check() if in_page else box.uncheck()
    pg.evaluate(RECORD)
    pg.locator("#run").click()
    pg.wait_for_function(REPLAY_OPEN, timeout=WAIT_MS)
    return [tuple(s) for s in pg.evaluate("window.s2d2Seen") if s[0]]  # none shown on Replay: the Run tab is hidden


def _one_status_each_time(seen: list[tuple[str, bool]]) -> None:
    for text, replay in seen:
        assert text.count(" | ") == 0, f"two statuses at once: {text!r}"  # one line (the status is one paragraph)
        assert "now shows this run" not in text or replay, f"said before Replay opened: {text!r}"
    first = seen[1][0]  # right after the click: the run is on its way (the server may not have started it yet)
    assert first.startswith("Record pressed: waiting for the server"), seen[:3]


@pytest.mark.parametrize("viewport", [PHONE, DESKTOP], ids=["phone", "desktop"])
def test_a_page_run_shows_loading_then_decoding_then_done_one_at_a_time(browser, served, viewport):  # noqa: F811
    require_page_decoding()
    pg, errors = open_app(browser, served[1], viewport)
    seen = _record(pg, in_page=True)
    _one_status_each_time(seen)
    texts = [t for t, _ in seen]
    decoding = [i for i, t in enumerate(texts) if t.startswith("Decoding in your browser")]
    assert decoding, texts
    assert not any(STARTING in t for t in texts[decoding[0]:]), texts  # never back to "loading" once decoding
    assert any(t.startswith("Decoded in your browser; the server is checking") for t in texts[decoding[-1]:]), texts
    assert texts[-1].startswith("✓ Done in your browser"), texts
    assert not errors, errors
    pg.close()


def test_a_server_run_says_at_once_it_is_on_its_way_and_opens_replay_before_saying_so(browser, served):  # noqa: F811
    pg, errors = open_app(browser, served[1], DESKTOP)
    seen = _record(pg, in_page=False)
    _one_status_each_time(seen)
    texts = [t for t, _ in seen]
    assert "Pick a prompt and a preset, then record a run." not in texts[1:], texts
    assert any("Opening it in the Replay tab…" in t for t, replay in seen if not replay), texts
    assert texts[-1].startswith("✓ Done in "), texts
    assert not errors, errors
    pg.close()


def test_the_line_under_the_preset_says_what_was_changed_from_it(browser, served):  # noqa: F811
    pg, errors = open_app(browser, served[1], DESKTOP)
    pg.get_by_role("tab", name="Run", exact=True).click()
    block = pg.locator("#knob-block_length input[type=number]")
    block.fill("1")
    block.press("Tab")
    pg.wait_for_function("document.querySelector('#preset-drift').innerText.includes('Block length B = 1')",
                         timeout=WAIT_MS)
    line = pg.locator("#preset-drift").inner_text()
    assert line.startswith("✎ Changed from the preset: Block length B = 1 (the preset's 4)."), line
    block.fill("4")  # back to the preset's value: the run is the preset again, the line goes
    block.press("Tab")
    pg.wait_for_function("document.querySelector('#preset-drift').innerText.trim() === ''", timeout=WAIT_MS)
    assert not errors, errors
    pg.close()


def test_a_refused_record_says_why_in_the_status_and_the_next_run_replaces_it(browser, served, monkeypatch):  # noqa: F811
    """Record's "waiting for the server" line stays only while the run may still start. A Record the server refuses at
    the door (here: the session already holds a decode; a visitor meets it pressing Record right after Stop) gets its
    reason in the status box, where the visitor looks (Gradio writes it under the prompt box, which may be scrolled
    away), one line at a time; a second refusal says it again; the next accepted run's statuses replace it."""
    from components.serve import gpu_slot

    pg, errors = open_app(browser, served[1], DESKTOP)
    pg.get_by_role("tab", name="Run", exact=True).click()
    pg.locator("#in-page input[type=checkbox]").uncheck()
    monkeypatch.setattr(gpu_slot.JOBS, "admit", lambda *a, **k: gpu_slot.BUSY)
    pg.evaluate(RECORD)
    said = f"() => document.querySelector('#run-status').innerText.trim().startsWith({'⚠ ' + gpu_slot.BUSY[:40]!r})"
    for _ in range(2):
        pg.locator("#run").click()
        pg.wait_for_function(said, timeout=WAIT_MS)
        record_ended(pg)
        seen = [t for t, _ in pg.evaluate("window.s2d2Seen") if t]
        assert seen[-2].startswith("Record pressed: waiting") and seen[-1].startswith("⚠ You already have a run"), seen
        # it stays until the next press, also once the other run has ended: it says when it was true
        assert re.search(r"\. \(Record pressed at \d\d:\d\d:\d\d\)$", seen[-1]), seen[-1]
        pg.evaluate("window.s2d2Seen = window.s2d2Seen.slice(-1)")  # (what shows now, then the next press's)
    monkeypatch.undo()
    pg.locator("#run").click()
    pg.wait_for_function(REPLAY_OPEN, timeout=WAIT_MS)
    seen = [tuple(s) for s in pg.evaluate("window.s2d2Seen") if s[0]]
    _one_status_each_time(seen)
    assert not any(t.startswith("⚠") for t, _ in seen[1:]), seen  # the refusal went at the next press
    pg.close()


def test_the_same_refusal_twice_is_said_twice_never_left_waiting(browser, served):  # noqa: F811
    """A second Record refused for the same reason (an empty prompt) writes the very status that was there: the waiting
    line goes when the event ends, not only when the text changes (newcomer walk: it stayed for good)."""
    pg, errors = open_app(browser, served[1], DESKTOP)
    pg.get_by_role("tab", name="Run", exact=True).click()
    pg.locator("#in-page input[type=checkbox]").uncheck()
    pg.locator("#prompt textarea").fill("")
    pg.evaluate(RECORD)
    refused = ("() => { const s = document.querySelector('#run-status'); return !s.querySelector('.s2d2-page-progress')"
               " && s.innerText.includes('Type a prompt first'); }")
    for _ in range(2):
        pg.locator("#run").click()
        pg.wait_for_function(refused, timeout=WAIT_MS)
        record_ended(pg)
    seen = [t for t, _ in pg.evaluate("window.s2d2Seen") if t]
    waits = [i for i, t in enumerate(seen) if t.startswith("Record pressed: waiting")]
    assert len(waits) == 2 and seen[-1].startswith("⚠ Type a prompt first"), seen  # both presses said, both ended
    assert not errors, errors
    pg.close()
