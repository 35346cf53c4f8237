"""What every browser test shares: Debian's Chromium and its flags, the two viewports the app is judged at, and
the skip when Playwright or the browser is missing (`sync_api = require_browser()` at module level)."""
from __future__ import annotations

import os
from collections import deque
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = os.environ.get("S2D2_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--no-first-run", "--disable-sync"]
# How long a browser test waits for the event it waits on (a page drawn, a run done, a note shown). A wait ends as
# soon as its event happens, so a long limit costs a quiet machine nothing; it is long because a busy one (both
# cores held by other work) answers many times slower. S2D2_TEST_WAIT_SCALE stretches it further still.
WAIT_MS = int(180_000 * float(os.environ.get("S2D2_TEST_WAIT_SCALE", "1")))
DESKTOP = {"width": 1366, "height": 900}
PHONE = {"width": 390, "height": 844}
# What the pages of the running test were refused (a response of 400 or more) or never got (a failed request), and
# the pages themselves: a failed wait then says what happened instead (tests/browser/conftest.py adds it to the
# report). Cleared before each test.
NETWORK: deque = deque(maxlen=100)
PAGES: list = []


def require_browser() -> Any:
    """Playwright's sync API; skips the calling test module when Playwright or Chromium is missing."""
    sync_api = pytest.importorskip("playwright.sync_api")
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium)", allow_module_level=True)
    return sync_api


class PatientBrowser:
    """The launched Chromium, whose every new page and context waits up to WAIT_MS by default (Playwright's own
    default, 30 s, is what timed out on a machine with both cores busy)."""

    def __init__(self, browser: Any) -> None:
        self._browser = browser

    def __getattr__(self, name: str) -> Any:
        return getattr(self._browser, name)

    def new_page(self, **kwargs: Any) -> Any:
        page = self._browser.new_page(**kwargs)
        page.set_default_timeout(WAIT_MS)
        page.on("response", lambda r: NETWORK.append(f"{r.status} {r.request.method} {r.url}")
                if r.status >= 400 else None)
        page.on("requestfailed", lambda r: NETWORK.append(f"failed {r.method} {r.url}: {r.failure}"))
        PAGES.append(page)
        return page

    def new_context(self, **kwargs: Any) -> Any:
        context = self._browser.new_context(**kwargs)
        context.set_default_timeout(WAIT_MS)
        return context


def failure_story() -> str:
    """What the running test's pages were refused or never got, and the toasts its open pages show now."""
    lines = [f"refused or failed: {line}" for line in NETWORK]
    for page in PAGES:
        try:
            if not page.is_closed():
                toasts = page.evaluate("[...document.querySelectorAll('.toast-body')].map(t => t.innerText)")
                lines += [f"toast on {page.url}: {t}" for t in toasts]
        except Exception as exc:  # a page mid-navigation or crashed: say so, never hide the test's own failure
            lines.append(f"page {page.url} could not be read: {type(exc).__name__}")
    return "\n".join(lines) or "no request refused or failed, no toast shown"


def server_story(app: Any) -> str:
    """What the test's server holds now: each waiting line of its Gradio queue (events waiting, running, places),
    and the process-wide fairness state the next test's server inherits (the loopback unit's counted pages, decode
    jobs, the CPU share's recent total, events admitted but not yet queued). A wait that timed out then says
    whether its event was stuck in a line, refused, or done and never shown."""
    from components.serve.cpu_share import CPU_SHARE
    from components.serve.front_door import JOINING
    from components.serve.gpu_slot import JOBS
    from components.serve.roster import ROSTER

    lines = []
    queue = getattr(getattr(app, "demo", None), "_queue", None)
    for cid, line in dict(getattr(queue, "event_queue_per_concurrency_id", {})).items():
        if line.queue or line.current_concurrency:
            lines.append(f"queue {cid}: {len(line.queue)} waiting, {line.current_concurrency} running "
                         f"of {line.concurrency_limit}")
    if queue is not None:
        lines.append(f"workers busy: {sum(job is not None for job in queue.active_jobs)} of {len(queue.active_jobs)}")
    lines.append(f"pages counted for ip:127.0.0.1: {ROSTER.count('ip:127.0.0.1')}; decode jobs: {JOBS.active()}; "
                 f"CPU share total {CPU_SHARE.total():.2f} s, busy {CPU_SHARE.busy()}; joining {dict(JOINING)}")
    return "\n".join(lines)


def forget_pages() -> None:
    """A new test starts: its story starts empty."""
    NETWORK.clear()
    PAGES.clear()


def painted(pg: Any) -> None:
    """Wait until the page has rendered what it holds now: two animation frames (an event, not a guessed delay)."""
    pg.evaluate("() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))")


def typed(pg: Any, field: Any, text: str) -> None:
    """Type `text` into `field` as a visitor does (then Tab away), once the page has drawn it, and see it stay.

    Why the check: in CI the phone case once ran its Record as if the Seed held a valid value (the status said the
    run was done in the browser, and no line came), cause not known; the failure now says what the field showed and
    what the page sent. A visitor who sees a field show its old value types again, so this does too, once; a field
    that drops what was typed twice fails here, saying so.
    """
    field.wait_for(state="visible", timeout=WAIT_MS)
    painted(pg)
    for _ in range(2):
        field.fill(text)
        field.press("Tab")
        painted(pg)
        if field.input_value() == text:
            return
    raise AssertionError(f"the field dropped what was typed twice: it shows {field.input_value()!r}, not {text!r}")


def pick_option(pg: Any, field: str, typed_text: str, option: str) -> None:
    """Choose `option` in the dropdown `field` (a selector of its box) as a visitor does: open it, type to narrow the
    list, click the option by its whole name."""
    box = pg.locator(f"{field} input")
    box.click()
    box.fill(typed_text)
    pg.get_by_role("option", name=option, exact=True).click()


def record_ended(pg: Any) -> None:
    """Wait until Record's event has ended, not only written its status: its refusal line shows while the event is
    still finishing (the status box's timer still runs above it), and Gradio drops a click on a button whose event
    is still in flight (a click event runs once at a time). A visitor sees the timer and clicks after it; a test
    that clicks again must wait for the same sign."""
    pg.wait_for_function("() => { const t = document.querySelector('#run-status [data-testid=status-tracker]'); "
                         "return !t || t.innerText.trim() === ''; }", timeout=WAIT_MS)  # no timer: ended


def open_app(browser: Any, url: str, viewport: dict, *, wait_for: str = "#canvas .s2d2-canvas") -> tuple[Any, list]:
    """A new page at `url` in `viewport` (PHONE: a touch phone), once `wait_for` is drawn; with the list that
    collects its page errors and console errors (a test ends with `assert not errors, errors`)."""
    phone = viewport == PHONE
    pg = browser.new_page(viewport=viewport, is_mobile=phone, has_touch=phone)
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    pg.goto(url)
    pg.wait_for_selector(wait_for, timeout=WAIT_MS)
    return pg, errors


def show_numbers(pg: Any) -> None:
    """Open Replay's "This step in numbers" (closed on the first screen: words first), so that its summary box,
    which tests read to know which step is on screen, is laid out."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    label = pg.locator("#step-numbers .label-wrap")
    for _ in range(5):  # a click landing before the page's scripts took the box (a loaded machine) opens nothing
        if pg.locator("#summary textarea").is_visible():  # (hidden: not laid out yet, or inside the closed box)
            return
        if "open" not in (label.get_attribute("class") or "").split():  # (Gradio marks an open box's label)
            label.click()
        try:
            pg.wait_for_selector("#summary textarea", timeout=WAIT_MS // 5)
            return
        except PlaywrightTimeout:
            continue
    pg.wait_for_selector("#summary textarea", timeout=WAIT_MS)
