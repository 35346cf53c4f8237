"""Replay's step views as the page shows them, against the server's rendering of the same step
(components/views/step_views.render_step): the browser tests that step a trace in the page compare with these."""
from __future__ import annotations

import json
from typing import Any

from tests.support.browser_env import WAIT_MS

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
    except Exception as exc:  # playwright's TimeoutError: say which view differs
        if type(exc).__name__ != "TimeoutError":
            raise
        got, exp = pg.evaluate(SHOWN), pg.evaluate(NORMAL, want)
        def diff(a: Any, b: Any) -> tuple[str, str]:
            a, b = str(a), str(b)
            i = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
            return a[max(0, i - 80):i + 160], b[max(0, i - 80):i + 160]

        bad = {k: diff(got[k], exp[k]) for k in exp if got[k] != exp[k]}
        slider = pg.locator("#step-slider input[type=number]").input_value()
        raise AssertionError(f"step {step} (the slider says {slider}): {bad}") from None
