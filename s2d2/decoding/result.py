"""What a decode loop hands back to `generate`, shared by the block loop and the AR loop, and how a loop stopped
mid-block by its model (StopDecoding) rolls back to the last complete block."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from ..trace import BlockRecord, StepRecord


@dataclass
class LoopResult:
    x: torch.Tensor
    blocks: list[BlockRecord]
    steps: list[StepRecord]
    finish_reason: str


class StopDecoding(Exception):
    """Raised by the model's forward to end a run at once (the app's Stop button, a closed tab): the loop drops the
    block in flight and returns the run as its last complete block (AR: token) left it, finish_reason "cancelled" —
    what `should_stop` returns at that block's end, without the rest of the block's forwards."""


class Kept:
    """Where the run stood after its last complete block: what a StopDecoding rolls back to."""

    def __init__(self, rec: Any, x: torch.Tensor, blocks: list[BlockRecord], steps: list[StepRecord]) -> None:
        self.rec, self.x, self.blocks, self.steps = rec, x, blocks, steps
        self.mark()

    def mark(self) -> None:
        """Everything recorded so far is complete."""
        self.counts = (len(self.blocks), len(self.steps), len(self.rec.forwards))

    def restore(self, mask_id: int) -> tuple[list[BlockRecord], list[StepRecord]]:
        """Drop the records after the mark and undo their commits and edits (x changes only through those, and
        only inside the dropped block, whose positions all go back to MASK)."""
        n_blocks, n_steps, n_forwards = self.counts
        undone = [c.position for s in self.steps[n_steps:] for c in s.commits]
        undone += [e.position for s in self.steps[n_steps:] for e in s.edits]
        if undone:
            self.x[torch.tensor(undone, device=self.x.device)] = mask_id
        del self.blocks[n_blocks:], self.steps[n_steps:], self.rec.forwards[n_forwards:]
        return self.blocks, number_steps(self.steps)


def number_steps(steps: list[StepRecord]) -> list[StepRecord]:
    """Give every step its index in the run (steps are built before their position is known).

    A loop's list only grows at its end and is only cut back to a prefix (`Kept.restore`), so the steps not yet
    numbered are a run at the end: numbering walks back from the end to the first step already at its index, and
    a loop that numbers its list at every step (the stop check) pays for the new steps only, not for the run so far.
    """
    i = len(steps) - 1
    while i >= 0 and steps[i].index != i:
        steps[i].index = i
        i -= 1
    return steps
