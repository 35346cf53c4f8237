"""The batch-first step's shared read (issue 37): what every S2D2 draft row reads before routing (its drafts, its
routing summary, what a skip would decode) comes from parts over all the step's draft rows, read once
(transfers.py `Bulk`), never as one part per row; each sequence still gets its batch-1 values and trace."""
from __future__ import annotations

from typing import Any

import pytest

import s2d2
from s2d2.decoding import transfers
from tests.support.batch_cases import model64
from tests.support.golden_cases import PROMPTS
from tests.support.trace_compare import trace_mismatch

ROUTING = {"drafts", "alphas", "k_hat", "mean_entropy", "n_hi"}
PROMPTS_8 = [PROMPTS["a"], PROMPTS["b"], PROMPTS["c"], [7, 8, 9, 10, 11], [3, 4], [9, 8, 7, 6], PROMPTS["a"],
             [2, 3, 4, 5, 6]]


def _spied(monkeypatch: Any) -> tuple[list[set[str]], list[set[str]]]:
    """(names each single reader's fetch asked for, names each shared read served in bulk)."""
    own: list[set[str]] = []
    bulk: list[set[str]] = []
    take, many = transfers.HostReads._take, transfers.fetch_many

    def spy_take(self: Any, wanted: Any, busy: bool = False) -> Any:
        own.append({name for name, t in wanted.items() if t is not None})
        return take(self, wanted, busy)

    def spy_many(readers: Any, wanted: Any, parts: Any = ()) -> Any:
        bulk.append({b.name for b in parts})
        return many(readers, wanted, parts)

    monkeypatch.setattr(transfers.HostReads, "_take", spy_take)
    monkeypatch.setattr(transfers, "fetch_many", spy_many)
    from s2d2.decoding import lockstep_verify
    monkeypatch.setattr(lockstep_verify, "fetch_many", spy_many)
    return own, bulk


@pytest.mark.parametrize("remasking,policy,rule", [
    ("low_confidence_dynamic", dict(policy="score_hysteresis", hysteresis_on=1.0, hysteresis_off=-5.0),
     {"order", "above"}),
    ("low_confidence_static", dict(policy="score_threshold", score_threshold=0.5), {"order"}),
    ("entropy_bounded", dict(policy="score_threshold", score_threshold=0.5), set()),  # no batch form: per row
])
@pytest.mark.parametrize("detailed", [False, True])
def test_draft_rows_read_their_routing_once_over_all_rows(remasking, policy, rule, detailed, monkeypatch):
    own, bulk = _spied(monkeypatch)
    cfg = s2d2.DecodeConfig(method="s2d2", gen_length=16, block_length=8, remasking=remasking, **policy)
    model = model64("aligned")
    got = s2d2.generate_batch(model, PROMPTS_8, cfg, list(range(8)), batch_size=8, detailed=detailed,
                              engine="batch-first")
    served = set().union(*bulk)
    assert ROUTING | rule <= served  # read once over the rows ...
    assert not any(names & (ROUTING | rule) for names in own)  # ... and never as a row's own part
    own.clear()
    for i, (g, prompt) in enumerate(zip(got, PROMPTS_8)):
        want = s2d2.generate(model, prompt, cfg, seed=i, detailed=detailed)
        assert g.token_ids == want.token_ids and trace_mismatch(g.trace, want.trace) is None, f"sequence {i}"
    assert any(ROUTING <= names for names in own)  # alone, batch 1 reads them as its own parts


@pytest.mark.parametrize("acceptance,tested", [("paper", {"accepted"}), ("greedy_exact", {"accepted", "argmax_q"})])
def test_verify_rows_read_their_acceptance_test_once_over_all_rows(acceptance, tested, monkeypatch):
    own, bulk = _spied(monkeypatch)
    cfg = s2d2.DecodeConfig(method="s2d2", policy="always", gen_length=16, block_length=4, acceptance=acceptance,
                            temperature=1.0 if acceptance == "paper" else 0.0)
    model = model64("aligned")
    got = s2d2.generate_batch(model, PROMPTS_8, cfg, list(range(8)), batch_size=8, detailed=False,
                              engine="batch-first")
    assert tested <= set().union(*bulk)
    assert not any(names & tested for names in own)
    own.clear()
    for i, (g, prompt) in enumerate(zip(got, PROMPTS_8)):
        want = s2d2.generate(model, prompt, cfg, seed=i, detailed=False)
        assert g.token_ids == want.token_ids and trace_mismatch(g.trace, want.trace) is None, f"sequence {i}"
    assert any(tested <= names for names in own)
