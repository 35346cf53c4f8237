"""The page around a self-contained HTML replay (components/files/html_replay.py): markup, CSS and the scrubber's script.

Plain JS, no library: the page reads its frames from a JSON block, and the slider, ◀ ▶, Play, the arrow keys (and
Home / End) move between them; a click or tap on a token pins its details. A `#step=N` fragment opens step N. The
Content-Security-Policy lets only this script run (by its hash) and forbids every fetch, so even a string that
slipped past escaping could neither run nor reach the network.
"""
from __future__ import annotations

import base64
import hashlib

from components.views.canvas import CANVAS_CSS
from components.views.verify_strip import STRIP_CSS

PAGE_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#0f172a;background:#fff}
main{max-width:1100px;margin:0 auto;padding:12px 16px 32px}
h1{font-size:1.15em;margin:4px 0 2px}
.meta{color:#475569;font-size:.85em;margin:0 0 8px}
.headline{border-left:4px solid #ea580c;background:#fff7ed;padding:6px 12px;border-radius:4px;margin:8px 0}
.headline code{font-weight:700;padding:0 3px}
.note{border-left:4px solid #b45309;background:#fffbeb;padding:6px 12px;border-radius:4px;margin:8px 0}
.bar{display:flex;align-items:center;gap:8px;margin:10px 0;position:sticky;top:0;background:#fff;padding:6px 0;
  z-index:2;border-bottom:1px solid #e2e8f0}
.bar input[type=range]{flex:1;min-width:80px;accent-color:#4f46e5}
.bar button{font:inherit;min-width:44px;min-height:36px;border:1px solid #cbd5e1;border-radius:6px;background:#f8fafc;
  cursor:pointer}
.bar button:disabled{opacity:.4;cursor:default}
#step-label{font-variant-numeric:tabular-nums;white-space:nowrap;font-size:.9em}
#summary{font-weight:600;margin:6px 0 10px;min-height:2.6em}
.detail{white-space:pre-line;font-family:ui-monospace,monospace;font-size:.85em;color:#334155;
  border-left:3px solid #4f46e5;padding:4px 8px;min-height:2.5em;margin:8px 0}
footer{color:#64748b;font-size:.8em;margin-top:16px}
@media (max-width:640px){main{padding:8px 10px 24px}.bar{gap:4px}.bar button{min-width:40px}}
"""

PAGE_JS = """
(function () {
  'use strict';
  var data = JSON.parse(document.getElementById('s2d2-data').textContent);
  var pieces = data.pieces, frames = data.frames, last = frames.length - 1;
  var el = function (id) { return document.getElementById(id); };
  var slider = el('step'), label = el('step-label'), canvas = el('canvas'), strip = el('strip');
  var summary = el('summary'), detail = el('detail'), prev = el('prev'), next = el('next'), play = el('play');
  var shown = -1, timer = null;
  function join(ids) {  /* fragment ids; a negative entry -k continues the previous id with its k successors */
    var out = '', prev = 0;
    for (var i = 0; i < ids.length; i++) {
      var x = ids[i];
      if (x >= 0) { out += pieces[x]; prev = x; continue; }
      for (var j = 1; j <= -x; j++) { out += pieces[prev + j]; }
      prev -= x;
    }
    return out;
  }
  function centreStrip() {  /* a narrow screen scrolls the strip: bring the first rejected column into view */
    var wrap = strip.querySelector('.tbl'), col = wrap && wrap.querySelector('th.first-reject');
    if (col && col.offsetLeft + col.offsetWidth > wrap.scrollLeft + wrap.clientWidth) {
      wrap.scrollLeft = Math.max(0, col.offsetLeft - (wrap.clientWidth - col.offsetWidth) / 2);
    }
  }
  function show(step) {
    var s = Math.max(0, Math.min(last, Math.round(Number(step)) || 0));
    if (s === shown) { return; }
    shown = s;
    var f = frames[s];
    canvas.innerHTML = join(f[0]);  /* the app's own escaped HTML for this step */
    strip.innerHTML = join(f[1]);
    summary.textContent = f[2];
    slider.value = String(s);
    label.textContent = 'Step ' + s + ' of ' + data.total;
    prev.disabled = s === 0;
    next.disabled = s === last;
    detail.textContent = data.hint;
    centreStrip();
  }
  function stop() { if (timer) { clearInterval(timer); timer = null; play.textContent = '▶ Play'; } }
  slider.addEventListener('input', function () { stop(); show(slider.value); });
  prev.addEventListener('click', function () { stop(); show(shown - 1); });
  next.addEventListener('click', function () { stop(); show(shown + 1); });
  play.addEventListener('click', function () {
    if (timer) { stop(); return; }
    if (shown >= last) { show(0); }
    play.textContent = '❚❚ Pause';
    timer = setInterval(function () { if (shown >= last) { stop(); } else { show(shown + 1); } }, 1000);
  });
  document.addEventListener('keydown', function (e) {
    if (e.target === slider || e.altKey || e.ctrlKey || e.metaKey) { return; }  /* the range steps itself */
    var to = {ArrowRight: shown + 1, ArrowLeft: shown - 1, Home: 0, End: last}[e.key];
    if (to === undefined) { return; }
    e.preventDefault();
    stop();
    show(to);
  });
  canvas.addEventListener('click', function (e) {
    var tok = e.target.closest('[data-pos]');
    if (tok) { detail.textContent = tok.getAttribute('title') || ''; }
  });
  var m = /^#step=(\\d{1,6})$/.exec(window.location.hash);
  show(m ? Number(m[1]) : data.start);
})();
"""

HINT = ("Hover a token for its details (p, q, r, the draw u, the top candidates); click or tap it to pin them here. "
        "Keys: ← → step through the run, Home / End jump to its ends.")


def script_hash(script: str) -> str:
    """The CSP source that allows exactly this inline script."""
    return "'sha256-" + base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode() + "'"


def page(title: str, meta: str, headline: str, note: str, legend: str, data_json: str, last: int) -> str:
    """The whole document, its scrubber over frames 0..`last`. Every text argument but `data_json` (already escaped
    for a script block) is escaped HTML."""
    csp = (f"default-src 'none'; script-src {script_hash(PAGE_JS)}; style-src 'unsafe-inline'; img-src data:; "
           "base-uri 'none'; form-action 'none'")
    note_html = f'<p class="note" role="status">{note}</p>' if note else ""
    parts = [
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{csp}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{title} · S2D2 replay</title>",
        f"<style>{CANVAS_CSS}{STRIP_CSS}{PAGE_CSS}</style></head><body><main>",
        f"<h1>{title}</h1>", f'<p class="meta">{meta}</p>',
        f'<div class="headline">{headline}</div>', note_html,
        '<div class="bar" role="group" aria-label="step scrubber">',
        '<button id="prev" type="button" aria-label="previous step">◀</button>',
        f'<input id="step" type="range" min="0" max="{max(0, last)}" step="1" value="0" '
        'aria-label="step of the run">',
        '<button id="next" type="button" aria-label="next step">▶</button>',
        '<button id="play" type="button">▶ Play</button>',
        '<span id="step-label" aria-live="polite"></span></div>',
        '<p id="summary" aria-live="polite"></p>',
        '<div id="canvas"></div>',
        '<div id="detail" class="detail" aria-live="polite"></div>',
        legend,
        '<h2 style="font-size:1em;margin:14px 0 4px">Verification strip</h2><div id="strip"></div>',
        '<footer>A self-contained replay from S2D2 Explorer (self-speculative decoding of block-diffusion language '
        'models, arXiv 2603.25702): one file, no server, no network. Each step shows the same canvas, strip and '
        'summary as the app\'s Replay tab.</footer>',
        "</main>",
        f'<script type="application/json" id="s2d2-data">{data_json}</script>',
        f"<script>{PAGE_JS}</script></body></html>\n",
    ]
    return "".join(parts)
