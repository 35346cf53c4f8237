"""What a decode loop hands back to `generate`, shared by the block loop and the AR loop."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..trace import BlockRecord, StepRecord


@dataclass
class LoopResult:
    x: torch.Tensor
    blocks: list[BlockRecord]
    steps: list[StepRecord]
    finish_reason: str


def number_steps(steps: list[StepRecord]) -> list[StepRecord]:
    """Give every step its index in the run (steps are built before their position is known)."""
    for i, s in enumerate(steps):
        s.index = i
    return steps
