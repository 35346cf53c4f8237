"""A Compare lane's key, "3·sdar-config-a*" (its number, its preset, "*" when it has custom settings), read back into
its parts, and the short name the page gives a lane ("Lane 3"). Keys name lanes in the session state, the `compare`
API and the lane events; the page prints names (components/compare/lane_names.py builds the full titles), and the
Run side's messages about lanes (a stop, the random streams) use the same short name.
"""
from __future__ import annotations

__all__ = ["CUSTOM", "split_key", "lane_short"]

CUSTOM = "*"  # the key's mark of a lane with custom settings (lanes.lane_configs)


def split_key(key: str) -> tuple[str, str, bool]:
    """"3·sdar-config-a*" -> ("3", "sdar-config-a", True); a name of another shape -> ("", name, False)."""
    number, dot, rest = str(key).partition("·")
    if not dot or not number.isdigit():
        return "", str(key), False
    return number, rest.removesuffix(CUSTOM), rest.endswith(CUSTOM)


def lane_short(key: str) -> str:
    """"Lane 3": the lane's name where there is room for no more (a plot's axis)."""
    number, name, _ = split_key(key)
    return f"Lane {number}" if number else name
