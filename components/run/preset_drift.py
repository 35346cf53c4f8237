"""The line under the preset's note once the knobs are no longer the preset: the preset's label and note say what it
sets, and a visitor who changed a knob since (B = 1 after "block 4") must not read them as this Run's settings. The
line names each knob that now differs (shown for the current method and policy; the seed is kept across presets, so
never counted) with the preset's own value, and is empty while the knobs hold the preset."""
from __future__ import annotations

import math
from typing import Any

import gradio as gr

from components.escape import md_text
from components.run.knob_scope import shown
from components.run.knobs import KNOB_NAMES, KNOBS, preset_values
from components.ui import PRIVATE, Ctx, keyed

MAX_NAMED = 4  # knobs named on the line; the rest counted


def _same(now: Any, preset: Any) -> bool:
    """Whether a knob's value in the page equals the preset's (a slider sends 1.0 for an int knob's 1)."""
    if isinstance(preset, bool) or isinstance(now, bool) or isinstance(preset, str):
        return now == preset
    try:
        return math.isclose(float(now), float(preset), rel_tol=1e-9, abs_tol=1e-12)
    except (TypeError, ValueError):
        return False


def _shown_value(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return "empty" if value is None or value == "" else md_text(str(value), 40)


def changed(preset_name: Any, *knobs: Any) -> list[tuple[str, Any, Any]]:
    """(label, value now, the preset's value) of every knob that differs from the preset and matters for the method
    and policy now chosen; [] for a name that is no preset, or knobs that are not one value each."""
    try:
        wanted = preset_values(str(preset_name)[:100])
    except (ValueError, TypeError, KeyError):
        return []
    if len(knobs) != len(KNOBS):
        return []
    now = dict(zip(KNOB_NAMES, knobs))
    rules = (now["method"], now["policy"], now["remasking"], now["loop"])
    return [(k.name, now[k.name], want) for k, want in zip(KNOBS, wanted)
            if k.name != "seed" and shown(k.name, *rules) and not _same(now[k.name], want)]


def drift_line(preset_name: Any, *knobs: Any) -> dict[str, Any]:
    """{"preset_drift": the line}: empty while the knobs hold the preset, else what was changed from it."""
    diffs = changed(preset_name, *knobs)
    if not diffs:
        return {"preset_drift": ""}
    labels = {k.name: k.label for k in KNOBS}
    parts = [f"**{labels[name]}** = {_shown_value(now)} (the preset's {_shown_value(want)})"
             for name, now, want in diffs[:MAX_NAMED]]
    more = len(diffs) - MAX_NAMED
    if more > 0:
        parts.append(f"{more} more")
    return {"preset_drift": f"✎ Changed from the preset: {', '.join(parts)}. Record runs these settings, not the "
                            "preset's; pick the preset again to restore it."}


def wire(ctx: Ctx) -> None:
    """Write the line again when the visitor edits a knob (input, not change: a preset or a model sets every knob at
    once, and twenty change events queued for one pick took the session past its queued-events cap, a refusal
    the visitor saw; applying a preset clears the line itself, handlers.apply_preset). One event for all knobs,
    only its last trigger run."""
    knobs = [ctx[f"knob_{name}"] for name in KNOB_NAMES]
    gr.on([k.input for k in knobs], keyed(drift_line, ctx), [ctx["preset"], *knobs], [ctx["preset_drift"]],
          trigger_mode="always_last", show_progress="hidden", **PRIVATE)
