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


def test_a_batch_first_baseline_step_writes_every_row_in_one_flush(monkeypatch):
    """The diffusion baseline's rows never write their own picks (step.py `write_picks`) in a batch-first decode:
    their tokens go in with the step's flush, whose count does not grow with the batch; the sequences still decode
    as alone."""
    import s2d2
    from s2d2.decoding import step
    from tests.support.batch_cases import model64
    from tests.support.golden_cases import PROMPTS

    cfg = s2d2.DecodeConfig(method="diffusion", gen_length=12, block_length=4, remasking="low_confidence_dynamic",
                            confidence_threshold=0.3)
    want = s2d2.generate(model64("aligned"), PROMPTS["a"], cfg, seed=0, detailed=False).token_ids

    def refuse(*args, **kwargs):
        raise AssertionError("a row wrote its own picks")

    flushes = []
    real_flush = TokenWrites.flush

    def counted_flush(self):
        flushes.append(1)
        real_flush(self)

    monkeypatch.setattr(step, "write_picks", refuse)
    monkeypatch.setattr(TokenWrites, "flush", counted_flush)
    per_size = []
    for n in (2, 6):
        flushes.clear()
        got = s2d2.generate_batch(model64("aligned"), [PROMPTS["a"]] * n, cfg, [0] * n, batch_size=n,
                                  detailed=False, engine="batch-first")
        assert all(g.token_ids == want for g in got)
        per_size.append(len(flushes))
    assert per_size[0] == per_size[1] >= 3
