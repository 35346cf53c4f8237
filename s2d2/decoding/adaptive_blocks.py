"""Adaptive block sizes (`adaptive_block`, beyond the paper) in a block loop: the next block's length from the
finished block's verifications (s2d2/policies/adaptive_block.py), and the sequence a run returns, which ends where
its last block ends (the allocation is only an upper bound: layout.py). Shared by batch 1's loop (decoder.py) and
the batch-first one (lockstep_block.py), so both take the same lengths."""
from __future__ import annotations

from typing import Optional

import torch

from ..config import DecodeConfig
from ..policies import AdaptiveBlock, BlockFeedback
from ..trace import BlockRecord, StepRecord


def next_block_length(rule: Optional[AdaptiveBlock], cfg: DecodeConfig, blk: BlockRecord,
                      block_steps: list[StepRecord], next_start: int) -> tuple[int, str]:
    """(length, reason) of the block after `blk`, whose steps are `block_steps`: cfg's length without a rule."""
    if rule is None:
        return cfg.block_length, ""
    verified = [s for s in block_steps if s.verification is not None]
    feedback = BlockFeedback(blk.length, [s.verification.accepted_len for s in verified],  # type: ignore[union-attr]
                             [s.span[1] for s in verified])
    choice = rule.decide(feedback, next_start)
    return choice.length, choice.reason


def decoded_layout(x: torch.Tensor, cfg: DecodeConfig, blocks: list[BlockRecord]) -> torch.Tensor:
    """The sequence a block run returns: with adaptive blocks it ends where the last decoded block ends."""
    if cfg.adaptive_block and blocks:
        return x[: blocks[-1].start + blocks[-1].length]
    return x
