"""benchmarks/forward_reads.py tallies what a forward's rows ask for, read and need, by row kind."""
from __future__ import annotations

from collections import Counter

import torch

from benchmarks.forward_reads import row_kind, tally
from s2d2.models.base import ForwardRequest, QueryMask
from s2d2.models.masks import draft_pattern, verify_2l_pattern
from tests.support.tiny_models import tiny_qwen3


def test_a_verify_a_draft_and_a_commit_are_tallied_by_kind():
    model = tiny_qwen3()
    cache = model.new_cache()
    model.forward(cache, torch.tensor([5, 6, 7]), torch.arange(3), "causal", keep=3, last=1)
    B = 4
    verify = ForwardRequest(cache, torch.arange(2 * B), torch.arange(3, 3 + 2 * B), QueryMask(verify_2l_pattern(B)),
                            0, B, torch.tensor([1, 2]))
    draft = ForwardRequest(cache, torch.arange(B), torch.arange(3, 3 + B), QueryMask(draft_pattern(B, 0)), 0, None,
                           torch.tensor([0, 3]))
    commit = ForwardRequest(cache, torch.arange(B), torch.arange(3, 3 + B), "causal", B, 1)
    assert [row_kind(r) for r in (verify, draft, commit)] == ["verify", "draft", "store"]
    counts: Counter = Counter()
    for r in (verify, draft, commit):
        tally(counts, r)
    assert [counts["verify", x] for x in ("rows", "query", "read", "needed")] == [1, 8, 2, 4]
    assert [counts["draft", x] for x in ("rows", "query", "read", "needed")] == [1, 4, 2, 4]
    assert [counts["store", x] for x in ("rows", "query", "read", "needed")] == [1, 4, 1, 4]
