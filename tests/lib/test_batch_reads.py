"""Host reads of a batch (issue 24 item 5): on the packed path every waiting sequence's read shares one transfer.

`HostReads.pack_on_cpu` runs the accelerator path on the CPU: each fetch is a hand-off to the scheduler, which
serves every waiting read with one packed `.tolist()` and splits it back (s2d2/decoding/batch.py). Each sequence
must still get its batch-1 trace (float64, tests/support/trace_compare.py) and count its own fetches as at batch 1,
while the batch's ledger shows far fewer transfers than the fetches they served. The plain CPU path never hands off.
"""
from __future__ import annotations

import threading
from typing import Any

import pytest
import torch

import s2d2
from fixtures import tiny_d2f as M
from s2d2.decoding.batch import Worker
from s2d2.decoding.live_batch import BatchClosed, LiveBatch
from s2d2.decoding.transfers import HostReads, packed_values
from tests.support.golden_cases import PROMPTS, golden_model
from tests.support.tiny_models import tiny_qwen3
from tests.support.trace_compare import trace_mismatch

PROMPT_SET = [PROMPTS["a"], PROMPTS["b"], PROMPTS["c"], [7, 8, 9], PROMPTS["a"]]
SEEDS = [0, 7, 11, 3, 12345]


def _counted(monkeypatch) -> list[HostReads]:
    """Every HostReads created from now on (one per decode: its `transfers` is that decode's fetch count)."""
    made: list[HostReads] = []
    init = HostReads.__init__

    def track(self, *args, **kwargs):
        init(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(HostReads, "__init__", track)
    return made


def _batch_against_single(monkeypatch, model: Any, prompts: list[Any], cfg: Any, seeds: list[int],
                          batch_size: int, detailed: bool = True, engine: str = "auto") -> dict[str, Any]:
    """Decode in a batch and alone; assert every sequence's trace matches; the ledger summary and fetch counts."""
    made = _counted(monkeypatch)
    batch = s2d2.generate_batch(model, prompts, cfg, seeds, batch_size=batch_size, detailed=detailed, engine=engine)
    in_batch = sum(r.transfers for r in made)
    del made[:]
    for i, (got, prompt, seed) in enumerate(zip(batch, prompts, seeds)):
        want = s2d2.generate(model, prompt, cfg, seed=seed, detailed=detailed)
        assert got.token_ids == want.token_ids, f"sequence {i}"
        diff = trace_mismatch(got.trace, want.trace)
        assert diff is None, f"sequence {i}: {diff}"
    alone = sum(r.transfers for r in made)
    summary = batch[0].batch.summary()
    return {"summary": summary, "in_batch": in_batch, "alone": alone}


VERIFYING = {
    "threshold greedy": dict(method="s2d2", policy="score_threshold", score_threshold=0.5, penalty_coef=1.0,
                             score_type="difference_static", block_length=8),
    "always sampled": dict(method="s2d2", policy="always", temperature=1.0, acceptance="sampled", block_length=8),
    "ucb sampled, kv reuse": dict(method="s2d2", policy="contextual_bandit_ucb", temperature=1.0, cache_ver=True,
                                  draft_ver=True, block_length=8),
    # KV reuse for real: blocks whose last verify cached them whole end without a commit forward, after a shared
    # read of their rows' residual draws (lockstep_block.py `_cached_commits`)
    "always sampled, kv reuse": dict(method="s2d2", policy="always", temperature=1.0, kv_reuse=True, cache_ver=True,
                                     draft_ver=True, block_length=8),
    "editing loop": dict(loop="editing", block_length=4, temperature=1.0),
}


@pytest.mark.parametrize("name", list(VERIFYING))
@pytest.mark.parametrize("detailed", [True, False], ids=["detailed", "lean"])
@pytest.mark.parametrize("engine", ["threads", "batch-first"])
def test_batched_reads_give_each_sequence_its_batch_one_trace_in_far_fewer_transfers(monkeypatch, name, detailed,
                                                                                      engine):
    """Both engines: the thread engine serves its waiting sequences' reads with one transfer, the batch-first one
    reads every S2D2 row of a step in one (lockstep_verify.shared_read)."""
    monkeypatch.setattr(HostReads, "pack_on_cpu", True)
    cfg = s2d2.DecodeConfig(gen_length=24, **VERIFYING[name])
    got = _batch_against_single(monkeypatch, golden_model("aligned"), PROMPT_SET[:4], cfg, SEEDS[:4], 4, detailed,
                                engine)
    summary = got["summary"]
    if engine == "batch-first" and cfg.loop == "editing":
        # the batch-first editing loop (lockstep_editing.py) reads its S2D2 rows' routing summaries in one shared
        # read per step; a detailed trace's draft and verifier rows are read per row, where batch 1 reads them.
        # Each sequence still counts its own fetches as alone.
        assert got["in_batch"] == got["alone"] >= summary["sequence_reads"] > 0, summary
        assert summary["reads"] <= summary["forwards"] and summary["failed_reads"] == 0, summary
        assert detailed or got["in_batch"] == summary["sequence_reads"], summary
        return
    # each sequence counted its own fetches exactly as alone, and the ledger served every one of them
    assert got["in_batch"] == got["alone"] == summary["sequence_reads"] > 0
    # the whole batch reads at most once between two of its forwards (~2 per step: a step has <= 2 forwards) ...
    assert summary["reads"] <= summary["forwards"], summary
    assert summary["failed_reads"] == 0
    # ... far fewer than its sequences' fetches. Not so for the lean editing loop: a sequence reads there only at
    # some steps, at other steps than its neighbours, and a read the host needs before its next forward cannot
    # wait for theirs (measured: 26 transfers for 41 fetches, 31 forwards)
    if not (name == "editing loop" and not detailed):
        assert summary["reads"] <= summary["sequence_reads"] / 2, summary


@pytest.fixture(scope="module")
def d2f_llada(tmp_path_factory):
    return s2d2.load_model(M.write_llada(tmp_path_factory.mktemp("reads-d2f") / "llada"), device="cpu",
                           dtype=torch.float64)


def test_the_d2f_pipeline_shares_its_reads_too(monkeypatch, d2f_llada):
    monkeypatch.setattr(HostReads, "pack_on_cpu", True)
    cfg = s2d2.preset("d2f-s2d2", block_length=4, gen_length=24, confidence_threshold=0.5, policy="always",
                      temperature=1.0, acceptance="sampled")
    prompts = [[5, 9, 17, 33, 2, 71, 3], [4, 8], list(range(10, 40)), [5, 9, 17, 33, 2, 71, 3]]
    got = _batch_against_single(monkeypatch, d2f_llada, prompts, cfg, [0, 1, 2, 3], 4)
    assert got["in_batch"] == got["alone"] == got["summary"]["sequence_reads"] > 0
    assert got["summary"]["reads"] <= got["summary"]["sequence_reads"] / 2, got["summary"]


def test_a_queue_longer_than_the_batch_still_gets_batch_one_traces(monkeypatch):
    monkeypatch.setattr(HostReads, "pack_on_cpu", True)
    cfg = s2d2.DecodeConfig(gen_length=24, **VERIFYING["always sampled"])
    got = _batch_against_single(monkeypatch, golden_model("shifted"), PROMPT_SET, cfg, SEEDS, 2)
    assert got["in_batch"] == got["alone"] == got["summary"]["sequence_reads"]
    assert got["summary"]["reads"] < got["summary"]["sequence_reads"]


def test_the_static_backend_shares_its_reads_too(monkeypatch):
    monkeypatch.setattr(HostReads, "pack_on_cpu", True)
    model = tiny_qwen3(seed=0)
    model.model.model.norm.weight.data *= 25.0  # drafts and verifier often disagree
    model.set_backend("static")
    cfg = s2d2.DecodeConfig(gen_length=24, **VERIFYING["ucb sampled, kv reuse"])
    got = _batch_against_single(monkeypatch, model, PROMPT_SET[:4], cfg, SEEDS[:4], 4)
    assert model.static.stats.batched_forwards > 0 and model.static.stats.dynamic_fallbacks == 0
    assert got["in_batch"] == got["alone"] == got["summary"]["sequence_reads"]
    assert got["summary"]["reads"] <= got["summary"]["sequence_reads"] / 2, got["summary"]


def test_a_shared_transfer_that_fails_lets_each_reader_read_alone(monkeypatch):
    """A shared transfer that raises (say an asynchronous device error) costs nothing but time: each reader then
    makes its own batch-1 read, so every sequence still gets its batch-1 trace."""
    import s2d2.decoding.batch as batch

    monkeypatch.setattr(HostReads, "pack_on_cpu", True)
    shared = batch.packed_values

    def failing(requests, *args):
        if len(requests) > 1:
            raise RuntimeError("device lost")
        return shared(requests, *args)

    monkeypatch.setattr(batch, "packed_values", failing)
    cfg = s2d2.DecodeConfig(gen_length=24, **VERIFYING["always sampled"])
    got = _batch_against_single(monkeypatch, golden_model("aligned"), PROMPT_SET[:3], cfg, SEEDS[:3], 3,
                                engine="threads")
    summary = got["summary"]
    assert summary["failed_reads"] > 0 and got["in_batch"] == got["alone"] == summary["sequence_reads"]
    assert summary["reads"] == summary["sequence_reads"] + summary["failed_reads"]  # each failed one, then alone


def test_the_plain_cpu_path_never_hands_a_read_off(monkeypatch):
    calls = []
    read = Worker.read
    monkeypatch.setattr(Worker, "read", lambda self, *a: calls.append(self.index) or read(self, *a))
    cfg = s2d2.DecodeConfig(gen_length=24, **VERIFYING["always sampled"])
    for engine in ("threads", "batch-first"):
        results = s2d2.generate_batch(golden_model("aligned"), PROMPT_SET[:4], cfg, SEEDS[:4], batch_size=4,
                                      engine=engine)
        summary = results[0].batch.summary()
        assert calls == [] and summary["reads"] == summary["sequence_reads"] == 0
    monkeypatch.setattr(HostReads, "pack_on_cpu", True)  # the spy itself sees hand-offs when there are some
    s2d2.generate_batch(golden_model("aligned"), PROMPT_SET[:2], cfg, SEEDS[:2], batch_size=2, engine="threads")
    assert calls


def test_packed_values_of_many_requests_are_each_requests_own():
    a = [torch.tensor([0.1, 2.5e-8], dtype=torch.float32), torch.tensor(3), torch.tensor([True, False])]
    b = [torch.tensor(0.3, dtype=torch.float32), torch.arange(6).reshape(2, 3), torch.zeros(0)]
    c = [torch.tensor([151_000, 2**40]), torch.tensor(1e-300, dtype=torch.float64)]
    alone = [packed_values([r], torch.float64, torch.device("cpu"))[0] for r in (a, b, c)]
    together = packed_values([a, b, c], torch.float64, torch.device("cpu"))
    assert together == alone
    assert together[0] == [[torch.tensor(0.1).item(), torch.tensor(2.5e-8).item()], 3, [1, 0]]
    assert together[1] == [torch.tensor(0.3).item(), [0, 1, 2, 3, 4, 5], []]
    assert together[2] == [[151_000, 2**40], 1e-300] and isinstance(together[0][1], int)


class _Gated:
    """A stub model: every forward of a sequence whose input starts with GATE waits for `gate` (set by the test)
    after saying so (`entered`); the rest return zeros at once."""

    GATE = 99

    def __init__(self) -> None:
        self.device = torch.device("cpu")
        self.gate, self.entered = threading.Event(), threading.Event()

    def forward(self, cache, ids, *_args, **_kw):
        if int(ids[0]) == self.GATE:
            self.entered.set()
            self.gate.wait()
        return torch.zeros(len(ids), 3)


class _Cache:
    def get_seq_length(self) -> int:
        return 0


def _sequence(stopped: threading.Event, first_id: int, started: list[threading.Thread]):
    """A job: a forward, a packed read through the batch, then (unless stopped) another forward."""
    def job(model: Any) -> Any:
        started.append(threading.current_thread())
        reads = HostReads(model.device, model.share_read)
        model.forward(_Cache(), torch.tensor([first_id, 1]), torch.arange(2), "full", 0)
        got = reads.fetch({"x": torch.tensor([first_id, 5])})
        if stopped.is_set():  # its own stop flag, checked before its next forward (as Stoppable does)
            return ("stopped", got["x"])
        model.forward(_Cache(), torch.tensor([first_id, 2]), torch.arange(2), "full", 0)
        return ("done", got["x"])
    return job


@pytest.mark.parametrize("how", ["stop", "close"])
def test_a_live_batch_sequence_waiting_on_a_read_is_released(monkeypatch, how):
    """Sequence A's read is pending while the scheduler is held in B's forward: a Stop lets A leave at its next
    forward (its read is still served), a close releases A's thread (BatchClosed) once the step under way ends."""
    monkeypatch.setattr(HostReads, "pack_on_cpu", True)
    model = _Gated()
    batch = LiveBatch(model, max_batch=2)
    a_stop, b_stop = threading.Event(), threading.Event()
    threads: list[threading.Thread] = []
    # one key each, so nothing shares a forward: A's forward runs (then A asks for its read), B's blocks on the gate
    a = batch.submit(_sequence(a_stop, 1, threads), key="a")
    b = batch.submit(_sequence(b_stop, _Gated.GATE, threads), key="b")
    try:
        assert model.entered.wait(60)
        ledger = batch.ledger  # the busy period's own (an idle batch starts a new one)
        if how == "stop":
            a_stop.set()
        else:
            closer = threading.Thread(target=batch.close, kwargs={"timeout": 60})
            closer.start()
        model.gate.set()
        assert a.done.wait(60) and b.done.wait(60)
        if how == "stop":
            assert a.outcome() == ("stopped", [1, 5]) and b.outcome() == ("done", [99, 5])
            assert (ledger.reads, ledger.sequence_reads) == (1, 2)  # both reads in one transfer
        else:
            closer.join(60)
            assert isinstance(a.error, BatchClosed)
        for t in threads:
            t.join(60)
            assert not t.is_alive()
    finally:
        model.gate.set()
        batch.close()
