"""Adaptive block size — beyond the paper (its own future-work item: "let the model shrink or grow the block size
from verification feedback"). Off in every paper preset.

After each block the rule picks the next block's length from the powers of two in [adaptive_min_block,
adaptive_max_block], reading only the finished block's verifications:

* no verification in the block (the policy skipped every step): keep the length;
* the mean accepted prefix per verify is below `adaptive_shrink_below` · B (early rejections: the drafted tail of
  the block was wasted): halve;
* every verify of the block accepted its whole span (no rejection: the drafter is ahead of the block): double;
* otherwise keep.

A block of length L starts at a multiple of L (the next length is halved until it divides the next start), so
blocks keep the absolute alignment the model was trained with, and every block lies inside one block of the
largest size (what the Compare tab's grid needs). Verification is unchanged, so `greedy_exact` + always-verify +
`cache_ver` still reproduces greedy AR token for token.
"""
from __future__ import annotations

from dataclasses import dataclass

from .knob import Knob


@dataclass(frozen=True)
class AdaptiveBlockSettings:
    adaptive_block: bool
    adaptive_min_block: int
    adaptive_max_block: int
    adaptive_shrink_below: float


@dataclass(frozen=True)
class BlockFeedback:
    """What the finished block's verify steps reported."""

    length: int
    accepted: list[int]  # accepted prefix length per verify, in order
    spans: list[int]  # span length per verify


@dataclass(frozen=True)
class BlockChoice:
    length: int
    reason: str


def is_power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


class AdaptiveBlock:
    """The block-size rule: a settings object, its knobs, and a pure `decide`."""

    name = "adaptive_block"
    Settings = AdaptiveBlockSettings
    knobs = (
        Knob("adaptive_block", "Adaptive block size (beyond the paper)", "bool", whatif=False,
             help="grow or shrink the next block from the last block's verifications (needs cache_ver)"),
        Knob("adaptive_min_block", "Adaptive: smallest block", "int", 1, 256, 1, ui=(1, 64), whatif=False,
             help="a power of two ≤ block_length"),
        Knob("adaptive_max_block", "Adaptive: largest block", "int", 1, 256, 1, ui=(1, 64), whatif=False,
             help="a power of two ≥ block_length"),
        Knob("adaptive_shrink_below", "Adaptive: shrink below", "float", 0.0, 1.0, 0.05, whatif=False,
             advanced=True, help="halve the block when the mean accepted prefix per verify is below this · B"),
    )

    def __init__(self, cfg: object):
        self.settings = AdaptiveBlockSettings(**{k: getattr(cfg, k) for k in AdaptiveBlockSettings.__annotations__})

    @staticmethod
    def check(cfg: object) -> None:
        """Cross-field checks when the option is on (one ValueError naming a field)."""
        lo, hi, b = cfg.adaptive_min_block, cfg.adaptive_max_block, cfg.block_length  # type: ignore[attr-defined]
        for name, v in (("adaptive_min_block", lo), ("adaptive_max_block", hi), ("block_length", b)):
            if not is_power_of_two(v):
                raise ValueError(f"{name}: adaptive_block needs powers of two, got {v}")
        if not lo <= b <= hi:
            raise ValueError(f"adaptive_min_block: adaptive_block needs adaptive_min_block <= block_length <= "
                             f"adaptive_max_block, got {lo} <= {b} <= {hi}")

    def decide(self, fb: BlockFeedback, next_start: int) -> BlockChoice:
        st, L = self.settings, fb.length
        if not fb.accepted:
            want, why = L, "no verification in the block: keep"
        else:
            mean = sum(fb.accepted) / len(fb.accepted)
            if mean < st.adaptive_shrink_below * L:
                want, why = L // 2, f"mean accepted prefix {mean:.2f} < {st.adaptive_shrink_below:g}·{L}: shrink"
            elif all(a == n for a, n in zip(fb.accepted, fb.spans)):
                want, why = L * 2, "every verify accepted its whole span: grow"
            else:
                want, why = L, f"mean accepted prefix {mean:.2f} of {L}: keep"
        length = min(st.adaptive_max_block, max(st.adaptive_min_block, want))
        clamped = length != want
        while length > 1 and next_start % length:  # a block of length L starts at a multiple of L
            length //= 2
        note = " (clamped to the allowed sizes)" if clamped else ""
        if length < min(st.adaptive_max_block, max(st.adaptive_min_block, want)):
            note += f" (halved to start at a multiple of its length, position {next_start})"
        return BlockChoice(length, f"B {L} → {length}: {why}{note}")
