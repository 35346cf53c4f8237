"""Stop sequences (lm-eval's `until`): end a decode at the block in which one appears, and cut the text there.

The decoder already stops at the model's stop ids. A stop *string* ("Question:", "\\n\\n") is watched from the
per-block hook of `s2d2.generate`: after each block (every few tokens for AR) the decoded text so far is rebuilt from
the step records' commits and edits, and once it holds a stop string the run ends at that block's end. Blocks are
decoded left to right, so every token before the stop string is exactly what the full-length run would have
produced; only the forwards after it are saved. The returned text is cut before the earliest stop string.
"""
from __future__ import annotations

from typing import Any, Sequence

from ..trace import StepRecord


def cut_at_stops(text: str, until: Sequence[str]) -> str:
    """`text` up to the earliest occurrence of any non-empty stop string."""
    cut = len(text)
    for stop in until:
        if stop:
            at = text.find(stop)
            if at != -1:
                cut = min(cut, at)
    return text[:cut]


class StopWatch:
    """`on_block` / `should_stop` hooks for `generate`: stop once the output so far contains a stop string."""

    def __init__(self, tokenizer: Any, prompt_len: int, until: Sequence[str], stop_ids: Sequence[int]) -> None:
        self.tokenizer = tokenizer
        self.prompt_len = prompt_len
        self.until = [u for u in until if u]
        self.stop_ids = set(stop_ids)
        self.tokens: dict[int, int] = {}
        self.read = 0  # steps already folded into `tokens`
        self.hit = False

    def on_block(self, steps: list[StepRecord]) -> None:
        if not self.until or self.tokenizer is None:
            return
        for step in steps[self.read:]:
            for commit in step.commits:
                self.tokens[commit.position] = commit.token
            for edit in step.edits:
                self.tokens[edit.position] = edit.new
        self.read = len(steps)
        self.hit = any(stop in self.text() for stop in self.until)

    def should_stop(self) -> bool:
        return self.hit

    def text(self) -> str:
        """The decoded output so far: the generated tokens left to right, up to the first gap or stop id."""
        ids = []
        pos = self.prompt_len
        while pos in self.tokens and self.tokens[pos] not in self.stop_ids:
            ids.append(self.tokens[pos])
            pos += 1
        return self.tokenizer.decode(ids)
