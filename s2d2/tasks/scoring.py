"""Named scorers: is a model's output right, given the gold answer string of a problem?

- ``arithmetic``: the bundled task's strict rule, the integer after the output's first ``####`` equals the gold.
- ``gsm8k``: GSM8K's two rules as lm-eval applies them: the number after ``####`` (strict), else the output's last
  number (flexible extract); numbers compare as exact decimals, ``1,234`` and ``$5.00`` included. The gold may be
  a full GSM8K solution (its ``#### N`` line is read) or a bare number.
- ``exact``: the whole output equals the gold, whitespace runs collapsed (for short-answer sets).
- ``humaneval`` / ``mbpp``: the generated code passes the problem's tests in the sandbox (tasks/code.py, pass@1);
  the gold is the problem's JSON, built by the code-task reader. They run only after the user's opt-in.

`check_gold` runs when a task loads, so a gold a scorer cannot read is a clear error before any decoding.
"""
from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Callable, Optional

from .arithmetic import extract_answer
from .code import read_gold, score_humaneval, score_mbpp

_NUMBER = re.compile(r"-?\$?\s?\d[\d,]*(?:\.\d+)?")
_AFTER_HASHES = re.compile(r"####\s*(\S+)")


def parse_number(text: str) -> Optional[Decimal]:
    """'1,234' -> 1234, '$5.00' -> 5.00, '-3' -> -3; None when `text` is not one number."""
    cleaned = text.strip().rstrip(".").replace(",", "").replace("$", "").replace(" ", "")
    try:
        value = Decimal(cleaned)
    except InvalidOperation:
        return None
    return value if value.is_finite() else None


def last_number(text: str) -> Optional[Decimal]:
    found = _NUMBER.findall(text or "")
    return parse_number(found[-1]) if found else None


def gsm8k_answer(text: str) -> Optional[Decimal]:
    """The number after the first ``####`` (strict match); None when there is none."""
    m = _AFTER_HASHES.search(text or "")
    return parse_number(m.group(1)) if m else None


def _gsm8k_gold(gold: str) -> Optional[Decimal]:
    return gsm8k_answer(gold) if "####" in gold else parse_number(gold)


def score_gsm8k(output: str, gold: str) -> bool:
    want = _gsm8k_gold(gold)
    got = gsm8k_answer(output)
    if got is None:
        got = last_number(output)
    return want is not None and got == want


def _arithmetic_gold(gold: str) -> Optional[int]:
    return extract_answer(gold) if "####" in gold else _int(gold)


def _int(text: str) -> Optional[int]:
    try:
        return int(text.strip().replace(",", ""))
    except ValueError:
        return None


def score_arithmetic(output: str, gold: str) -> bool:
    want = _arithmetic_gold(gold)
    return want is not None and extract_answer(output) == want


def _normalized(text: str) -> str:
    return " ".join((text or "").split())


def score_exact(output: str, gold: str) -> bool:
    return _normalized(output) == _normalized(gold)


SCORERS: dict[str, Callable[[str, str], bool]] = {
    "gsm8k": score_gsm8k, "exact": score_exact, "arithmetic": score_arithmetic,
    "humaneval": score_humaneval, "mbpp": score_mbpp,
}
CODE_SCORERS = ("humaneval", "mbpp")  # files in these formats are read by tasks/code.py
_GOLD_READERS: dict[str, Callable[[str], object]] = {
    "gsm8k": _gsm8k_gold, "arithmetic": _arithmetic_gold, "exact": lambda g: _normalized(g) or None,
    "humaneval": lambda g: read_gold(g, "humaneval"), "mbpp": lambda g: read_gold(g, "mbpp"),
}


def check_gold(scorer: str, gold: str) -> Optional[str]:
    """None when `scorer` can read `gold`, else why not (for the loader's error message)."""
    if _GOLD_READERS[scorer](gold) is None:
        need = {"gsm8k": "a '#### N' line or a number", "arithmetic": "a '#### N' line or an integer",
                "exact": "a non-empty string", "humaneval": "a HumanEval-format file",
                "mbpp": "an MBPP-format file"}[scorer]
        return f"answer {gold[:60]!r} is not readable by scorer {scorer} (needs {need})"
    return None
