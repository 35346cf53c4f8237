"""Runs every forward for the decoder and records it: the one place NFE, query tokens and timing are counted."""
from __future__ import annotations

import time
from typing import Any

import torch

from ..models.base import Attention
from ..trace import Candidate, ForwardRecord

TOP_K = 5


class Recorder:
    def __init__(self, model: Any, detailed: bool) -> None:
        self.model = model
        self.detailed = detailed
        self.forwards: list[ForwardRecord] = []
        self._texts: dict[int, str] = {}
        self._sync = model.device.type == "cuda" and detailed  # exact per-forward timing needs a sync on CUDA

    def forward(
        self,
        kind: str,
        block: int,
        step: int,
        cache: Any,
        ids: torch.Tensor,
        positions: torch.Tensor,
        attention: Attention,
        keep: int,
        last: int | None = None,
    ) -> torch.Tensor:
        cache_len = cache.get_seq_length()
        t0 = time.perf_counter()
        logits = self.model.forward(cache, ids, positions, attention, keep, last)
        if self._sync:
            torch.cuda.synchronize()
        wall = time.perf_counter() - t0
        q = int(ids.shape[0])
        self.forwards.append(
            ForwardRecord(len(self.forwards), kind, block, step, cache_len, q, q, len(self.forwards) + 1, wall)
        )
        return logits

    @property
    def last_index(self) -> int:
        return len(self.forwards) - 1

    def text(self, token: int) -> str:
        """Decoded string of one token id (cached), so viewers never need a tokenizer."""
        if token not in self._texts:
            tok = getattr(self.model, "tokenizer", None)
            self._texts[token] = tok.decode([token]) if tok is not None else f"<{token}>"
        return self._texts[token]

    def texts(self, tokens: list[int]) -> list[str]:
        return [self.text(t) for t in tokens]

    def candidates(self, probs: torch.Tensor) -> list[list[Candidate]]:
        """Top-k summaries of each row of a distribution (one host transfer)."""
        values, ids = probs.topk(min(TOP_K, probs.shape[-1]), dim=-1)
        return [
            [Candidate(t, self.text(t), v) for t, v in zip(row_ids, row_vals)]
            for row_ids, row_vals in zip(ids.tolist(), values.tolist())
        ]
