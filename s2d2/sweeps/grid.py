"""Sweep grids and results: what a bench cell is, how per-problem rows aggregate, Pareto frontiers, and the
validation of a results file. Pure (no torch, no plotting): the bench runner and the app's Sweep tab share it.
"""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Optional

from .agreement import format_equals_ar, lossless_cell, lossless_line
from ..config import DecodeConfig, preset
from .results_file import FAMILIES, RESULTS_VERSION, validate_results  # noqa: F401  (the file schema lives there)
from .stats import paired_p, wilson_interval
from .sweep_time import time_line

REQUIRED = (  # every results file has these per cell (version 1 as first written)
    "name", "method", "policy", "block_length", "confidence_threshold", "n", "accuracy", "nfe_per_token",
    "wall_per_token", "tokens_per_forward", "query_tokens_per_token", "speedup_nfe_vs_ar", "speedup_wall_vs_ar",
    "mean_acceptance_length", "draft_acceptance_rate", "verify_rate", "baseline_ref", "speedup_nfe_vs_baseline",
    "speedup_wall_vs_baseline",
)
# Added later, optional when reading: the accuracy's Wilson 95 % interval and McNemar's exact p-values vs the AR
# cell and vs `baseline_ref` (both paired on the same problems). Cells also carry "correct_by_problem" (a string of
# '0'/'1', problem i at index i), which the paired tests need, and "config"; neither goes to the CSV.
STATS = ("accuracy_ci_low", "accuracy_ci_high", "p_vs_ar", "p_vs_baseline")
EDITS = ("edits_per_token",)  # LLaDA2.x self-corrections per generated token (0 for loops that never edit)
# Added with lossless mode: the fraction of problems whose output equals the AR cell's token for token (agreement.py;
# cells also carry "equals_ar_by_problem", '0'/'1' per problem, not in the CSV).
AGREEMENT = ("equals_ar",)
COLUMNS = REQUIRED[:7] + STATS[:2] + REQUIRED[7:] + STATS[2:] + EDITS + AGREEMENT  # results.csv columns, in order
ROW_KEYS = ("i", "correct", "nfe", "generated", "wall_s", "query_tokens", "num_drafts", "num_draft_tokens",
            "num_accepted_tokens", "verify_steps", "decided_steps")


@dataclass(frozen=True)
class Cell:
    name: str
    config: DecodeConfig

    @property
    def method(self) -> str:
        return {"ar": "ar", "diffusion": "dynamic", "s2d2": "s2d2"}[self.config.method]


def _cell(name: str, preset_name: str, **overrides: Any) -> Cell:
    return Cell(name, preset(preset_name, **overrides))


def default_grid() -> list[Cell]:
    """AR; the dynamic-threshold baseline over τ and B; S2D2 presets, policies and thresholds."""
    cells = [_cell("ar", "ar")]
    for b in (4, 8, 16):
        for tau in (0.95, 0.9, 0.8, 0.7, 0.5):
            cells.append(_cell(f"dynamic-tau{tau:g}-b{b}", "dynamic-baseline", block_length=b,
                               confidence_threshold=tau))
    cells += [_cell("sdar-config-a", "sdar-config-a"), _cell("sdar-config-b", "sdar-config-b")]
    for b in (4, 8, 16):
        if b != 4:
            cells.append(_cell(f"sdar-config-a-b{b}", "sdar-config-a", block_length=b))
        for tau in (-1.0, 0.5, 1.5):
            cells.append(_cell(f"s2d2-score{tau:g}-b{b}", "sdar-config-a", block_length=b, score_threshold=tau))
        cells.append(_cell(f"s2d2-hysteresis-b{b}", "sdar-config-a", block_length=b, policy="score_hysteresis",
                           score_type="difference_dynamic", penalty_coef=1.0, hysteresis_on=1.0, hysteresis_off=-1.0))
        cells.append(_cell(f"s2d2-ucb-b{b}", "sdar-config-a", block_length=b, policy="contextual_bandit_ucb"))
        cells.append(_cell(f"s2d2-span{max(2, b // 2)}-b{b}", "sdar-config-a", block_length=b,
                           policy="mask_span_length", min_span_length=max(2, b // 2)))
    return cells + beyond_paper_cells()


def beyond_paper_cells() -> list[Cell]:
    """The forward-saving options (beyond the paper) on the presets and the best S2D2 settings above, and the
    dynamic baseline with the same fused commit (fusing the commit helps any block decoder: the honest peer)."""
    rf = dict(kv_reuse=True, fused_commit=True)
    hysteresis = dict(policy="score_hysteresis", score_type="difference_dynamic", penalty_coef=1.0,
                      hysteresis_on=1.0, hysteresis_off=-1.0)
    cells = [_cell(n, n) for n in ("sdar-config-b+reuse", "sdar-config-b+fused", "sdar-config-b+adaptive",
                                   "sdar-config-b+all")]
    return cells + [
        _cell("sdar-config-b+reuse+fused", "sdar-config-b", **rf),
        _cell("sdar-config-a+reuse+fused", "sdar-config-a", **rf),
        _cell("s2d2-span8-b16+reuse+fused", "sdar-config-a", block_length=16, policy="mask_span_length",
              min_span_length=8, **rf),
        _cell("s2d2-score1.5-b16+reuse+fused", "sdar-config-a", block_length=16, score_threshold=1.5, **rf),
        _cell("s2d2-hysteresis-b4+reuse+fused", "sdar-config-a", block_length=4, **hysteresis, **rf),
        _cell("dynamic-tau0.8-b4+fused", "dynamic-baseline", confidence_threshold=0.8, fused_commit=True),
        _cell("dynamic-tau0.95-b8+fused", "dynamic-baseline", block_length=8, confidence_threshold=0.95,
              fused_commit=True),
        _cell("dynamic-tau0.9-b16+fused", "dynamic-baseline", block_length=16, confidence_threshold=0.9,
              fused_commit=True),
        _cell("lossless", "lossless"),
        _cell("lossless-b8", "lossless", block_length=8),
    ]


def llada2_grid() -> list[Cell]:
    """The LLaDA2.x sweep (block 32, the family's loop; for the bundled `tiny-llada2`): AR and lossless mode; the
    static, threshold (τ_mask) and threshold + editing (τ_mask × τ_edit) baselines; S2D2 Quality and Conservative
    with and without editing, and Quality's score threshold and τ_mask around the paper's values."""
    cells = [_cell("ar", "ar"), _cell("lossless", "lossless"), _cell("lossless-b32", "lossless", block_length=32),
             _cell("llada2-static", "llada2-static")]
    for tau in (0.9, 0.8, 0.7, 0.6, 0.5):
        cells.append(_cell(f"dynamic-tau{tau:g}", "llada2-dynamic", confidence_threshold=tau))
        cells.append(_cell(f"dynamic-edit-tau{tau:g}-edit0.5", "llada2-dynamic-edit", confidence_threshold=tau))
    for edit in (0.3, 0.7, 0.9):
        cells.append(_cell(f"dynamic-edit-tau0.7-edit{edit:g}", "llada2-dynamic-edit", editing_threshold=edit))
    cells.append(_cell("dynamic-edit-tau0.7-edit0.5-post4", "llada2-dynamic-edit", max_post_steps=4))
    cells += [_cell(n, n) for n in ("llada2-quality", "llada2-quality-noedit", "llada2-conservative",
                                    "llada2-conservative-noedit")]
    for tau in (-2.0, -1.0, 1.0, 2.0):  # Quality verifies iff K_hat - 4 >= tau: K_hat >= 2 ... 6
        cells.append(_cell(f"quality-score{tau:g}", "llada2-quality", score_threshold=tau))
    for tau in (0.5, 0.9):
        cells.append(_cell(f"quality-tau{tau:g}", "llada2-quality", confidence_threshold=tau))
    return cells


def quick_grid() -> list[Cell]:
    """Six cells: enough for one point per method and a visible trade-off."""
    return [
        _cell("ar", "ar"),
        _cell("dynamic-tau0.9-b4", "dynamic-baseline", confidence_threshold=0.9),
        _cell("dynamic-tau0.7-b4", "dynamic-baseline", confidence_threshold=0.7),
        _cell("sdar-config-a", "sdar-config-a"),
        _cell("sdar-config-b-b4", "sdar-config-b", block_length=4),
        _cell("s2d2-ucb-b4", "sdar-config-a", policy="contextual_bandit_ucb"),
    ]


def d2f_grid() -> list[Cell]:
    """The D2F pipeline (loop="pipeline") beside AR and the block loop's dynamic baseline at the same B: D2F's
    decoder (τ 0.9 and 0.7; a block joining at half of the last one, and only once it is done), S2D2 on it (minimum
    span 1 and B / 2) and the Dream stability setting."""
    cells = [_cell("ar", "ar")]
    for b in (4, 8):
        cells.append(_cell(f"dynamic-tau0.9-b{b}", "dynamic-baseline", block_length=b, confidence_threshold=0.9))
        cells.append(_cell(f"d2f-tau0.9-b{b}", "d2f", block_length=b))
        cells.append(_cell(f"d2f-s2d2-b{b}", "d2f-s2d2", block_length=b))
    cells += [
        _cell("d2f-tau0.7-b8", "d2f", block_length=8, confidence_threshold=0.7),
        _cell("d2f-tau0.9-b8-add1", "d2f", block_length=8, block_add_threshold=1.0),
        _cell("d2f-s2d2-span4-b8", "d2f-s2d2", block_length=8, min_span_length=4),
        _cell("d2f-s2d2-dream-b8", "d2f-s2d2-dream", block_length=8),
    ]
    return cells


GRIDS = {"default": default_grid, "quick": quick_grid, "llada2": llada2_grid, "d2f": d2f_grid}
MAX_GRID_BYTES = 16 * 2**20


def load_grid(spec: str) -> list[Cell]:
    """A named grid, or a JSON file: a list (or {"cells": [...]}) of {"name", "preset", "config": {overrides}}."""
    if spec in GRIDS:
        return GRIDS[spec]()
    path = Path(spec)
    if not path.is_file():
        raise ValueError(f"--grid: {spec!r} is neither a named grid ({', '.join(GRIDS)}) nor a JSON file")
    if path.stat().st_size > MAX_GRID_BYTES:
        raise ValueError(f"--grid: {spec[:200]} is larger than {MAX_GRID_BYTES // 2**20} MiB")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"--grid: {spec[:200]} is not valid JSON ({str(exc)[:200]})") from None
    except RecursionError:
        raise ValueError(f"--grid: {spec[:200]} is nested too deeply") from None
    items = data.get("cells") if isinstance(data, dict) else data
    if not isinstance(items, list) or not items:
        raise ValueError("--grid: expected a non-empty list of cells (or {\"cells\": [...]})")
    cells = [_grid_item(i, item) for i, item in enumerate(items)]
    names = [c.name for c in cells]
    if len(set(names)) != len(names):
        raise ValueError(f"--grid: cell names must be unique, got {names}")
    return cells


def _grid_item(i: int, item: Any) -> Cell:
    if not isinstance(item, dict):
        raise ValueError(f"--grid: cell {i} must be an object with 'name', 'preset' and/or 'config'")
    unknown = set(item) - {"name", "preset", "config"}
    if unknown:
        raise ValueError(f"--grid: cell {i} has unknown key(s) {sorted(unknown)}")
    overrides = item.get("config", {})
    if not isinstance(overrides, dict):
        raise ValueError(f"--grid: cell {i} 'config' must be an object of DecodeConfig options")
    try:
        cfg = preset(item["preset"], **overrides) if "preset" in item else DecodeConfig.from_dict(overrides)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"--grid: cell {i}: {exc}") from None
    return Cell(str(item.get("name") or item.get("preset") or f"cell{i}"), cfg)


def cell_key(cell: Cell, context: dict[str, Any]) -> str:
    """File stem of a cell's rows: its name plus a hash of everything that changes its numbers."""
    blob = json.dumps({"config": cell.config.to_dict(), **context}, sort_keys=True)
    slug = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in cell.name)[:60]
    return f"{slug}-{hashlib.sha1(blob.encode()).hexdigest()[:10]}"


# -- aggregation ----------------------------------------------------------------------------------------------

def _div(a: float, b: float) -> Optional[float]:
    return a / b if b else None


def summarize(cell: Cell, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """One results row from a cell's per-problem rows (sums first, then ratios: per-token means are pooled)."""
    tot = {k: sum(float(r[k]) for r in rows) for k in ROW_KEYS if k != "i"}
    cfg = cell.config
    low, high = wilson_interval(int(tot["correct"]), len(rows)) if rows else (None, None)
    return {
        "name": cell.name, "method": cell.method, "policy": cfg.policy if cfg.method == "s2d2" else None,
        "block_length": cfg.block_length,
        "confidence_threshold": None if cfg.method == "ar" else cfg.confidence_threshold,
        "n": len(rows), "accuracy": _div(tot["correct"], len(rows)),
        "accuracy_ci_low": low, "accuracy_ci_high": high, "p_vs_ar": None, "p_vs_baseline": None,
        "correct_by_problem": "".join("1" if r["correct"] else "0" for r in rows),
        "nfe_per_token": _div(tot["nfe"], tot["generated"]), "wall_per_token": _div(tot["wall_s"], tot["generated"]),
        "tokens_per_forward": _div(tot["generated"], tot["nfe"]),
        "query_tokens_per_token": _div(tot["query_tokens"], tot["generated"]),
        "speedup_nfe_vs_ar": None, "speedup_wall_vs_ar": None,
        "mean_acceptance_length": 1 + tot["num_accepted_tokens"] / tot["num_drafts"] if tot["num_drafts"] else None,
        "draft_acceptance_rate": _div(tot["num_accepted_tokens"], tot["num_draft_tokens"]),
        "verify_rate": _div(tot["verify_steps"], tot["decided_steps"]),
        "baseline_ref": None, "speedup_nfe_vs_baseline": None, "speedup_wall_vs_baseline": None,
        "edits_per_token": _div(sum(float(r.get("edits", 0)) for r in rows), tot["generated"]),
        "config": cfg.to_dict(),
    }


def add_speedups(cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Speedups vs the AR cell, and for S2D2 cells vs the baseline with the fewest forwards per token at equal or
    better accuracy (NFE is exact and deterministic, so the reference does not move between runs; wall time does)."""
    ar = next((c for c in cells if c["method"] == "ar"), None)
    base = [c for c in cells if c["method"] == "dynamic" and c["accuracy"] is not None]
    for c in cells:
        if ar is not None:
            c["speedup_nfe_vs_ar"] = _ratio(ar["nfe_per_token"], c["nfe_per_token"])
            c["speedup_wall_vs_ar"] = _ratio(ar["wall_per_token"], c["wall_per_token"])
        if c["method"] != "s2d2" or c["accuracy"] is None:
            continue
        peers = [b for b in base if b["accuracy"] >= c["accuracy"] and b["nfe_per_token"]]
        if peers:
            best = min(peers, key=lambda b: (b["nfe_per_token"], b["name"]))
            c["baseline_ref"] = best["name"]
            c["speedup_nfe_vs_baseline"] = _ratio(best["nfe_per_token"], c["nfe_per_token"])
            c["speedup_wall_vs_baseline"] = _ratio(best["wall_per_token"], c["wall_per_token"])
    return cells


def add_paired_tests(cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """McNemar's exact p of every cell vs the AR cell, and of S2D2 cells vs their `baseline_ref` (same problems)."""
    ar = next((c for c in cells if c["method"] == "ar"), None)
    by_name = {c["name"]: c for c in cells}
    for c in cells:
        mine = c.get("correct_by_problem")
        c["p_vs_ar"] = None if ar is None or c is ar else paired_p(ar.get("correct_by_problem"), mine)
        ref = by_name.get(c.get("baseline_ref") or "")
        c["p_vs_baseline"] = None if ref is None else paired_p(ref.get("correct_by_problem"), mine)
    return cells


def accuracy_interval(cell: dict[str, Any]) -> Optional[tuple[float, float]]:
    """The cell's Wilson 95 % interval: stored, or (for files written before intervals) from accuracy and n."""
    low, high = cell.get("accuracy_ci_low"), cell.get("accuracy_ci_high")
    if _finite(low) and _finite(high):
        return float(low), float(high)
    acc, n = cell.get("accuracy"), cell.get("n")
    if not _finite(acc) or not isinstance(n, int) or n < 1:
        return None
    return wilson_interval(min(n, max(0, round(acc * n))), n)  # accuracy is k / n exactly, so k is recovered


def _ratio(a: Optional[float], b: Optional[float]) -> Optional[float]:
    return a / b if a is not None and b else None


def pareto_frontier(points: Iterable[tuple[float, float]]) -> list[int]:
    """Indices of the points no other point beats (lower cost x and higher accuracy y), sorted by x."""
    pts = [(x, y, i) for i, (x, y) in enumerate(points) if _finite(x) and _finite(y)]
    pts.sort(key=lambda p: (p[0], -p[1]))
    out, best = [], -math.inf
    for x, y, i in pts:
        if y > best:
            out.append(i)
            best = y
    return out


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


# -- results files ----------------------------------------------------------------------------------------------

def csv_rows(cells: list[dict[str, Any]]) -> list[list[Any]]:
    return [list(COLUMNS)] + [[_csv(c.get(k)) for k in COLUMNS] for c in cells]


def _csv(v: Any) -> Any:
    return "" if v is None else (round(v, 6) if isinstance(v, float) else v)


def headline(cells: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """(role, cell) for AR, the best dynamic baseline (most accurate, then fastest), the best S2D2 cell (the
    fastest with accuracy at least the baseline's; else the most accurate, then fastest) and the lossless-mode cell
    with the fewest forwards (when the sweep has one)."""
    def fastest(cs: list[dict[str, Any]]) -> Optional[dict[str, Any]]:
        cs = [c for c in cs if c.get("wall_per_token") is not None and c.get("accuracy") is not None]
        return min(cs, key=lambda c: (-c["accuracy"], c["wall_per_token"])) if cs else None

    out = []
    ar = next((c for c in cells if c["method"] == "ar"), None)
    base = fastest([c for c in cells if c["method"] == "dynamic"])
    s2d2 = [c for c in cells if c["method"] == "s2d2" and c.get("wall_per_token") is not None]
    good = [c for c in s2d2 if base is None or (c["accuracy"] or 0) >= (base["accuracy"] or 0)]
    best = min(good, key=lambda c: c["wall_per_token"]) if good else fastest(s2d2)
    roles = (("AR", ar), ("best dynamic-threshold baseline", base), ("best S2D2", best),
             ("lossless (AR-identical by construction)", lossless_cell(cells)))
    for role, cell in roles:
        if cell is not None:
            out.append((role, cell))
    return out


def readme_table(data: dict[str, Any]) -> str:
    """The README's results table (markdown) from a results.json object: accuracies with their 95 % intervals,
    McNemar's exact p on the same problems vs AR and vs the best baseline (– when the file has no per-problem
    results), how many outputs equal AR's token for token, and the lossless line."""
    rows = headline(data["cells"])
    base = next((c for r, c in rows if r.startswith("best dynamic")), None)
    ar = next((c for r, c in rows if r == "AR"), None)
    lines = ["| | cell | accuracy [95 % CI] | NFE/token | wall speedup vs AR | wall speedup vs baseline | "
             "p vs AR | p vs baseline | output = AR |", "|---|---|---|---|---|---|---|---|---|"]
    for role, c in rows:
        vs_base = _ratio(base["wall_per_token"], c["wall_per_token"]) if base is not None else None
        p_ar, p_base = (None if ref is None or ref is c else
                        paired_p(ref.get("correct_by_problem"), c.get("correct_by_problem")) for ref in (ar, base))
        lines.append(f"| {role} | `{c['name']}` | {format_accuracy(c)} | {_fmt(c['nfe_per_token'])} | "
                     f"{_fmt(c['speedup_wall_vs_ar'], '×')} | {_fmt(vs_base, '×')} | {format_p(p_ar)} | "
                     f"{format_p(p_base)} | {format_equals_ar(c)} |")
    m = data.get("meta", {})
    lines.append(f"\n{m.get('model', '?')} on {m.get('task', '?')} (n = {m.get('n', '?')}, gen_length "
                 f"{m.get('gen_length', '?')}, {m.get('device', '?')}); speedups per generated token. Accuracy "
                 f"intervals are Wilson 95 %; p is McNemar's exact two-sided test on the same problems (the chance "
                 f"of a split of the problems they disagree on at least this uneven if both were equally accurate: "
                 f"a large p means no detectable difference, not proof of equality). \"output = AR\": problems "
                 f"whose output equals the AR cell's token for token, up to the first stop id.")
    if "decode_seconds" in m or "seconds" in m:
        lines.append("\n" + time_line(m))
    line = lossless_line(data["cells"])
    if line is not None:
        lines.append(f"\n**{line}.**")
    return "\n".join(lines)


def format_accuracy(cell: dict[str, Any]) -> str:
    """'0.97 [0.936, 0.986]' (the interval omitted when unknown)."""
    ci = accuracy_interval(cell)
    text = _fmt(cell.get("accuracy"))
    return text if ci is None else f"{text} [{ci[0]:.3f}, {ci[1]:.3f}]"


def format_p(p: Optional[float]) -> str:
    if p is None:
        return "–"
    return "< 0.001" if p < 0.001 else f"{p:.2g}"


def _fmt(v: Optional[float], unit: str = "") -> str:
    return "–" if v is None else f"{v:.3g}{unit}"
