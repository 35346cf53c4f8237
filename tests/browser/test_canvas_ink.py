"""Issue 28 row 7: in the p and r colour modes every token's ink stays readable on its indigo shade, discarded
drafts included (their own grey ink used to win over the shade's white). The canvas HTML and CSS in a bare page.

Skips when Playwright or /usr/bin/chromium is missing.
"""
from __future__ import annotations

import pytest

from fixtures import trace_factory as tf
from tests.support.browser_env import require_browser

require_browser()

CONTRAST = """els => els.map(e => {
  const rgb = s => (s.match(/[\\d.]+/g) || []).map(Number);
  const lum = ([r, g, b]) => [r, g, b].map(v => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; })
                                  .reduce((a, v, i) => a + v * [0.2126, 0.7152, 0.0722][i], 0);
  const cs = getComputedStyle(e), bg = rgb(cs.backgroundColor), fg = rgb(cs.color);
  const a = bg.length > 3 ? bg[3] : 1, page = [255, 255, 255];
  const flat = [0, 1, 2].map(i => a * bg[i] + (1 - a) * page[i]);   // the shade over the white page
  const o = Number(cs.opacity), ink = [0, 1, 2].map(i => o * fg[i] + (1 - o) * flat[i]);
  const [hi, lo] = [lum(flat), lum(ink)].sort((x, y) => y - x);
  return [e.className, (hi + 0.05) / (lo + 0.05)];
})"""


@pytest.mark.parametrize("mode", ["p", "r"])
def test_shaded_tokens_keep_readable_ink(browser, mode):
    from components.views.canvas import CANVAS_CSS, render_canvas

    trace = tf.mixed()
    pages = "".join(render_canvas(trace, s, color_by=mode) for s in range(1, len(trace.steps) + 1))
    assert "st-discarded shade-dark" in pages  # the case the issue saw: a discarded draft on dark indigo
    pg = browser.new_page()
    pg.set_content(f"<style>{CANVAS_CSS}</style><div style='background:#fff'>{pages}</div>")
    ratios = pg.locator(".tok.shade-dark, .tok.shade-light").evaluate_all(CONTRAST)
    assert ratios and all(r >= 4.5 for _, r in ratios), [x for x in ratios if x[1] < 4.5]
