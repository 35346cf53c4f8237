"""The schema of a sweep results file (results.json, written by `python -m s2d2 bench`), declared once.

Same approach as the trace (s2d2/trace/fields.py): annotated dataclasses validated by pydantic, one readable line per
rejection. Keys a cell carries beyond the declared columns are dropped on reading; add a column here (one line)
to keep it.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, Optional

from pydantic import Field, Strict

from ..trace.fields import Count, Free, Name, items, load_as, parse_json, shown

RESULTS_VERSION = 1
FAMILIES = ("ar", "dynamic", "s2d2")  # the "method" of a cell: one Pareto frontier each
MAX_CELLS = 2000
MAX_PROBLEMS = 100_000

MAX_COST = 1e9  # no decode costs a billion forwards or seconds per token, nor is sped up a billion times; a finite
# 1e308 would overflow the plots' axis arithmetic (x 1.15 is inf)
Rate = Optional[Annotated[float, Strict(), Field(ge=0, le=1, allow_inf_nan=False)]]
Cost = Optional[Annotated[float, Strict(), Field(ge=0, le=MAX_COST, allow_inf_nan=False)]]  # per-token costs, ratios
# forwards and seconds per generated token: a decode takes at least one forward, so 0 is no measurement (and has no
# place on the plots' log axes)
PositiveCost = Optional[Annotated[float, Strict(), Field(gt=0, le=MAX_COST, allow_inf_nan=False)]]


@dataclass
class ResultsCell:
    name: Name
    method: Literal[FAMILIES]
    policy: Optional[Name]
    block_length: Optional[Count]
    confidence_threshold: Cost
    n: Optional[Count]
    accuracy: Rate
    nfe_per_token: PositiveCost
    wall_per_token: PositiveCost
    tokens_per_forward: Cost
    query_tokens_per_token: Cost
    speedup_nfe_vs_ar: Cost
    speedup_wall_vs_ar: Cost
    mean_acceptance_length: Cost
    draft_acceptance_rate: Rate
    verify_rate: Rate
    baseline_ref: Optional[Name]
    speedup_nfe_vs_baseline: Cost
    speedup_wall_vs_baseline: Cost
    config: Free = field(default_factory=dict)
    # Added with distributed sweeps (optional, absent in older files): the accuracy's Wilson 95 % interval,
    # McNemar's exact p vs the AR cell and vs baseline_ref, and per-problem correctness ('0'/'1', problem i at i).
    accuracy_ci_low: Rate = None
    accuracy_ci_high: Rate = None
    p_vs_ar: Rate = None
    p_vs_baseline: Rate = None
    correct_by_problem: Optional[Annotated[str, Strict(), Field(max_length=MAX_PROBLEMS, pattern=r"^[01]*$")]] = None
    # Added with the LLaDA2.x editing loop (optional, absent in older files): self-corrections per generated token.
    edits_per_token: Cost = None
    # Added with lossless mode (optional, absent in older files): the fraction of problems whose output equals the
    # AR cell's token for token, and which ones ('0'/'1', problem i at i); None for the AR cell itself.
    equals_ar: Rate = None
    equals_ar_by_problem: Optional[Annotated[str, Strict(), Field(max_length=MAX_PROBLEMS, pattern=r"^[01]*$")]] = None


@dataclass
class ResultsFile:
    version: Literal[RESULTS_VERSION]
    cells: items(ResultsCell, MAX_CELLS)
    meta: Free = field(default_factory=dict)


def validate_results(data: Any) -> dict[str, Any]:
    """A checked results object as plain data; ValueError with one line naming the first problem."""
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        raise ValueError("results: expected a JSON object with a 'cells' list (the results.json that bench writes)")
    if data.get("version") != RESULTS_VERSION:
        raise ValueError(f"results.version: this reads version {RESULTS_VERSION}, got {shown(data.get('version'), 20)}")
    checked = dataclasses.asdict(load_as(ResultsFile, data, "results"))
    for i, cell in enumerate(checked["cells"]):
        for key in ("correct_by_problem", "equals_ar_by_problem"):
            bits = cell[key]
            if bits is not None and len(bits) != cell["n"]:
                raise ValueError(f"results.cells[{i}].{key}: expected n = {cell['n']} characters, got {len(bits)}")
    return checked


def read_results(text: str | bytes) -> dict[str, Any]:
    return validate_results(parse_json(text, "results"))
