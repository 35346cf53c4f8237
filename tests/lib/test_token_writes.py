"""token_writes.py: many rows' commits written at once leave every sequence as its own writes would."""
from __future__ import annotations

import torch

from s2d2.decoding.token_writes import TokenWrites
from s2d2.trace import Commit


def test_every_row_gets_exactly_its_own_commits():
    gen = torch.Generator().manual_seed(0)
    seqs = [torch.full((40,), 99, dtype=torch.long) for _ in range(5)]
    want = [s.clone() for s in seqs]
    writes = TokenWrites()
    for k, (seq, expect) in enumerate(zip(seqs, want)):
        start, length = 8 + 4 * k, 4 if k % 2 else 8  # two block lengths: two stacks
        picked = torch.randperm(length, generator=gen)[: 1 + k % 3].tolist()
        commits = [Commit(start + i, 1000 * k + i, "", "fallback") for i in picked]
        for c in commits:
            expect[c.position] = c.token
        writes.add(seq[start : start + length], start, commits)
        assert torch.equal(seq, torch.full((40,), 99, dtype=torch.long))  # nothing written before the flush
    writes.flush()
    for k, (seq, expect) in enumerate(zip(seqs, want)):
        assert torch.equal(seq, expect), k


def test_a_row_without_commits_and_an_empty_flush_change_nothing():
    seq = torch.arange(12)
    writes = TokenWrites()
    writes.flush()
    writes.add(seq[4:8], 4, [])
    writes.flush()
    assert torch.equal(seq, torch.arange(12))
    writes.add(seq[4:8], 4, [Commit(6, 50, "", "threshold")])
    writes.flush()
    writes.flush()  # already written and forgotten
    assert seq.tolist() == [0, 1, 2, 3, 4, 5, 50, 7, 8, 9, 10, 11]
