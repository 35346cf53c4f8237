"""What the host knows about the D2F pipeline between steps (pipeline.py, pipeline_step.py): every block's masks,
flags and state, where the cache ends, and the right-shifted family's last cached logit. Nothing here is read
from the device: the loop's control flow needs no transfer."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import torch


@dataclass
class PipeBlock:
    """One block of the pipeline as the host tracks it (no device reads needed)."""

    index: int  # 1, 2, ... (the prompt is block 0, as in the reference)
    start: int
    length: int
    added_step: int
    masks: list[int] = field(default_factory=list)  # absolute positions still masked, ascending
    complete: bool = False
    finished: bool = False
    state: str = "active"  # active | to_cache | cached

    @property
    def decoded_ratio(self) -> float:
        return (self.length - len(self.masks)) / self.length


@dataclass
class PipeState:
    done: torch.Tensor  # [blocks] bool on the device: block i + 1's complete flag, set as it is set
    # (the blocks' rules read it there: pipeline_rules.py `block_rules`)
    blocks: list[PipeBlock] = field(default_factory=list)
    cache_end: int = 0  # positions [0, cache_end) are in the KV cache
    prompt_pending: bool = True  # the first forward caches the prompt
    last_logit: Optional[torch.Tensor] = None  # right-shifted: the logit at cache_end - 1 (predicts cache_end)
    eos: bool = False  # a stop id was decoded: no more blocks join
    step: int = 0
