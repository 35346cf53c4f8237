"""Does a decode reproduce AR? Token-for-token agreement of two outputs, and a sweep cell's `equals_ar` rate.

An output is compared "up to the first stop id or its length budget" (docs/algorithm.md,
'Acceptance modes and AR-exactness'): a row holds the generated ids cut before the first stop id (at most gen_length of
them) and whether a stop id ended it. A stop counts as one more token, so an output that stopped and one that went on
differ there; an output that ended on its budget is compared only as far as it got (the right-shifted family decodes
G // B whole blocks, so it can end before AR's G tokens). Pure (no torch): the bench runner and tests share it.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

STOP = -1  # stands for "a stop id ended the output here" (token ids are never negative)


def same_output(a: Sequence[int], a_stopped: bool, b: Sequence[int], b_stopped: bool) -> bool:
    """True when the two outputs agree token for token as far as both go (a stop is a token)."""
    sa = list(a) + ([STOP] if a_stopped else [])
    sb = list(b) + ([STOP] if b_stopped else [])
    n = min(len(sa), len(sb))
    return sa[:n] == sb[:n]


def _has_output(row: dict[str, Any]) -> bool:
    return isinstance(row.get("output"), list) and isinstance(row.get("stopped"), bool)


def agreement_bits(reference: list[dict[str, Any]], rows: list[dict[str, Any]]) -> Optional[str]:
    """'1' where problem i's output equals the reference's (same problems, same order); None when a row of either
    side carries no output (rows written before outputs were kept)."""
    if len(reference) != len(rows) or not all(_has_output(r) for r in (*reference, *rows)):
        return None
    return "".join("1" if same_output(r["output"], r["stopped"], o["output"], o["stopped"]) else "0"
                   for r, o in zip(reference, rows))


def add_equals_ar(cells: list[dict[str, Any]], rows: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Each cell's `equals_ar` (fraction of problems whose output is AR's, token for token) and the per-problem
    string behind it, against the first AR cell of the sweep; None for the AR cell itself, and for every cell when
    the sweep has no AR cell or its rows carry no outputs. `rows[k]` are cell k's rows, problem i at index i."""
    ar = next((k for k, c in enumerate(cells) if c["method"] == "ar"), None)
    for k, cell in enumerate(cells):
        bits = None if ar is None or k == ar else agreement_bits(rows[ar], rows[k])
        cell["equals_ar_by_problem"] = bits
        cell["equals_ar"] = bits.count("1") / len(bits) if bits else None
    return cells


# -- reporting ----------------------------------------------------------------------------------------------------

def identical_count(cell: dict[str, Any]) -> Optional[tuple[int, int]]:
    """(problems whose output is AR's, problems) of a cell, or None when unknown."""
    bits = cell.get("equals_ar_by_problem")
    if isinstance(bits, str) and bits:
        return bits.count("1"), len(bits)
    rate, n = cell.get("equals_ar"), cell.get("n")
    if isinstance(rate, (int, float)) and isinstance(n, int) and n > 0:
        return round(rate * n), n
    return None


def format_equals_ar(cell: dict[str, Any]) -> str:
    """'200/200' (– when unknown or for the AR cell itself)."""
    got = identical_count(cell)
    return "–" if got is None else f"{got[0]}/{got[1]}"


def is_lossless(cell: dict[str, Any]) -> bool:
    """A cell whose configuration carries the AR-exactness guarantee (docs/algorithm.md,
    'Acceptance modes and AR-exactness'): greedy_exact acceptance and verification at every step (an s2d2 cell with an
    always-verifying rule)."""
    cfg = cell.get("config") or {}
    if cell.get("method") != "s2d2" or cfg.get("acceptance") != "greedy_exact":
        return False
    policy = cfg.get("policy")
    return policy == "always" or (policy == "mask_span_length" and cfg.get("min_span_length") == 1)


def lossless_cell(cells: list[dict[str, Any]]) -> Optional[dict[str, Any]]:
    """The lossless-mode cell with the fewest forwards per token (None when the sweep has none or no AR cell)."""
    found = [c for c in cells if is_lossless(c) and c.get("nfe_per_token") and c.get("speedup_nfe_vs_ar")
             and identical_count(c) is not None]
    return min(found, key=lambda c: (c["nfe_per_token"], c["name"])) if found else None


def lossless_line(cells: list[dict[str, Any]]) -> Optional[str]:
    """The README's one-line lossless result, e.g. "AR-identical output at 3.42× fewer forwards (200/200 problems
    token for token, `lossless`)"; None when the sweep has no lossless cell. Forwards only: NFE is exact, while a
    sweep's wall times depend on what else the machine ran (measure wall time side by side, benchmarks/)."""
    c = lossless_cell(cells)
    if c is None:
        return None
    k, n = identical_count(c)  # type: ignore[misc]
    lead = "AR-identical output" if k == n else f"AR-identical output on {k}/{n} problems"
    return f"{lead} at {c['speedup_nfe_vs_ar']:.2f}× fewer forwards ({k}/{n} problems token for token, `{c['name']}`)"
