"""Runs every forward for the decoder and records it: the one place NFE, query tokens and timing are counted.

It also owns the run's host reads (`reads`, transfers.py): the loop reads device values only through it. In a batch
the loop's model (batch.py's SequenceModel) offers `share_read`, so a packed read waits for the batch's one shared
transfer.
"""
from __future__ import annotations

import inspect
import time
import weakref
from typing import Any

import torch

from ..models.base import Attention
from ..trace import Candidate, Commit, CostTable, ForwardRecord
from .transfers import HostReads

TOP_K = 5


class Recorder:
    def __init__(self, model: Any, detailed: bool, costs: CostTable | None = None) -> None:
        self.model = model
        self.detailed = detailed
        self.costs = costs  # the frozen forward costs a cost-aware policy routes with (None: routing in forwards)
        self.forwards: list[ForwardRecord] = []
        self._texts: dict[int, str] = {}
        self._sync = model.device.type == "cuda" and detailed  # exact per-forward timing needs a sync on CUDA
        self.timed = model.device.type == "cpu" or self._sync  # wall_s is the forward's own time (cost model input)
        self.reads = HostReads(model.device, getattr(model, "share_read", None))  # in a batch: shared reads
        self._rows = takes_rows(model)

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
        rows: torch.Tensor | None = None,
    ) -> torch.Tensor:
        cache_len = cache.get_seq_length()
        t0 = time.perf_counter()
        if self._rows:
            logits = self.model.forward(cache, ids, positions, attention, keep, last, rows)
        else:  # a model without the `rows` option (e.g. a test stub): pick them here
            logits = self.model.forward(cache, ids, positions, attention, keep, last)
            logits = logits if rows is None else logits.index_select(0, rows)
        if self._sync:
            torch.cuda.synchronize()
        self.record(kind, block, step, cache_len, int(ids.shape[0]), time.perf_counter() - t0)
        return logits

    def record(self, kind: str, block: int, step: int, cache_len: int, queries: int, wall: float) -> None:
        """Count one forward this decode took part in (its NFE is the number of records). The batch-first engine
        (lockstep.py) runs the forward itself and records it here, so both count forwards one way."""
        self.forwards.append(
            ForwardRecord(len(self.forwards), kind, block, step, cache_len, queries, queries, len(self.forwards) + 1,
                          wall)
        )

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

    def with_texts(self, commits: list[Commit]) -> list[Commit]:
        """`commits` (made with empty texts) with each token's text filled in, in a detailed trace only: a lean
        trace keeps no texts, so it makes no call per token (a commit still on the device, token -1, gets its text
        when it is read)."""
        if self.detailed:
            for c in commits:
                if c.token >= 0:
                    c.text = self.text(c.token)
        return commits

    def candidates(self, probs: torch.Tensor) -> list[list[Candidate]]:
        """Top-k summaries of each row of a distribution (one host transfer)."""
        got = self.reads.fetch(top_k(probs))
        return self.candidate_rows(got["top_ids"], got["top_probs"], int(probs.shape[0]))

    def candidate_rows(self, ids: list[int], probs: list[float], rows: int) -> list[list[Candidate]]:
        """The `rows` rows of `top_k`'s tensors, read back flat."""
        k = len(ids) // rows if rows else 0
        return [[Candidate(t, self.text(t), v) for t, v in zip(ids[i : i + k], probs[i : i + k])]
                for i in range(0, k * rows, k)] if k else [[] for _ in range(rows)]


def takes_rows(model: Any) -> bool:
    """Whether `model.forward` names a `rows` parameter (HFModel does: it picks them before its float32 copy). A
    wrapper that passes *args on may wrap a model without it, so it gets all rows and the recorder picks them.

    The answer for a class's own method is kept per function (`inspect.signature` costs ~25 µs, and a batch makes
    a Recorder per sequence); a forward set on the instance itself is read each time."""
    forward = getattr(model, "forward", None)
    func = getattr(forward, "__func__", None)
    try:
        known = _TAKES_ROWS.get(func) if func is not None else None
    except TypeError:  # not weakly referable: read it each time
        return _names_rows(forward)
    if known is None:
        known = _names_rows(forward)
        if func is not None:
            _TAKES_ROWS[func] = known
    return known


def _names_rows(forward: Any) -> bool:
    try:
        return "rows" in inspect.signature(forward).parameters
    except (TypeError, ValueError):
        return False


# a function's signature never changes; weak keys let a class defined in a test go
_TAKES_ROWS: "weakref.WeakKeyDictionary[Any, bool]" = weakref.WeakKeyDictionary()


def top_k(probs: torch.Tensor) -> dict[str, torch.Tensor]:
    """The TOP_K most likely tokens of each row of a distribution, largest first and equal probabilities in token-id
    order, on the device (`Recorder.candidate_rows` reads them). The page decoder takes the same order
    (s2d2_web/decoding/sampling.js `topK`). `torch.topk` alone leaves ties to the kernel, and ties are common here:
    top_p or top_k leave most of a row exactly 0, so a row's last candidates were zeros picked by the CPU's kernel.
    So: the k-th largest value, every token above it and the lowest ids equal to it, then those k by value (a
    stable sort keeps the ids' order among equals). No host sync."""
    k = min(TOP_K, probs.shape[-1])
    kth = probs.topk(k, dim=-1).values[..., -1:]
    above, tied = probs > kth, probs == kth
    take = above | (tied & (tied.cumsum(-1) <= k - above.sum(-1, keepdim=True)))
    index = torch.arange(probs.shape[-1], device=probs.device)
    ids = torch.where(take, index, index + probs.shape[-1]).topk(k, dim=-1, largest=False).values  # (distinct keys)
    values = probs.gather(-1, ids)
    order = values.sort(dim=-1, descending=True, stable=True).indices
    return {"top_ids": ids.gather(-1, order), "top_probs": values.gather(-1, order)}
