"""Lookup tables over a trace, built once per trace and shared by every view (pure, no model)."""
from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Optional

from s2d2.trace import BlockRecord, Commit, Edit, MaskDraft, StepRecord, Trace, VerifyPosition

MASK_TEXT = "░"


@dataclass
class TraceIndex:
    trace: Trace
    commit_of: dict[int, tuple[int, Commit]] = field(default_factory=dict)  # position -> (step index, commit)
    block_of_step: list[Optional[BlockRecord]] = field(default_factory=list)
    block_by_index: dict[int, BlockRecord] = field(default_factory=dict)
    commit_forward: dict[int, int] = field(default_factory=dict)  # block index -> its commit forward index
    block_at: dict[int, BlockRecord] = field(default_factory=dict)  # position -> the block holding it
    edits_of: dict[int, list[tuple[int, Edit]]] = field(default_factory=dict)  # position -> [(step index, edit)]

    @property
    def n_steps(self) -> int:
        return len(self.trace.steps)

    def step_record(self, step: int) -> Optional[StepRecord]:
        """The record of the step shown at scrubber value `step` (state after `step` steps): steps[step-1]."""
        return self.trace.steps[step - 1] if 1 <= step <= self.n_steps else None

    def draft(self, step: StepRecord, pos: int) -> Optional[MaskDraft]:
        return next((d for d in step.drafts if d.position == pos), None)

    def verify_row(self, step: StepRecord, pos: int) -> Optional[VerifyPosition]:
        if step.verification is None:
            return None
        return next((r for r in step.verification.positions if r.position == pos), None)

    def block_of_position(self, pos: int) -> Optional[BlockRecord]:
        return self.block_at.get(pos)

    def edits_before(self, pos: int, step: int) -> list[tuple[int, Edit]]:
        """The edits of `pos` made by the first `step` steps (scrubber value), oldest first."""
        return [(i, e) for i, e in self.edits_of.get(pos, []) if i < step]


def build_index(trace: Trace) -> TraceIndex:
    idx = TraceIndex(trace)
    idx.block_by_index = {b.index: b for b in trace.blocks}
    for b in trace.blocks:
        for pos in range(b.start, b.start + b.length):
            idx.block_at.setdefault(pos, b)
    for s in trace.steps:
        for c in s.commits:
            idx.commit_of[c.position] = (s.index, c)
        for e in s.edits:
            idx.edits_of.setdefault(e.position, []).append((s.index, e))
        block = idx.block_by_index.get(s.block)
        if block is None and s.window:
            block = BlockRecord(s.block, s.window[0], s.window[1] - s.window[0], 0)
        idx.block_of_step.append(block)
    for f in trace.forwards:
        if f.kind == "commit":
            idx.commit_forward[f.block] = f.index
    return idx


_CACHE: "OrderedDict[int, TraceIndex]" = OrderedDict()
_CACHE_SIZE = 64


def index_of(trace: Trace) -> TraceIndex:
    """Memoised build_index, keyed by object identity (the entry keeps the trace alive, so ids stay valid)."""
    key = id(trace)
    hit = _CACHE.get(key)
    if hit is not None and hit.trace is trace:
        _CACHE.move_to_end(key)
        return hit
    idx = build_index(trace)
    _CACHE[key] = idx
    while len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return idx


def clamp_step(trace: Trace, step: Any) -> int:
    """Scrubber values arrive as floats or junk from the UI: clamp to [0, n_steps]."""
    try:
        value = int(round(float(step)))
    except (TypeError, ValueError, OverflowError):
        value = 0
    return max(0, min(value, len(trace.steps)))


def num(value: Any) -> Optional[float]:
    """A float from a trace value that may be None, "inf" or "-inf" (free-form details); None otherwise."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str) and value in ("inf", "-inf", "nan"):
        return float(value)
    return None


def fmt(value: Optional[float], digits: int = 3) -> str:
    if value is None:
        return "–"
    if math.isinf(value):
        return "∞" if value > 0 else "−∞"
    if math.isnan(value):
        return "nan"
    return f"{value:.{digits}f}"
