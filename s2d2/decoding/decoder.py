"""The block loop: prefill, then per block the steps of each window, then one commit forward (§2.7, §3.2).

Methods `diffusion` and `s2d2` share this loop (a `diffusion` run has no policy); `ar` lives in ar.py.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Callable

import torch

from ..config import DecodeConfig
from ..models.masks import block_causal_mask
from ..output import trim_output
from ..policies import make_policy
from ..trace import BlockRecord, Commit, StepRecord
from .recorder import Recorder
from .step import StepContext, run_step


class StopDecoding(Exception):
    """Raised by the model's forward to end a run at once (the app's Stop button, a closed tab): the loop drops the
    block in flight and returns the run as its last complete block left it, finish_reason "cancelled" — what
    `should_stop` returns at that block's end, without the rest of the block's forwards."""


@dataclass
class LoopResult:
    x: torch.Tensor
    blocks: list[BlockRecord]
    steps: list[StepRecord]
    finish_reason: str


def layout(prompt_len: int, gen_length: int, block: int) -> tuple[int, int]:
    """(first block to decode, number of blocks): the first holds the prompt tail (§2.1)."""
    return prompt_len // block, math.ceil((prompt_len + gen_length) / block)


class Kept:
    """The run as its last complete block (or AR token) left it: what a StopDecoding rolls back to."""

    def __init__(self, rec: Recorder) -> None:
        self.rec = rec
        self.x: torch.Tensor | None = None

    def mark(self, x: torch.Tensor, blocks: list[BlockRecord], steps: list[StepRecord], decided: int) -> None:
        """Everything recorded so far is complete; positions from `decided` on are still undecided."""
        self.x, self.blocks, self.steps, self.decided = x, blocks, steps, decided
        self.counts = (len(blocks), len(steps), len(self.rec.forwards))

    def restore(self, mask_id: int) -> LoopResult:
        assert self.x is not None  # marked before the first forward
        n_blocks, n_steps, n_forwards = self.counts
        del self.blocks[n_blocks:], self.steps[n_steps:], self.rec.forwards[n_forwards:]
        self.x[self.decided:] = mask_id
        return LoopResult(self.x, self.blocks, _numbered(self.steps), "cancelled")


def block_loop(model: Any, cfg: DecodeConfig, prompt: torch.Tensor, rec: Recorder, generator: torch.Generator,
               check: Callable[[list[StepRecord]], str | None]) -> LoopResult:
    kept = Kept(rec)
    try:
        return _block_loop(model, cfg, prompt, rec, generator, check, kept)
    except StopDecoding:
        return kept.restore(model.spec.mask_id)


def _block_loop(model: Any, cfg: DecodeConfig, prompt: torch.Tensor, rec: Recorder, generator: torch.Generator,
                check: Callable[[list[StepRecord]], str | None], kept: Kept) -> LoopResult:
    B, P, mask_id = cfg.block_length, int(prompt.shape[0]), model.spec.mask_id
    first, n_blocks = layout(P, cfg.gen_length, B)
    x = torch.full((n_blocks * B,), mask_id, dtype=torch.long, device=prompt.device)
    x[:P] = prompt
    cache = model.new_cache()
    policy = make_policy(cfg) if cfg.method == "s2d2" else None
    ctx = StepContext(model, cfg, rec, generator, x, cache, policy, P)
    steps: list[StepRecord] = []
    blocks: list[BlockRecord] = []
    shifted = model.spec.alignment == "shifted"
    kept.mark(x, blocks, steps, P)
    seed_logits = _prefill(ctx, first * B, shifted and P % B == 0)
    if seed_logits is not None:
        steps.append(_ar_seed(ctx, seed_logits, P, first))
    kept.mark(x, blocks, steps, P + len(steps))
    stops = torch.tensor(model.spec.stop_ids or [-1], device=x.device)
    schedule = cfg.transfer_schedule()
    for b in range(first, n_blocks):
        start = b * B
        blocks.append(BlockRecord(b, start, B, max(0, min(P - start, B))))
        step = 0
        for window in _windows(cfg, start):
            while bool((x[window[0] : window[1]] == mask_id).any()):
                k_s = schedule[min(step, len(schedule) - 1)]
                steps.append(run_step(ctx, b, start, window, step, k_s))
                step += 1
        logits = rec.forward("commit", b, -1, cache, x[start : start + B], torch.arange(start, start + B,
                             device=x.device), "causal" if cfg.cache_ver else "full", keep=B, last=1)
        if shifted and b + 1 < n_blocks:  # the commit's last logit seeds position 0 of the next block
            steps.append(_ar_seed(ctx, logits, start + B, b + 1))
        if bool(torch.isin(x[P : start + B], stops).any()):
            return LoopResult(x, blocks, _numbered(steps), "stop_token")
        reason = check(_numbered(steps))
        if reason is not None:
            return LoopResult(x, blocks, steps, reason)
        kept.mark(x, blocks, steps, start + B + int(shifted and b + 1 < n_blocks))
    return LoopResult(x, blocks, _numbered(steps), "length")


def _windows(cfg: DecodeConfig, start: int) -> list[tuple[int, int]]:
    sb = cfg.sub_block_length or cfg.block_length
    return [(start + k, start + k + sb) for k in range(0, cfg.block_length, sb)]


def _prefill(ctx: StepContext, n: int, want_logits: bool) -> torch.Tensor | None:
    """Store the prompt's full blocks: block-causal, or causal with cache_ver. Returns the last logit if asked."""
    if n == 0:
        return None
    B = ctx.cfg.block_length
    attention = "causal" if ctx.cfg.cache_ver else block_causal_mask(n, B, 0, ctx.x.device)
    logits = ctx.rec.forward("prefill", -1, -1, ctx.cache, ctx.x[:n], torch.arange(n, device=ctx.x.device),
                             attention, keep=n, last=1)
    return logits if want_logits else None


def _ar_seed(ctx: StepContext, logits: torch.Tensor, position: int, block: int) -> StepRecord:
    """Right-shifted family: argmax of the last logit becomes the next block's first token (no extra NFE)."""
    from .sampling import token_distribution

    probs = token_distribution(logits[-1:], ctx.cfg, ctx.mask_id)
    token = int(torch.argmax(probs, dim=-1))
    ctx.x[position] = token
    text = ctx.rec.text(token) if ctx.rec.detailed else ""
    return StepRecord(-1, block, -1, [position, position + 1], [ctx.rec.last_index], [position], [], [position, 0],
                      None, None, None, 0, [Commit(position, token, text, "ar_seed")])


def _numbered(steps: list[StepRecord]) -> list[StepRecord]:
    for i, s in enumerate(steps):
        s.index = i
    return steps


def make_check(should_stop: Callable[[], bool] | None, max_seconds: float | None,
               on_block: Callable[[list[StepRecord]], None] | None) -> Callable[[list[StepRecord]], str | None]:
    """A per-block hook that streams progress and says why to stop early ("cancelled", "time_limit") or None."""
    t0 = time.perf_counter()

    def check(steps: list[StepRecord]) -> str | None:
        if on_block is not None:
            on_block(steps)
        if should_stop is not None and should_stop():
            return "cancelled"
        if max_seconds is not None and time.perf_counter() - t0 > max_seconds:
            return "time_limit"
        return None

    return check
