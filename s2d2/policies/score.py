"""The verification score shared by the scoring policies (docs/algorithm.md, 'Expected accepted tokens and the score'):
s = K̂ − c or s = K̂ − c·N_hi."""
from __future__ import annotations

import math
from typing import Any, Optional

from ..trace.records import PolicyInputs
from .base import fmt, num
from .knob import Knob

SCORE_TYPES = ("difference_static", "difference_dynamic")

SCORE_KNOBS = (
    Knob("score_type", "Score type", "choice", choices=SCORE_TYPES,
         help="difference_static: s = K̂ − c; difference_dynamic: s = K̂ − c·N_hi (N_hi = confident masks)"),
    Knob("penalty_coef", "Penalty c", "float", 0.0, 1e6, 0.1, ui=(0.0, 10.0),
         short="penalty c", help="what a verify forward costs, in expected accepted tokens"),
)


def score(cfg: Any, k_hat: float, n_hi: int, span_len: int) -> float:
    """s = K̂ − c (static) or K̂ − c·N_hi (dynamic); −∞ for an empty span. `cfg`: a config or settings object."""
    if span_len <= 0:
        return -math.inf
    c = cfg.penalty_coef
    return k_hat - c if cfg.score_type == "difference_static" else k_hat - c * n_hi


def score_expression(cfg: Any, k_hat: float, n_hi: int, span_len: int, s: Optional[float] = None) -> str:
    """The score written out for a reason line: "s = K̂ − c·N_hi = 1.73 − 2·0 = 1.73". `s`: the score, when the
    caller has it (`score` of the same arguments)."""
    s = score(cfg, k_hat, n_hi, span_len) if s is None else s
    if span_len <= 0:
        return "s = -∞ (empty span)"
    c = num(cfg.penalty_coef)
    if cfg.score_type == "difference_static":
        return f"s = K̂ − c = {fmt(k_hat)} − {c} = {fmt(s)}"
    return f"s = K̂ − c·N_hi = {fmt(k_hat)} − {c}·{n_hi} = {fmt(s)}"


def score_details(cfg: Any, inputs: PolicyInputs, s: Optional[float] = None) -> dict[str, Any]:
    """The score's part of a decision's details (`s`: the score, when the caller has it)."""
    return {
        "span_len": inputs.span_len,
        "k_hat": float(inputs.k_hat),
        "n_hi": inputs.n_hi,
        "score_type": cfg.score_type,
        "penalty_coef": float(cfg.penalty_coef),
        "score": score(cfg, inputs.k_hat, inputs.n_hi, inputs.span_len) if s is None else s,
    }
