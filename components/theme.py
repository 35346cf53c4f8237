"""The page's look: the Gradio theme, the CSS (each view's own CSS, then the page's), and the ← / → keys that scrub
the replay. app.py passes these to `launch`; nothing here reads a trace."""
from __future__ import annotations

import gradio as gr

from s2d2.limits import limits

from components.compare.styles import COMPARE_CSS
from components.tour.layout import TOUR_CSS
from components.views.canvas import CANVAS_CSS
from components.views.ledger import LEDGER_CSS
from components.views.residual import RESIDUAL_CSS
from components.views.swipe_hint import SWIPE_CSS
from components.views.verify_strip import STRIP_CSS

CSS = CANVAS_CSS + STRIP_CSS + COMPARE_CSS + RESIDUAL_CSS + LEDGER_CSS + SWIPE_CSS + TOUR_CSS + """
.s2d2-detail{font-size:0.92em;color:#1e293b;border-left:3px solid #4f46e5;padding:4px 8px;min-height:2.5em}
.s2d2-detail [data-pinned]{display:block;white-space:pre-line;font-family:ui-monospace,monospace;font-size:0.92em;
  color:#334155}
.s2d2-detail [data-pinned] .words{font-family:var(--font);white-space:normal;color:#1e293b;margin-bottom:2px}
.s2d2-detail .evidence{display:block}
.s2d2-detail .words{display:block;font-size:1.05em}
.s2d2-detail details.numbers{margin-top:2px;color:#334155}
.s2d2-detail details.numbers summary{cursor:pointer;color:#4338ca;font-size:.92em}
.s2d2-words{font-size:.95em;color:#1e293b;padding:2px 8px}
#legend .s2d2-legend{margin-top:0;font-size:.8em;gap:4px}
.tour-pointer{font-weight:600}
#summary textarea{font-weight:600}
.clamp-note{font-size:.85em;color:#9a3412;margin-top:2px}
.secondary-wrap input[role=combobox]{text-overflow:ellipsis;padding-right:26px}
.field-error .info-text{color:#b91c1c;font-weight:600}
#run-wait .s2d2-wait-words{position:relative;z-index:5;margin:0;font-weight:600;color:#1e293b}
#run-wait:has(.s2d2-wait-words) [data-testid="status-tracker"]{visibility:hidden}
#headline{font-size:1.08em;border-left:4px solid #ea580c;padding:4px 12px;background:#fff7ed;border-radius:4px}
#headline p{margin:4px 0}
#headline code{font-size:1.05em;font-weight:700;padding:0 4px}
#load-status p,#trace-title p{margin:2px 0}
.s2d2-about{max-width:60em}
.on-touch{display:none}
@media (hover: none){.on-hover{display:none}.on-touch{display:inline}
  /* a finger's reach (WCAG's 44 px): the step and stop buttons, and the sliders' reset arrows */
  #prev-btn,#next-btn,#tour-back,#tour-next,#tour-show{min-height:44px}
  .reset-button{min-width:36px;min-height:36px}}
#scrubber{flex-wrap:nowrap;align-items:center;gap:6px}
#scrubber>*{min-width:0}
@media (max-width: 640px){
  .js-plotly-plot .modebar-container{display:none!important}
  #intro h1{font-size:1.3em;margin:0 0 2px 0}
  #intro .wide{display:none}
  #legend .s2d2-legend{font-size:.72em;gap:2px}
  #intro p{font-size:.9em;line-height:1.35;margin:0}
  #scrubber button{padding-left:6px;padding-right:6px}
  #tabs [role=tab]{height:28px;padding-top:2px;padding-bottom:2px}
  #tabs .tab-wrapper{margin-bottom:8px}
  #tabs .tabitem>.column{gap:12px}
}
"""
# The body font: IBM Plex Sans, which Gradio ships (no request leaves the page). Not the Soft theme's own "Montserrat":
# Gradio's file of that name is Montserrat *Alternates*, whose Z has a bar (the normaliser Z printed "Ƶ", "Ƶoe" in
# the example prompts) and which has no Greek, so τ, β and γ came from a fallback font beside it.
BODY_FONT = gr.themes.LocalFont("IBM Plex Sans", weights=(400, 700))  # (its SemiBold file is a 99-glyph subset)
MONO_FONT = gr.themes.LocalFont("IBM Plex Mono", weights=(400, 700))  # (the Soft theme's 600: a 75-glyph subset)
THEME = gr.themes.Soft(primary_hue="indigo", secondary_hue="green",
                       font=(BODY_FONT, "ui-sans-serif", "system-ui", "sans-serif"),
                       font_mono=(MONO_FONT, "ui-monospace", "Consolas", "monospace"))
# ← / → scrub the replay unless the focus is in a text field.
# A number typed into a slider's box outside its range (or between the whole steps of a whole-number knob) is set,
# in the box, to the value the app will use, and a line under it says what was typed and why it changed: the server
# clamps the same way (components/ui.py ClampedSlider), so the box never shows a value the run does not use.
# A value above the largest is caught as it is typed (more digits only raise it): a knob whose own page code snaps
# its value at once (Replay's Step, components/replay/layout.step_js) would otherwise be back in range, with no line
# saying why, before Enter's change event; the digits typed after that extend the number the line names. Below the
# smallest and between steps wait for the change (typing "10" passes through "1"); so does an empty box, which
# Gradio sets to the smallest value.
KEYS_JS = """
() => {
  const sliderOf = (box) => {
    if (!(box instanceof HTMLInputElement) || box.type !== 'number') return null;
    const head = box.closest('.head'), wrap = head && head.parentElement;  // the slider's own box and bar only
    const range = wrap && wrap.querySelector(':scope > .slider_input_container input[type=range]');
    return range ? {wrap, range} : null;
  };
  const say = (box, wrap, typed, used, why) => {
    let note = wrap.querySelector('.clamp-note');
    if (!note) { note = document.createElement('div'); note.className = 'clamp-note'; note.setAttribute('role', 'status');
                 wrap.appendChild(note); }
    note.textContent = `${typed} is ${why}: set to ${used}, the value used.`;
    note.dataset.used = String(used);
    box.value = String(used);
  };
  document.addEventListener('input', (e) => {
    const box = e.target, found = sliderOf(box);
    if (!found || box.value === '' || !isFinite(Number(box.value))) return;
    const hi = Number(found.range.max);
    // Digits typed after the box was set to its largest value extend what was typed, not the value shown: 9999
    // reaches the box as 99 (set to 64), then "649"; the line names 9999.
    const shown = box.dataset.shown, more = shown !== undefined && box.value.startsWith(shown)
      && box.value.length > shown.length;
    const typed = more ? box.dataset.typed + box.value.slice(shown.length) : box.value;
    if (Number(typed) > hi && Number(typed) > 0) {
      say(box, found.wrap, Number(typed), hi, `above the largest value, ${hi}`);
      Object.assign(box.dataset, {typed, shown: box.value});
    } else {
      delete box.dataset.typed; delete box.dataset.shown;
    }
  }, true);
  document.addEventListener('change', (e) => {
    const box = e.target, found = sliderOf(box);
    if (!found) return;
    delete box.dataset.typed; delete box.dataset.shown;  // the typing is over: the next keys start a new value
    const {wrap, range} = found;
    const lo = Number(range.min), hi = Number(range.max), step = Number(range.step);
    if (box.value === '' || !isFinite(Number(box.value))) {  // Gradio sets an empty box to the smallest value
      say(box, wrap, 'An empty box', lo, 'not a number');
      box.dispatchEvent(new Event('input', {bubbles: true}));
      return;
    }
    const typed = Number(box.value);
    let used = Math.min(hi, Math.max(lo, typed));
    const whole = step >= 1 && Number.isInteger(step) && Number.isInteger(lo);
    if (whole) used = Math.min(hi, lo + Math.floor((used - lo) / step + 0.5) * step);
    const note = wrap.querySelector('.clamp-note');
    if (used === typed) {  // in range: a line stays only for the value it set (caught while typing)
      if (note && note.dataset.used !== box.value) note.remove();
      return;
    }
    const why = typed > hi ? `above the largest value, ${hi}` : typed < lo ? `below the smallest value, ${lo}`
      : `not a whole ${step === 1 ? 'number' : 'multiple of ' + step}`;
    say(box, wrap, typed, used, why);
    box.dispatchEvent(new Event('input', {bubbles: true}));
  }, true);
  // A prompt longer than a run takes is never cut: a line under its box gives its length and the limit.
  document.addEventListener('input', (e) => {
    const box = e.target;
    if (!(box instanceof HTMLTextAreaElement) || !box.closest('#prompt, #cmp-prompt')) return;
    const block = box.closest('#prompt, #cmp-prompt');
    let note = block.querySelector('.length-note');
    const limit = Number('PROMPT_CHARS');
    if (box.value.length <= limit) { if (note) note.remove(); return; }
    if (!note) { note = document.createElement('div'); note.className = 'clamp-note length-note';
                 note.setAttribute('role', 'status'); block.appendChild(note); }
    note.textContent = `${box.value.length.toLocaleString('en')} characters: a run takes at most `
      + `${limit.toLocaleString('en')}. Nothing is cut: shorten the text, or Record will refuse it.`;
  }, true);
  document.addEventListener('keydown', (e) => {
    if (e.target.closest('input, textarea, select, [contenteditable]')) return;
    const id = e.key === 'ArrowRight' ? 'next-btn' : e.key === 'ArrowLeft' ? 'prev-btn' : null;
    const btn = id && document.getElementById(id);
    if (btn && btn.offsetParent !== null) { btn.click(); e.preventDefault(); }
  });
}
"""
KEYS_JS = KEYS_JS.replace("PROMPT_CHARS", str(limits().max_prompt_chars))  # the limit at start-up
