"""The close name for a mistyped one, said first in an error: a list of every allowed name may be long and cut,
and the name the user meant should never be what is lost."""
from __future__ import annotations

import difflib
from typing import Iterable


def did_you_mean(name: object, choices: Iterable[str]) -> str:
    """' (did you mean 'x'?)' for the closest of `choices` to `name` (case-insensitive), or '' when none is close
    (difflib's ratio ≥ 0.6) or `name` is not a short string."""
    if not isinstance(name, str) or len(name) > 200:  # (a huge or odd value: nothing to compare, nothing to echo)
        return ""
    by_lower = {c.lower(): c for c in choices}
    close = difflib.get_close_matches(name.lower(), list(by_lower), n=1)
    return f" (did you mean {by_lower[close[0]]!r}?)" if close else ""
