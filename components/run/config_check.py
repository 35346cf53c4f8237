"""Knob values -> a validated DecodeConfig or one readable message (pure, within s2d2/limits.py), and a prompt checked
before any work starts.

Every message names the setting first ("seed: expected a whole number…"), so `setting_problem` can say which knob
it is about and the Run tab shows it beside that knob. A number outside its knob's range is refused, never clamped:
the page clamps a typed value itself and says so under the box (components/theme.py), so only a script can send one,
and it gets the line instead of a silently changed run."""
from __future__ import annotations

import dataclasses
from typing import Any, Optional

from s2d2.config import DecodeConfig
from s2d2.limits import check_lengths, check_prompt_chars, check_seed, int_text, limits
from components.serve.input_numbers import as_float
from components.run.knobs import KNOBS, Knob
from components.views.plural import plural

INVALID = "Invalid setting — "
KNOB_BY_NAME = {k.name: k for k in KNOBS}
OPERATOR_CAPPED = {"gen_length": "S2D2_MAX_GEN_TOKENS", "block_length": "S2D2_MAX_BLOCK_LENGTH"}  # their tops


def _coerce(knob: Knob, value: Any) -> Any:
    if value is None or (isinstance(value, str) and not value.strip() and knob.kind != "choice"):
        raise ValueError(f"{knob.name}: no value given")
    if knob.kind == "int":
        if isinstance(value, int) and not isinstance(value, bool):
            v: Any = value  # exact, however large: the bound check names it (limits.int_text)
        else:
            f = as_float(value)
            if f is None or f != int(f):
                raise ValueError(f"{knob.name}: expected a whole number, got {_shown(value)}")
            v = int(f)
        return None if knob.optional_zero and v == 0 else _in_range(knob, v)
    if knob.kind == "float":
        f = as_float(value)
        if f is None:
            raise ValueError(f"{knob.name}: expected a number in [{knob.lo:g}, {knob.hi:g}], got {_shown(value)}")
        return None if knob.optional_zero and f == 0 else _in_range(knob, f)
    if knob.kind == "bool":
        return bool(value)
    return str(value)[:100]


def _in_range(knob: Knob, value: Any) -> Any:
    """`value` when it lies in the knob's range, else the line saying so (the seed's bounds are check_seed's; a
    length's top is the operator's limit, and the line names it)."""
    if knob.name == "seed" or knob.lo <= value <= knob.hi:
        return value
    cap = f" ({OPERATOR_CAPPED[knob.name]})" if knob.name in OPERATOR_CAPPED else ""
    side = f"at most {knob.hi:g}{cap}" if value > knob.hi else f"at least {knob.lo:g}"
    raise ValueError(f"{knob.name}: {side}, got {_shown(value)}")


def setting_problem(*values: Any) -> tuple[Optional[str], Optional[str]]:
    """(knob name, message) for UI values (KNOBS order) that config_from_inputs refuses, the name None when the
    message is about no one knob (or the knob is unknown); (None, None) when they make a valid config."""
    cfg, _, error = config_from_inputs(*values)
    if error is None:
        return None, None
    message = error.removeprefix(INVALID)
    name = message.split(":", 1)[0].strip()
    return (name if name in KNOB_BY_NAME else None), message


def _shown(value: Any) -> str:
    """A bad value as a message quotes it: short, and never a 4300-digit int (str() refuses those)."""
    return int_text(value) if isinstance(value, int) else repr(str(value)[:40])


def config_from_inputs(*values: Any) -> tuple[Optional[DecodeConfig], int, Optional[str]]:
    """UI values in KNOBS order -> (config, seed, None) or (None, 0, "one readable message")."""
    if len(values) != len(KNOBS):
        return None, 0, f"internal: expected {len(KNOBS)} settings, got {len(values)}"
    data: dict[str, Any] = {}
    try:
        for knob, value in zip(KNOBS, values):
            data[knob.name] = _coerce(knob, value)
        seed = check_seed(data.pop("seed"))
        cfg = check_config(DecodeConfig.from_dict(data))
    except (ValueError, TypeError, OverflowError) as exc:
        return None, 0, f"{INVALID}{exc}"
    return cfg, int(seed), None


def check_config(cfg: DecodeConfig) -> DecodeConfig:
    """The app's caps on top of DecodeConfig's own ranges (ValueError naming the field and the bound)."""
    check_lengths(cfg.gen_length, cfg.block_length)
    top = limits().max_block_length
    if cfg.adaptive_block and cfg.adaptive_max_block > top:
        raise ValueError(f"adaptive_max_block: at most {top} (S2D2_MAX_BLOCK_LENGTH), got {cfg.adaptive_max_block}")
    return cfg


def check_prompt(prompt: Any) -> Optional[str]:
    """One line for a prompt no decode may take (None: it may run). A text over the limit is refused whole, never
    cut: the page sends at most limit + 1 characters (ui.within_js), so the line under the box gives its length."""
    if not isinstance(prompt, str) or not prompt.strip():
        return "Type a prompt first (or pick an example)."
    limit = limits().max_prompt_chars
    if len(prompt) > limit:
        return (f"The prompt is longer than {plural(limit, 'character', grouped=True)}, the most a run takes "
                "(the line under the box gives its length). Nothing was cut: shorten it.")
    try:
        check_prompt_chars(prompt)
    except ValueError as exc:
        return f"The {exc}."
    return None


def config_dict(cfg: DecodeConfig) -> dict[str, Any]:
    return dataclasses.asdict(cfg)
