"""Counted nouns in the app's sentences: "1 step", "2 steps", never "1 steps".

Every user-facing f-string that puts a number before a noun goes through `plural` (tests/app/test_words_and_marks.py
scans the source for the ones that do not), so a run of one step, one lane or one block reads right.
"""
from __future__ import annotations

from typing import Optional


def plural(count: int, noun: str, many: Optional[str] = None, grouped: bool = False) -> str:
    """`count` and `noun`, the noun plural unless the count is exactly one ("0 steps", "1 step", "2 steps").

    `many` is the plural when it is not noun + "s" ("entries"); `grouped` writes thousands with commas (2,000)."""
    number = f"{count:,}" if grouped else f"{count}"
    return f"{number} {noun if count == 1 else (many or noun + 's')}"
