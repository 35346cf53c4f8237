"""Lookup tables over a trace, built once per trace and shared by every view (pure, no model)."""
from __future__ import annotations

import math
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
    commit_forward: dict[int, int] = field(default_factory=dict)  # block -> the forward that committed it
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

    def answer_block(self, block_index: int) -> int:
        """The block's number as a reader counts it: 1 = the first block that decodes answer tokens (the engine's
        indices also count the blocks that hold only prompt)."""
        first = self.trace.blocks[0].index if self.trace.blocks else 0
        return block_index - first + 1

    @property
    def end_position(self) -> Optional[int]:
        """Absolute position of the stop token that ends the answer (None when the run did not stop on one)."""
        footer = self.trace.footer
        if footer is None or footer.stop_position is None:
            return None
        return len(self.trace.header.prompt_ids) + footer.stop_position

    @property
    def answer_end(self) -> Optional[int]:
        """The first absolute position the answer leaves out: its stop token, else the end of the length asked for
        (a block is decoded whole, so a step may commit tokens past it); None without a footer."""
        if self.trace.footer is None:
            return None
        end = self.end_position
        return end if end is not None else len(self.trace.header.prompt_ids) + self.trace.header.gen_length

    def after_end(self, step: int, pos: int) -> bool:
        """True when `pos` lies after the stop token and that token is committed by scrubber value `step`."""
        end = self.end_position
        if end is None or pos <= end:
            return False
        settled = self.final_step(end)
        return settled is not None and settled < step

    def final_step(self, pos: int) -> Optional[int]:
        """Index of the step that gave `pos` its final token: its last edit (LLaDA2.x), else its commit."""
        edits = self.edits_of.get(pos)
        if edits:
            return edits[-1][0]
        hit = self.commit_of.get(pos)
        return hit[0] if hit is not None else None

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
    cached = [(e.block, s.forwards[0]) for s in trace.steps for e in s.events if e.event == "cached" and s.forwards]
    if cached or trace.header.config.get("loop") == "pipeline":  # D2F: the forward of the step with the event
        idx.commit_forward.update(cached)
        return idx
    previous = {b.index: a.index for a, b in zip(trace.blocks, trace.blocks[1:])}
    for f in trace.forwards:
        if f.kind == "commit":
            idx.commit_forward[f.block] = f.index
        elif f.kind == "commit+draft" and f.block in previous:  # fused: it commits the block before its own
            idx.commit_forward[previous[f.block]] = f.index
    return idx


def index_of(trace: Trace) -> TraceIndex:
    """build_index, memoised on the trace object itself: the index lives exactly as long as its trace (a global
    cache keyed by id would keep every recently seen trace, however large, alive)."""
    idx = trace.__dict__.get("_s2d2_index")
    if idx is None:
        idx = build_index(trace)
        trace.__dict__["_s2d2_index"] = idx
    return idx


def clamp_step(trace: Trace, step: Any) -> int:
    """Scrubber values arrive as floats or junk from the UI: clamp to [0, n_steps], halves rounded up (as the
    browser's scrubber snaps them: 2.5 is step 3)."""
    try:
        value = math.floor(float(step) + 0.5)
    except (TypeError, ValueError, OverflowError):
        value = 0
    return max(0, min(value, len(trace.steps)))


def show_value(value: Any) -> str:
    """A metric or score for a table cell: "–" for missing or NaN, 3 decimals for floats."""
    if value is None:
        return "–"
    if isinstance(value, float):
        return "–" if math.isnan(value) else fmt(value)
    return str(value)


def decisive(value: float, reference: float, digits: int = 2, most: int = 6) -> tuple[str, str]:
    """(value, reference) printed with enough decimals to tell them apart, never a bare "-0.00": "s = 2.00 < τ 2.00"
    becomes "s = 1.9987 < τ 2.0000". The precision that decides a comparison is the precision it is printed with."""
    if not (math.isfinite(value) and math.isfinite(reference)):
        return fmt(value, digits), fmt(reference, digits)
    d = digits
    for d in range(digits, most + 1):
        a, b = f"{value:.{d}f}", f"{reference:.{d}f}"
        rounded_to_zero = float(a) == 0.0 and value != 0.0
        if (a != b or value == reference) and not rounded_to_zero:
            break
    return f"{value:.{d}f}".replace("-", "−"), f"{reference:.{d}f}".replace("-", "−")


def fmt(value: Optional[float], digits: int = 3) -> str:
    if value is None:
        return "–"
    if math.isinf(value):
        return "∞" if value > 0 else "−∞"
    if math.isnan(value):
        return "nan"
    return f"{value:.{digits}f}"


def fmt_prob(value: Optional[float], digits: int = 3) -> str:
    """A probability or ratio: like fmt, but a tiny non-zero value keeps its size (2e-05, not a false 0.000)."""
    if value is not None and 0 < abs(value) < 0.5 * 10 ** -digits:
        return f"{value:.0e}"
    return fmt(value, digits)
