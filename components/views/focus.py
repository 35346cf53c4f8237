"""Scroll a view to the position its text names.

A view that talks about one position marks itself with `focus_attr(position)` (a `data-focus` attribute on its
root); its cells carry `data-col="<position>"` (the verification strip) or `data-pos="<position>"` (the canvas).
`FOCUS_JS`, given to a gr.HTML as `js_on_load`, centres that cell inside whichever of its containers scrolls (the
strip's table scrolls sideways on a phone) when the view loads and whenever its value changes; a view without a
focus scrolls back to its start. The page itself is never scrolled. Any gr.HTML that shows a strip or a canvas
(Replay, the tour) can use it: `gr.HTML(render_strip(trace, step, focus=pos), js_on_load=FOCUS_JS)`.
"""
from __future__ import annotations

from typing import Optional


def focus_attr(position: Optional[int]) -> str:
    """The attribute that names the position a view is about ('' for none)."""
    return "" if position is None else f' data-focus="{int(position)}"'


FOCUS_JS = """
const centre = () => {
  const root = element.querySelector('[data-focus]');
  const scrollers = [...element.querySelectorAll('.tbl, .s2d2-canvas')];
  if (!root) { scrollers.forEach((s) => { s.scrollLeft = 0; }); return; }
  const at = root.dataset.focus;
  const cell = root.querySelector(`[data-col="${at}"]`) || root.querySelector(`[data-pos="${at}"]`);
  if (!cell) return;
  for (let box = cell.parentElement; box && box !== element.parentElement; box = box.parentElement) {
    if (box.scrollWidth > box.clientWidth + 1) {
      const left = cell.getBoundingClientRect().left - box.getBoundingClientRect().left + box.scrollLeft;
      box.scrollLeft = Math.max(0, left - (box.clientWidth - cell.offsetWidth) / 2);
    }
    if (box.scrollHeight > box.clientHeight + 1 && getComputedStyle(box).overflowY !== 'visible') {
      const top = cell.getBoundingClientRect().top - box.getBoundingClientRect().top + box.scrollTop;
      box.scrollTop = Math.max(0, top - (box.clientHeight - cell.offsetHeight) / 2);
    }
  }
};
const later = () => requestAnimationFrame(() => requestAnimationFrame(centre));
later();
watch('value', later);
"""
