"""Where a block run's blocks lie, per family and budget (pure: no torch), shared by the decoder, `generate`'s
context check and the trace validator.

* position-aligned (SDAR): blocks from the one holding the prompt tail while their start is below P + G, i.e.
  ceil((P+G)/B) blocks in all (the SDAR reference);
* right-shifted (Fast-dLLM v2): G // B blocks (at least one) from the prompt-tail block, as the reference's
  `max_new_tokens // block_size`;
* the editing loop (LLaDA2.x, `loop="editing"`, decoding/editing.py): the position-aligned plan, as the LLaDA2
  reference (`ceil((P+G)/B)` blocks); it runs position-aligned models only, so a right-shifted one is refused here,
  before any work (generate's context check) and when a trace is read;
* the pipeline (D2F, `loop="pipeline"`, decoding/pipeline.py), either family: the prompt is one block of its own
  and `G // B` blocks of B follow it from position P (not aligned to multiples of B), as the D2F reference's
  `max_new_tokens // block_size` blocks appended after the prompt.

With adaptive_block the lengths vary, but a block of length L starts at a multiple of L, so no block crosses a
multiple of the largest size: `total` rounds the end up to it (an upper bound; the run ends where its last block
does).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class BlockPlan:
    first_start: int  # the block holding the prompt tail starts here
    end: int  # blocks are decoded while their start is below this
    total: int  # positions to allocate (an upper bound with adaptive blocks)


def block_plan(cfg: Any, prompt_len: int, shifted: bool, gen_length: int | None = None) -> BlockPlan:
    """`gen_length` overrides cfg's (a trace header records the run's own). ValueError for a plan no loop runs."""
    if shifted and getattr(cfg, "loop", "block") == "editing":
        raise ValueError("loop: 'editing' (the LLaDA2.x loop) needs a position-aligned model with the 2L verifier; "
                         "this model's logits are right-shifted")
    B, G = cfg.block_length, cfg.gen_length if gen_length is None else gen_length
    if getattr(cfg, "loop", "block") == "pipeline":
        end = prompt_len + G // B * B
        return BlockPlan(prompt_len, end, end)
    first = prompt_len // B * B
    end = first + max(1, G // B) * B if shifted else prompt_len + G
    grid = cfg.adaptive_max_block if cfg.adaptive_block else B
    return BlockPlan(first, end, math.ceil(end / grid) * grid)


def block_lengths(cfg: Any) -> list[int]:
    """Every block length a run may use (what a static backend warms up): 1 for AR, the powers of two in
    [adaptive_min_block, adaptive_max_block] with adaptive_block, else B."""
    if cfg.method == "ar":
        return [1]
    if getattr(cfg, "loop", "block") == "pipeline":  # a forward spans the blocks in flight (a verify: twice that)
        return [cfg.block_length * k for k in (1, 2, 4) if cfg.block_length * k <= max(cfg.gen_length, 1)]
    if not cfg.adaptive_block:
        return [cfg.block_length]
    out, b = [], cfg.adaptive_min_block
    while b <= cfg.adaptive_max_block:
        out.append(b)
        b *= 2
    return out
