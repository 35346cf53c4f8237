"""Batch-vs-alone helpers shared by the batch tests (tests/lib/test_batch_decode.py, test_batch_first.py): the
golden cases' models in float64, a batch of prompts around a case's prompt, and the check that every sequence of a
`generate_batch` equals its own `generate` (tokens, NFE, and the trace apart from wall times); a model wrapper that
stops one sequence (`StopsOne`, the app's Stop as a model raises it)."""
from __future__ import annotations

from functools import lru_cache
from typing import Any

import torch

import s2d2
from s2d2.decoding.result import StopDecoding
from tests.support.golden_cases import PROMPTS, golden_model
from tests.support.trace_compare import FLOAT64, trace_mismatch


@lru_cache(maxsize=None)
def model64(name: str) -> Any:
    """The golden cases' models in float64 (the bundled ones loaded so: `load_model` puts LLaDA2's MoE on the
    eager experts path, since the grouped-matmul kernel refuses float64)."""
    if name == "bundled":
        return s2d2.load_model("tiny", dtype=torch.float64, backend="dynamic")
    if name == "llada2":
        return s2d2.load_model("tiny-llada2", dtype=torch.float64, backend="dynamic")
    return golden_model(name)  # the sharpened tiny random models, float64 already


def batch_prompts(model_name: str, key: str) -> list[Any]:
    """The case's prompt first, then prompts of other lengths (and the case's prompt again, under another seed)."""
    if model_name in ("bundled", "llada2"):
        from s2d2.tasks.arithmetic import heldout

        qs = [p.question for p in heldout(4)]
        return [qs[0], qs[1], qs[0], qs[2], qs[3]]
    others = [PROMPTS[k] for k in sorted(PROMPTS) if k != key]
    return [PROMPTS[key], others[0], PROMPTS[key], [7, 8, 9], others[1]]


def assert_batch_equals_single(model: Any, prompts: list[Any], cfgs: Any, seeds: list[int], batch_size: int,
                               detailed: bool = True, tol: tuple[float, float] = FLOAT64,
                               costs: Any = None) -> list[Any]:
    batch = s2d2.generate_batch(model, prompts, cfgs, seeds, batch_size=batch_size, detailed=detailed, costs=costs)
    assert len(batch) == len(prompts)
    for i, (got, prompt, seed) in enumerate(zip(batch, prompts, seeds)):
        cfg = cfgs[i] if isinstance(cfgs, list) else cfgs
        want = s2d2.generate(model, prompt, cfg, seed=seed, detailed=detailed, costs=costs)
        assert got.token_ids == want.token_ids, f"sequence {i}"
        assert got.metrics["nfe"] == want.metrics["nfe"]
        diff = trace_mismatch(got.trace, want.trace, tol=tol)
        assert diff is None, f"sequence {i}: {diff}"
    return batch


class StopsOne:
    """Raises StopDecoding from the `n`-th forward on of the sequence whose prompt starts with `marker` (its cache
    length tells its forwards apart), alone or in a batch."""

    def __init__(self, model: Any, marker: int, n: int) -> None:
        self._model, self.marker, self.n = model, marker, n
        self.seen: dict[int, int] = {}
        # the marked caches, kept alive: a freed cache's id could be reused by a later sequence's cache, which
        # would then be stopped too (a batch with fewer slots than sequences starts one where another ended)
        self.held: list[Any] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)

    def _count(self, req: Any) -> None:
        cache_key = id(req[0])
        if int(req[1][0]) == self.marker and int(req[0].get_seq_length()) == 0 and cache_key not in self.seen:
            self.seen[cache_key] = 0
            self.held.append(req[0])
        if cache_key in self.seen:
            self.seen[cache_key] += 1
            if self.seen[cache_key] >= self.n:  # a retry alone after a failed shared forward stops too
                raise StopDecoding()

    def forward(self, *req: Any) -> torch.Tensor:
        self._count(req)
        return self._model.forward(*req)

    def forward_batch(self, requests: list[Any]) -> list[torch.Tensor]:
        for req in requests:
            self._count(req)
        return self._model.forward_batch(requests)
