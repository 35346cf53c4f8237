"""Replay steps in the browser (components/replay/js/), in Chromium at 1366×900 and 390×844: for every shipped
example (both runs of a pair) and a fresh Run, ◀ ▶, the slider and Play show exactly the server's rendering of each
step (canvas, strip, words, summary, detail, residual, the routing plot's step marker, the mask viewer), and no
server event is sent per step: the requests to /gradio_api/queue/join are counted while stepping."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest

from tests.support.browser_env import DESKTOP, PHONE, WAIT_MS, open_app, require_browser, show_numbers

sync_api = require_browser()
pytestmark = pytest.mark.browser

from tests.support.app_server import RANDOM_MODEL, served

ROOT = Path(__file__).resolve().parent.parent.parent

# A DOM tree as text with each element's attributes sorted: the page updates an element in place (a class added
# to a kept cell comes after its other attributes), so attribute order is not part of what is shown.
CANON = """(node) => {
  const walk = (n) => {
    if (n.nodeType === 3) return n.data;
    if (n.nodeType !== 1) return '';
    const attrs = [...n.attributes].map(a => `${a.name}="${a.value}"`).sort().join(' ');
    return `<${n.localName} ${attrs}>` + [...n.childNodes].map(walk).join('') + `</${n.localName}>`;
  };
  return node ? [...node.childNodes].map(walk).join('') : null;
}"""
# What the page shows now, in the form the expectations take.
SHOWN = f"""() => {{
  const canon = {CANON};
  const html = (sel) => canon(document.querySelector(sel));
  const plot = (sel) => document.querySelector(sel + ' .js-plotly-plot');
  const r = plot('#routing'), m = plot('#mask');
  return {{
    canvas: html('#canvas .prose'), strip: html('#strip .prose'), residual: html('#residual .prose'),
    step_words: html('#step-words .s2d2-words'), detail: html('#token-detail .s2d2-detail'),
    summary: document.querySelector('#summary textarea').value,
    routing: r && r.layout ? JSON.stringify((r.layout.shapes || []).map(s => [s.type, s.x0, s.x1])) : null,
    mask: m && m.layout && m.data ? JSON.stringify([m.layout.title.text, m.data.length ? m.data[0].z : null]) : null,
  }};
}}"""
# The expectations, HTML parsed by the same browser.
NORMAL = f"""(want) => {{
  const canon = {CANON};
  const out = {{...want}};
  for (const k of ['canvas', 'strip', 'residual', 'step_words', 'detail']) {{
    const d = document.createElement('div');
    d.innerHTML = want[k];
    out[k] = canon(d);
  }}
  return out;
}}"""
SAME = f"""(want) => {{
  const got = ({SHOWN})(), exp = ({NORMAL})(want);
  return Object.keys(exp).every(k => got[k] === exp[k]);
}}"""


def expected(trace: Any, step: int) -> dict[str, Any]:
    """The server's rendering of `step` (step_views.render_step), in the form SHOWN reads the page."""
    from components.views.step_views import render_step

    v = render_step(trace, step)
    routing, mask = json.loads(v["routing"].to_json()), json.loads(v["mask"].to_json())
    shapes = [[s.get("type"), s.get("x0"), s.get("x1")] for s in routing["layout"].get("shapes", [])]
    z = mask["data"][0]["z"] if mask["data"] else None
    compact = dict(separators=(",", ":"), ensure_ascii=False)
    return {"canvas": v["canvas"], "strip": v["strip"], "residual": v["residual"],
            "step_words": f"<b>This step.</b> {v['step_words']}", "detail": v["detail"], "summary": v["summary"],
            "routing": json.dumps(shapes, **compact),
            "mask": json.dumps([mask["layout"]["title"]["text"], z], **compact)}


def expect_step(pg: Any, trace: Any, step: int) -> None:
    """Wait until the page shows the server's rendering of `step`; on a timeout, say which view differs."""
    want = expected(trace, step)
    try:
        pg.wait_for_function(SAME, arg=want, timeout=WAIT_MS // 6)
    except sync_api.TimeoutError:
        got, exp = pg.evaluate(SHOWN), pg.evaluate(NORMAL, want)
        def diff(a: Any, b: Any) -> tuple[str, str]:
            a, b = str(a), str(b)
            i = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
            return a[max(0, i - 80):i + 160], b[max(0, i - 80):i + 160]

        bad = {k: diff(got[k], exp[k]) for k in exp if got[k] != exp[k]}
        slider = pg.locator("#step-slider input[type=number]").input_value()
        raise AssertionError(f"step {step} (the slider says {slider}): {bad}") from None


class Joins:
    """The server events the page sends (POSTs to /gradio_api/queue/join), by the name of their function."""

    def __init__(self, pg: Any, url: str) -> None:
        import httpx

        deps = httpx.get(url.rstrip("/") + "/config").json()["dependencies"]
        self.names = {d["id"]: d.get("api_name") for d in deps}
        self.sent: list[str] = []
        pg.on("request", self._seen)

    def _seen(self, request: Any) -> None:
        if urlparse(request.url).path.endswith("/queue/join") and request.method == "POST":
            self.sent.append(str(self.names.get(json.loads(request.post_data or "{}").get("fn_index"))))

    def since(self, mark: int) -> list[str]:
        return [name for name in self.sent[mark:] if name != "reset_share"]  # the opening's, never a step's


def step_through(pg: Any, trace: Any, joins: Joins) -> None:
    """From step 0: ▶ to the end, the slider to the middle, ◀, then Play to the end; each step the server's
    rendering, and no server event for any of it."""
    n = len(trace.steps)
    mark = len(joins.sent)
    for step in range(1, n + 1):
        pg.locator("#next-btn").click()
        expect_step(pg, trace, step)
    middle = n // 2
    pg.locator("#step-slider input[type=range]").fill(str(middle))
    expect_step(pg, trace, middle)
    if middle:
        pg.locator("#prev-btn").click()
        expect_step(pg, trace, middle - 1)
    speed = pg.locator("#play-speed input[type=number]")
    speed.fill("4")
    speed.press("Tab")
    pg.locator("#play").click()
    pg.wait_for_function("document.querySelector('#play').innerText.includes('Play')", timeout=WAIT_MS)
    expect_step(pg, trace, n)  # Play ran to the end and stopped itself
    assert joins.since(mark) == [], joins.since(mark)


def shipped() -> list[tuple[str, str, Any]]:
    """(link query, label, trace) for every shipped example and the baseline of each pair."""
    from components.files.examples import examples_dir, list_examples, load_pair
    from components.replay.share_links import example_slug

    out = []
    for label, ex in list_examples(examples_dir()).items():
        main, partner = load_pair(ex)
        out.append((f"?example={example_slug(ex)}&run=s2d2&step=0", label, main))
        if partner is not None:
            out.append((f"?example={example_slug(ex)}&run=baseline&step=0", f"{label} (baseline)", partner))
    return out


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_every_shipped_example_steps_in_the_browser_as_the_server_draws_it(browser, served, viewport):  # noqa: F811
    _, url = served
    for query, label, trace in shipped():
        pg, errors = open_app(browser, url + query, viewport)
        joins = Joins(pg, url)
        show_numbers(pg)
        expect_step(pg, trace, 0)
        step_through(pg, trace, joins)
        assert not errors, (label, errors)
        pg.close()


def test_a_fresh_run_steps_in_the_browser_as_the_server_draws_it(browser, served, tmp_path):  # noqa: F811
    from components.files.traces import load_example

    _, url = served
    pg, errors = open_app(browser, url, DESKTOP)
    joins = Joins(pg, url)
    pg.get_by_role("tab", name="Run", exact=True).click()
    box = pg.locator("#model input")
    box.fill("tiny" if (ROOT / "assets" / "tiny").exists() else RANDOM_MODEL)
    box.press("Enter")
    gen = pg.locator("#knob-gen_length input[type=number]")
    gen.fill("32")
    gen.press("Tab")
    pg.locator("#prompt textarea").fill("2+3=")
    pg.get_by_role("button", name="▶ Record a run").click()
    pg.wait_for_function("document.querySelector('#headline').innerText.startsWith('S2D2 answered')",
                         timeout=WAIT_MS)  # Replay shows the run
    pg.locator("#files").get_by_text("This trace: details").click()
    with pg.expect_download() as download:
        pg.get_by_role("button", name="⬇ Download this trace (JSON)").click()
    saved = tmp_path / "run.json"
    download.value.save_as(saved)
    trace = load_example(saved)
    show_numbers(pg)
    number = pg.locator("#step-slider input[type=number]")
    number.fill("0")
    number.press("Enter")
    expect_step(pg, trace, 0)
    step_through(pg, trace, joins)
    assert not errors, errors
    pg.close()


def test_a_pinned_token_is_drawn_by_the_server_and_only_then(browser, served):  # noqa: F811
    """A pinned token's details follow the scrubber (the server draws them: one event per step while pinned)."""
    _, url = served
    query, _, trace = shipped()[0]
    pg, errors = open_app(browser, url + query, DESKTOP)
    joins = Joins(pg, url)
    show_numbers(pg)
    expect_step(pg, trace, 0)
    pg.locator("#next-btn").click()
    expect_step(pg, trace, 1)
    pos = pg.locator("#canvas .tok.new[data-pos]").first.get_attribute("data-pos")
    mark = len(joins.sent)
    pg.locator(f"#canvas [data-pos='{pos}']").click()
    pg.wait_for_function("document.querySelector('#mask .gtitle').textContent.includes('outlined: position')",
                         timeout=WAIT_MS)
    pg.locator("#next-btn").click()
    pg.wait_for_function(f"document.querySelector('#summary textarea').value.includes('Step 2 of') && "
                         f"document.querySelector('#token-detail [data-pinned=\"{pos}\"]') !== null",
                         timeout=WAIT_MS)
    assert joins.since(mark) == ["select_position", "server_step"], joins.since(mark)
    assert not errors, errors
    pg.close()
