"""The batch ledger's account of how full its forwards were (s2d2/decoding/batch_ledger.py `live_rows`)."""
from __future__ import annotations

from s2d2.decoding.batch_ledger import BatchForward, BatchLedger


def _ledger(members: list[list[int]], errors: tuple[int, ...] = ()) -> BatchLedger:
    ledger = BatchLedger(batch_size=3)
    for i, seqs in enumerate(members):
        ledger.add(BatchForward(i, seqs, [0] * len(seqs), [4] * len(seqs), [0] * len(seqs), 0.01,
                                "refused" if i in errors else ""))
    return ledger


def test_a_sequence_is_live_from_its_first_forward_to_its_last():
    # 0 and 1 start together; 1 sits out forward 1 (another phase's forward); 0 ends at 2, 2 joins at 2
    ledger = _ledger([[0, 1], [0], [0, 1, 2], [1, 2], [2]])
    assert ledger.live_rows() == [2, 2, 3, 2, 1]
    summary = ledger.summary()
    assert summary["sequence_forwards"] == 9 and summary["mean_live"] == 10 / 5
    assert summary["live_share"] == 9 / 10


def test_a_failed_forward_counts_among_neither_the_served_nor_the_live():
    # forward 1 failed; its members' lone retries are forwards 2 and 3
    ledger = _ledger([[0, 1], [0, 1], [0], [1]], errors=(1,))
    assert ledger.live_rows() == [2, 2, 2, 1]
    summary = ledger.summary()
    assert summary["sequence_forwards"] == 4 and summary["live_share"] == 4 / 5


def test_an_empty_ledger_says_zero():
    summary = BatchLedger(batch_size=2).summary()
    assert summary["mean_live"] == 0.0 and summary["live_share"] == 0.0 and BatchLedger(2).live_rows() == []
