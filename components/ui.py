"""Gradio glue shared by the tab builders: the component registry, the name -> component adapter for handlers,
and a slider whose number box cannot error.

Handlers (components/replay/handlers.py) are pure: they return {view name: value}. `keyed` turns that into Gradio's
{component: value} with the registry, so an output a handler does not mention stays as it is, and a new view is a
new name, not a new position in a tuple.
"""
from __future__ import annotations

import functools
import inspect
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Optional

import gradio as gr
from gradio.components.number import Number

PRIVATE: dict[str, Any] = dict(api_visibility="private")


@dataclass
class Ctx:
    """Components by name, shared between tabs (filled as tabs are built, wired in app.py)."""

    example: Optional[Any] = None  # the Trace the app opens with
    c: dict[str, Any] = field(default_factory=dict)

    def __getitem__(self, name: str) -> Any:
        return self.c[name]

    def __setitem__(self, name: str, component: Any) -> None:
        self.c[name] = component

    def outputs(self, names: Iterable[str]) -> list[Any]:
        return [self.c[n] for n in names]


def keyed(fn: Callable[..., Any], ctx: Ctx) -> Callable[..., Any]:
    """Adapt a handler that returns (or yields) {name: value} to one that returns {component: value}."""

    def convert(out: dict[str, Any]) -> Any:
        return {ctx.c[name]: value for name, value in out.items()} if out else gr.skip()

    if inspect.isgeneratorfunction(fn):
        @functools.wraps(fn)
        def stream(*args: Any, **kwargs: Any) -> Any:
            for out in fn(*args, **kwargs):
                yield convert(out)

        return stream

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        return convert(fn(*args, **kwargs))

    return call


class ClampedSlider(gr.Slider):
    """The stock slider, except that its number box never raises an error badge: a typed value outside
    [minimum, maximum] is clamped, and a blank or non-numeric box arrives as None (handlers ignore it)."""

    is_template = True  # rendered by the stock slider front end

    def preprocess(self, payload: Any) -> Optional[float]:
        try:
            value = float(payload)
        except (TypeError, ValueError):
            return None
        if math.isnan(value):
            return None
        lo = self.minimum if self.minimum is not None else value
        hi = self.maximum if self.maximum is not None else value
        return Number.round_to_precision(min(max(value, lo), hi), self.precision)


class FreeSlider(gr.Slider):
    """A slider for a setting the handler checks itself (the Run tab's knobs): its number box never raises an error
    badge either, but a typed value reaches the handler as it is, so one outside the range is refused with a line
    beside its field (components/run/config_check.py) instead of being changed without a word. In the browser the
    page clamps a typed value first and says so under the box (components/theme.py)."""

    is_template = True  # rendered by the stock slider front end (Gradio names it by the direct base class)

    def preprocess(self, payload: Any) -> Optional[float]:
        if isinstance(payload, int) and not isinstance(payload, bool):
            return payload  # exact, however large: the check quotes it (s2d2.limits.int_text)
        try:
            value = float(payload)
        except (TypeError, ValueError, OverflowError):
            return None
        return value if math.isfinite(value) else None


def follow_js(selector: str) -> str:
    """Browser-only event code that brings `selector` to the top of the screen once it is shown, unless it already
    sits in the upper third: on a phone the action (a run's status, a trace opened in Replay) would otherwise
    happen below the finger. It waits for the element to be laid out (a tab switch renders a frame later), then
    keeps it there for about a second and a half while the views above it finish rendering (a plot that grows
    pushes it down), and stops at once when the visitor scrolls, touches or types: it never fights the finger.
    The newest follow whose element is shown takes over from an older one still running (a refused setting's line
    from Record's status), so two never pull the page two ways; one whose element never shows takes nothing."""
    return f"""(...args) => {{
  const me = (window.s2d2FollowSeq = (window.s2d2FollowSeq || 0) + 1);
  let frames = 0, settled = 0, moved = false;
  const stop = () => {{ moved = true; }};
  const hands = ['wheel', 'touchstart', 'keydown', 'mousedown'];
  hands.forEach(e => window.addEventListener(e, stop, {{once: true, passive: true}}));
  const done = () => hands.forEach(e => window.removeEventListener(e, stop));
  const go = () => {{
    if (moved || (window.s2d2Following || 0) > me) return done();
    const el = document.querySelector({selector!r});
    if (!el || el.offsetParent === null) {{
      if (frames++ < 60) requestAnimationFrame(go); else done();
      return;
    }}
    window.s2d2Following = Math.max(window.s2d2Following || 0, me);
    const top = el.getBoundingClientRect().top;
    if (top < -1 || top > window.innerHeight / 3) el.scrollIntoView({{block: 'start'}});  // -1: sub-pixel layout
    if (settled++ < 90) requestAnimationFrame(go); else done();
  }};
  requestAnimationFrame(go);
  return args;
}}"""


def within_js(cap: int) -> str:
    """Browser code run before an event that sends a prompt first: a text longer than `cap` characters is sent as
    its first cap + 1 (the server's front door refuses a field of more than 8,192 characters, so a pasted novel would
    fail as a bad request); the handler still sees that it is over the limit and refuses it with one line, and the
    line under the box (theme.KEYS_JS) gives the true length. Nothing is ever run on a cut text."""
    return f"""(...args) => {{
  if (typeof args[0] === 'string' && args[0].length > {cap}) args[0] = args[0].slice(0, {cap + 1});
  return args;
}}"""
