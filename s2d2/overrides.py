"""KEY=VALUE overrides of a decoding configuration, typed: the CLI's `--set` and the Compare tab's custom settings.

A value is a JSON literal where it parses (`16`, `true`, `0.9`, `"x"`), else the string itself; DecodeConfig then
checks every value against its field. Each problem is one ValueError that starts with `where` (the place the
visitor typed it) and names the pair.
"""
from __future__ import annotations

import json
from typing import Any, Iterable


def parse_overrides(pairs: Iterable[str], where: str = "--set") -> dict[str, Any]:
    """KEY=VALUE strings -> {key: typed value}; a pair without '=' or a value nested too deeply is a ValueError."""
    out: dict[str, Any] = {}
    for pair in pairs:
        if "=" not in pair:
            raise ValueError(f"{where}: expected KEY=VALUE, got {pair!r}")
        key, raw = pair.split("=", 1)
        key = key.strip()
        try:
            out[key] = json.loads(raw)
        except json.JSONDecodeError:
            out[key] = raw
        except RecursionError:
            raise ValueError(f"{where}: the value of {key[:40]!r} is nested too deeply") from None
    return out
