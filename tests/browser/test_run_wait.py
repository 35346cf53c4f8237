"""Issue 35 item 5 in the browser: a Run that must wait is queued, not refused, and its place in the queue and the
expected wait show on the line under the Run button (never in red on the Prompt box)."""
from __future__ import annotations

import os
import re

import pytest

from tests.support.app_server import SLOW_MODEL, served  # noqa: F401  (the fixture)
from tests.support.browser_env import PHONE, WAIT_MS, open_app, require_browser

require_browser()

# Is the element the one a tap at its centre reaches (nothing drawn over it)?
HIT = """(sel) => { const el = document.querySelector(sel); const r = el.getBoundingClientRect();
  const top = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
  return r.width > 0 && (top === el || el.contains(top)); }"""


@pytest.fixture(scope="module")
def one_place():
    """One Run decodes at a time (S2D2_BATCH_MAX=1), so a few API runs make the page's Run wait."""
    saved = os.environ.get("S2D2_BATCH_MAX")
    os.environ["S2D2_BATCH_MAX"] = "1"
    yield
    os.environ.pop("S2D2_BATCH_MAX") if saved is None else os.environ.__setitem__("S2D2_BATCH_MAX", saved)


@pytest.fixture(scope="module")
def busy_app(one_place, served):  # noqa: F811  (one_place first: the app is built with one place)
    return served


def test_a_waiting_run_is_told_its_place_beside_the_run_button(browser, busy_app):
    from gradio_client import Client

    from components.run.knobs import KNOB_NAMES, preset_values

    _, url = busy_app
    values = dict(zip(KNOB_NAMES, preset_values("dynamic-baseline")))
    values.update(gen_length=480, block_length=4)
    others = [Client(url, verbose=False, headers={"X-Forwarded-For": f"10.0.36.{i}"}) for i in range(3)]
    jobs = [c.submit("Once", SLOW_MODEL, *values.values(), api_name="/run") for c in others]
    pg, errors = open_app(browser, url, PHONE)
    try:
        pg.get_by_role("tab", name="Run").click()
        pg.locator("#run").click()
        # Its place in words (components/run/js/wait_words.js), shown on the line, not only Gradio's "queue: 3/3".
        words = pg.locator("#run-wait .s2d2-wait-words")
        words.wait_for(state="visible", timeout=WAIT_MS)
        line = words.inner_text()
        assert re.match(r"(\d+ runs? (is|are) ahead of yours|Your run is next) in line", line), line
        assert pg.evaluate(HIT, "#run-wait .s2d2-wait-words"), "the sentence is covered"
        assert "already" not in pg.locator("#run-settings").inner_text()  # nothing refused, nothing on the Prompt
        pg.locator("#stop").click()  # withdraws the page's queued Run
    finally:
        for job in jobs:
            job.cancel()
        for client in others:
            client.close()
        pg.close()
    assert not [e for e in errors if "queue" in e.lower()], errors
