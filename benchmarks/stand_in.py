"""A model whose forward costs (almost) nothing: fixed logits per position, so a batched decode's wall is the
engine's own host work (issue 37's first figure: host time per sequence-forward at batch 128).

The logits are one table drawn once from a seeded generator, a row per absolute position: a forward returns the rows
of its query positions (the right-shifted family's row r predicts position r + 1, which the decoder already reads
from row r). So drafts, confidences and verifier distributions are those a model that ignores its input would give:
every rule of the decoder still runs (dynamic remasking sees confident and unsure positions; the verifier's q is
the draft's p, so every draft is accepted), and nothing about the forward's cost grows with the batch.
Stop ids: none, so every decode runs to its length and each arm does the same work at every batch size.
"""
from __future__ import annotations

from typing import Any, Optional

import torch

from s2d2.models.base import ForwardRequest, ModelSpec

VOCAB = 64
MASK = VOCAB - 1


class CountCache:
    """A cache that holds only its length (what the decoder asks of it)."""

    def __init__(self) -> None:
        self.n = 0

    def get_seq_length(self) -> int:
        return self.n

    def crop(self, k: int) -> None:
        self.n = self.n + k if k < 0 else k


class StandInModel:
    """`forward` / `forward_batch` with the decoder's signature, returning rows of a fixed logit table."""

    attn_implementation = "sdpa"
    tokenizer = None

    def __init__(self, alignment: str = "aligned", max_positions: int = 4096, seed: int = 0,
                 dtype: torch.dtype = torch.float32) -> None:
        self.spec = ModelSpec("stand-in", alignment, MASK, [], VOCAB, max_positions, default_block=4,
                              use_chat_template=False)
        self.device, self.dtype = torch.device("cpu"), dtype
        g = torch.Generator().manual_seed(seed)
        # a sharp row on some positions (confident drafts), flat ones elsewhere (unsure drafts)
        scale = torch.where(torch.rand(max_positions + 1, 1, generator=g) < 0.6, 12.0, 1.0)
        self.table = (torch.randn(max_positions + 1, VOCAB, generator=g) * scale).to(dtype)

    def new_cache(self) -> CountCache:
        return CountCache()

    def forward(self, cache: Any, input_ids: torch.Tensor, positions: torch.Tensor, attention: Any, keep: int,
                last: Optional[int] = None, rows: Optional[torch.Tensor] = None) -> torch.Tensor:
        cache.n += keep
        if rows is not None:
            positions = positions.index_select(0, rows)
        elif last:
            positions = positions[-last:]
        return self.table.index_select(0, positions)

    def forward_batch(self, requests: list[ForwardRequest]) -> list[torch.Tensor]:
        """Every request's rows with one gather (a real batched forward is one call too)."""
        picked = []
        for r in requests:
            r.cache.n += r.keep
            pos = r.positions
            picked.append(pos.index_select(0, r.rows) if r.rows is not None else pos[-r.last:] if r.last else pos)
        rows = self.table.index_select(0, torch.cat(picked))
        return list(rows.split([int(p.shape[0]) for p in picked]))


def stand_in_prompts(n: int, seed: int = 0) -> list[list[int]]:
    """n token-id prompts of lengths 8-39 (never the mask id)."""
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, MASK, (8 + (i * 13) % 32,), generator=g).tolist() for i in range(n)]
