"""Issue 36 item 4 in the browser: "Decode in my browser" on the Run tab. Pressing Run with the default prompt and
preset decodes in the page (a Web Worker running onnxruntime-web on the bundled export), the tokens arrive in the live
output while it decodes, and the trace the server receives equals the server's own decode of the same prompt and
preset (token ids, every decision, the forwards and NFE); Replay opens on it with the same step views. A browser that
cannot (no WebAssembly) decodes on the server, with one line saying why.

Needs the bundled `tiny` model, its export (assets/web/tiny) and the pinned runtime (npm ci --prefix s2d2_web
--ignore-scripts); skips, saying which is missing, without them.
"""
from __future__ import annotations

from components.serve.page_modules import RUN_JS, module_url
from tests.support.app_server import served  # noqa: F401  (the fixture)
from tests.support.page_run_page import Uploads, require_page_decoding, title
from tests.support.browser_env import (DESKTOP, PHONE, WAIT_MS, open_app, record_ended, require_browser,
                                       show_numbers)
from tests.support.step_views_page import expect_step
from tests.support.web_decoder import trace_differences

sync_api = require_browser()

# Count the live output's tokens each time it changes while the page's progress line is up (the page decoding).
WATCH_LIVE = """() => {
  window.s2d2SeenWhileDecoding = 0;
  new MutationObserver(() => {
    if (document.querySelector('#run-status .s2d2-page-progress')) {
      const n = document.querySelectorAll('#live .tok').length;
      window.s2d2SeenWhileDecoding = Math.max(window.s2d2SeenWhileDecoding, n);
    }
  }).observe(document.body, {subtree: true, childList: true, characterData: true});
}"""


def server_decode(received: dict):
    """The server's own decode of the same prompt, settings and seed (what a server Run records)."""
    import s2d2
    from components.serve.model_pool import get_model

    h = received["header"]
    cfg = s2d2.DecodeConfig.from_dict(h["config"])
    return s2d2.generate(get_model(h["model"]["name"]), h["prompt_ids"], cfg, h["seed"]).trace


def test_the_default_run_decodes_in_the_page_as_the_server_would(browser, served):  # noqa: F811
    require_page_decoding()
    from s2d2.trace import Trace

    _, url = served
    pg, errors = open_app(browser, url, DESKTOP)
    uploads = Uploads(pg)
    pg.evaluate(WATCH_LIVE)
    pg.get_by_role("tab", name="Run", exact=True).click()
    assert pg.locator("#in-page input[type=checkbox]").is_checked(timeout=WAIT_MS // 6)  # the default here
    pg.locator("#run").click()
    pg.wait_for_function("document.querySelector('#run-status').innerText.includes('Done in your browser')",
                         timeout=WAIT_MS)
    assert "This Run decodes in your browser (onnxruntime-web 1.30.0" in pg.locator("#run-where").inner_text()
    assert pg.evaluate("window.s2d2SeenWhileDecoding") > 0  # tokens arrived while the page decoded
    received = uploads.trace()
    assert received["header"]["decoded_in"] == {"where": "browser", "runtime": "onnxruntime-web",
                                                "runtime_version": "1.30.0", "backend": "wasm", "dtype": "float32"}
    assert received["header"]["config"]["rng"] == "counter"  # the default preset draws: the shared stream
    want = server_decode(received)
    got = Trace.from_dict(received)
    assert got.footer.output_ids == want.footer.output_ids
    assert [f.kind for f in got.forwards] == [f.kind for f in want.forwards]  # forwards by kind, hence NFE
    assert got.forwards[-1].nfe_after == want.forwards[-1].nfe_after
    for part in ("blocks", "forwards", "steps"):  # every decision, commit and draw; floats within 1e-4
        assert not trace_differences(want.to_dict()[part], got.to_dict()[part], path=part)
    # Replay opened on the received trace, drawn as the server draws its own decode, step by step.
    pg.wait_for_function("document.querySelector('#headline').innerText.startsWith('S2D2 answered')",
                         timeout=WAIT_MS)
    assert "decoded in the browser (onnxruntime-web 1.30.0, wasm, float32)" in title(pg)
    show_numbers(pg)
    number = pg.locator("#step-slider input[type=number]")
    for step in (0, len(want.steps) // 2, len(want.steps)):
        number.fill(str(step))
        number.press("Enter")
        expect_step(pg, want, step)
    assert not errors, errors
    pg.close()


def test_a_browser_without_webassembly_decodes_on_the_server_and_says_why(browser, served):  # noqa: F811
    require_page_decoding()
    _, url = served
    pg = browser.new_page(viewport=PHONE, is_mobile=True, has_touch=True)
    pg.add_init_script("delete window.WebAssembly")  # before the app's own code: a browser without it
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    pg.goto(url)
    pg.wait_for_selector("#canvas .s2d2-canvas", timeout=WAIT_MS)
    uploads = Uploads(pg)
    pg.get_by_role("tab", name="Run", exact=True).click()
    gen = pg.locator("#knob-gen_length input[type=number]")
    gen.fill("16")
    gen.press("Tab")
    pg.locator("#run").click()
    pg.wait_for_function("document.querySelector('#run-status').innerText.includes('✓ Done')", timeout=WAIT_MS)
    where = pg.locator("#run-where").inner_text().strip()
    assert where == "Decoded on the server: this browser has no WebAssembly.", where
    assert not uploads.posts  # nothing decoded in the page, nothing handed off
    assert "decoded on the server" in title(pg)
    assert not errors, errors
    pg.close()


def test_stop_while_the_page_loads_the_model_ends_the_page_run(browser, served):  # noqa: F811
    require_page_decoding()
    _, url = served
    pg, errors = open_app(browser, url, DESKTOP)
    uploads = Uploads(pg)
    pg.get_by_role("tab", name="Run", exact=True).click()
    pg.locator("#run").click()
    pg.wait_for_function("(document.querySelector('#run-status .s2d2-page-progress') || {}).textContent"
                         "?.startsWith('Loading the model')", polling=20, timeout=WAIT_MS)
    pg.locator("#stop").click()
    pg.wait_for_function("document.querySelector('#run-status').innerText.includes('■ Stopped before the model "
                         "was loaded in your browser')", timeout=WAIT_MS)
    assert not uploads.posts  # the worker was ended: nothing decoded, nothing handed off
    record_ended(pg)  # the first Record's event has ended: a press before that is dropped
    # Once the model is loaded, Stop ends the decode after the block in flight and keeps the blocks as a partial
    # trace. Stopped from the page's module the moment the model is loaded (a click's own latency can outlast this
    # short decode on a fast machine); the button's wiring to it is what the first half checked.
    pg.locator("#run").click()
    pg.wait_for_function("(document.querySelector('#run-status .s2d2-page-progress') || {}).textContent"
                         "?.startsWith('Model loaded')", polling=20, timeout=WAIT_MS)
    pg.evaluate(f"async () => (await import({module_url(RUN_JS, 'page_run.js')})).stop()")
    pg.wait_for_function("document.querySelector('#run-status').innerText.includes('■ Stopped in your browser — "
                         "partial trace kept')", timeout=WAIT_MS)
    received = uploads.trace()
    assert received["footer"]["finish_reason"] == "cancelled" and received["blocks"]
    assert not errors, errors
    pg.close()
