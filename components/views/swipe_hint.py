"""The line over a table that can be wider than a phone's screen (the residual draw's candidates, the cost ledger's
forward boxes): its columns run off the right edge with nothing to say more are there, so on a narrow screen a line
says the table scrolls sideways. Worded as a question, it stays true on a phone wide enough to show the whole table.
(The verification strip has its own line, shown exactly when its fixed-width table overflows: verify_strip.py.)"""
from __future__ import annotations

NARROW_PX = 700  # the widest screen the line shows on (Gradio stacks its columns below ~640 px)

SWIPE_CSS = (".s2d2-swipe{display:none;margin:2px 0;font-size:.85em;color:#475569}"
             f"@media (max-width:{NARROW_PX}px){{.s2d2-swipe{{display:block}}}}\n")


def swipe_hint() -> str:
    """The line (shown by SWIPE_CSS on a narrow screen only)."""
    return '<p class="s2d2-swipe">↔ Wider than your screen? Scroll the table sideways.</p>'
