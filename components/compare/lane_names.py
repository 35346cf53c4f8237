"""What Compare calls its lanes on the page: "Lane 3 · Verify when it expects a gain (K̂ ≥ 1), block 4", the words
the rest of the page uses (components/views/describe.py), with the preset id only as a secondary detail a
researcher looks for.

Invariants: a lane's key stays "N·preset" ("*" added when the lane has custom settings): the session state, the
`compare` API and the lane progress events name lanes by it, so only what the page prints goes through here; a title
always starts with "Lane N", so two lanes of the same preset never share one.
"""
from __future__ import annotations

from typing import Any, Mapping, Optional

from s2d2.config import DecodeConfig, preset, presets

from components.views.describe import plain_title
from components.views.lane_keys import split_key

OFF = "(off)"
def title_short(title: str) -> str:
    """A title's "Lane 3" (a name not titled by lane_title stays whole)."""
    head, dot, _ = title.partition(" · ")
    return head if dot and head.startswith("Lane ") else title


def lane_title(key: str, config: Optional[Mapping[str, Any] | DecodeConfig]) -> str:
    """"Lane 3 · Verify when it expects a gain (K̂ ≥ 1), block 4": what the lane's configuration does, custom settings
    included (the title describes the configuration that ran, and says when it is not the preset's own)."""
    number, name, custom = split_key(key)
    try:
        words = plain_title(config) if config is not None else name
    except (TypeError, ValueError):  # a header the config class refuses: its name is all there is to say
        words = name
    head = f"Lane {number} · " if number else ""
    return f"{head}{words}{' (custom settings)' if custom else ''}"


def lane_detail(key: str) -> str:
    """The researcher's detail under a title: "preset sdar-config-a" (", with custom settings")."""
    number, name, custom = split_key(key)
    if not number:
        return ""
    return f"preset {name}{', with custom settings' if custom else ''}"


def lane_titles(configs: Mapping[str, Any]) -> dict[str, str]:
    """{key: title} for lanes given as {key: DecodeConfig, a config dict or a Trace}."""
    out = {}
    for key, value in configs.items():
        header = getattr(value, "header", None)
        out[key] = lane_title(key, header.config if header is not None else value)
    return out


# -- the lane dropdowns -----------------------------------------------------------------------------------------

def _size(cfg: DecodeConfig) -> str:
    """The block words of plain_title, which tell lanes of one routing apart: "block 32, sub-block 4"."""
    if cfg.adaptive_block:
        return f"adaptive blocks starting at {cfg.block_length}"
    size = f"block {cfg.block_length}"
    if cfg.sub_block_length and cfg.sub_block_length != cfg.block_length:
        size += f", sub-block {cfg.sub_block_length}"
    return size


def choice_label(name: str) -> str:
    """A dropdown choice with what tells lanes apart first, so a phone's narrow box shows it: "Block 4 · Verify when
    it expects a gain (K̂ ≥ 1) · sdar-config-a" (the whole description is the line under the dropdown: lane_about)."""
    cfg = preset(name)
    title = plain_title(cfg)
    size = _size(cfg)
    if cfg.method == "ar" or f", {size}" not in title:
        return f"{title} · {name}"
    rest = title.replace(f", {size}", "", 1)
    return f"{size[0].upper()}{size[1:]} · {rest} · {name}"


def compare_choices() -> list[tuple[str, str]]:
    """The lane dropdowns' choices: (label, preset id), "(off)" first."""
    return [(OFF, OFF)] + [(choice_label(name), name) for name in presets()]


def lane_about(name: Any) -> str:
    """The line under a lane's dropdown: the preset's whole description, then its id ("" -> off)."""
    if not name or name == OFF:
        return "Off: this lane does not run."
    try:
        cfg = preset(str(name)[:100])
    except (KeyError, ValueError):
        return ""
    return f"{plain_title(cfg)} · preset `{name}`"
