"""The live batch on the batch-first step (issue 37): decodes the engine covers are rows of one step on the batch's
own thread (no thread per sequence), each still its lone `generate` trace; a decode it does not cover stays a
thread job and shares its key's forwards; a row's Stop, time limit, errors and the batch's close are its own.

The bundled tiny model in float64 (a shared forward differs from a lone one by summation order only). Decodes are
made to start together by events (`wait_s` holds an idle batch until it is full), never by timing.
"""
from __future__ import annotations

import threading
from functools import lru_cache
from typing import Any, Optional

import pytest
import torch

import s2d2
from s2d2.api import prepare
from s2d2.config import preset
from s2d2.decoding.decoder import make_check
from s2d2.decoding import live_batch
from s2d2.decoding.live_batch import BatchClosed, LiveBatch
from s2d2.decoding.live_jobs import Decode
from s2d2.decoding.lockstep import covers
from tests.support.trace_compare import trace_mismatch

PROMPTS = ["What is 12 + 7?", "Count to five.", "Name a colour."]
WAIT = 120.0  # a bound on waiting for an event, so a broken engine fails instead of hanging (never a timing test)


@lru_cache(maxsize=None)
def model64() -> Any:
    return s2d2.load_model("tiny", dtype=torch.float64, backend="dynamic")


class Seen:
    """A decode's progress check and stop flag: the threads they ran on, how many block ends it saw; optionally
    the check raises, or holds the batch (a row's runs on the batch's thread) until released."""

    def __init__(self, raises: bool = False, hold: Optional[threading.Event] = None) -> None:
        self.threads: set[str] = set()
        self.blocks = 0
        self.raises, self.hold, self.holding = raises, hold, threading.Event()

    def __call__(self, steps: list[Any]) -> None:
        self.threads.add(threading.current_thread().name)
        self.blocks += 1
        if self.hold is not None:
            self.holding.set()
            assert self.hold.wait(WAIT)
        if self.raises:
            raise RuntimeError("a bug in this visitor's progress hook")

    def flag(self) -> bool:
        """A stop flag that never stops (it is read before each of the decode's forwards)."""
        self.threads.add(threading.current_thread().name)
        return False


def decode(prompt: str, cfg: Any, seed: int, seen: Seen, stopped: Any = None,
           max_seconds: Optional[float] = None) -> Decode:
    prep = prepare(model64(), prompt, cfg, None, None)
    flag = stopped or seen.flag
    return Decode(prep, seed, lambda: make_check(flag, max_seconds, seen), flag)


def together(batch: LiveBatch, jobs: list[Decode]) -> tuple[list[Any], Any]:
    """Submit `jobs` to an idle batch gathering companions (wait_s): they start in one admission. The tickets and
    this busy period's ledger."""
    tickets = [batch.submit(jobs[0])]
    assert batch.gathering.wait(WAIT)
    ledger = batch.ledger
    tickets += [batch.submit(j) for j in jobs[1:]]
    return tickets, ledger


def test_covered_decodes_are_rows_of_one_step_on_the_batchs_thread():
    """Three covered presets in one live batch at an accelerator's fixed cost: one step per forward, every live row
    in it (the longest decode's NFE steps in all), every progress check on the batch's own thread (no sequence
    thread), and each trace its lone `generate` trace."""
    cfgs = [preset("sdar-config-a").replace(gen_length=32), preset("dynamic-baseline").replace(gen_length=32),
            preset("fastdllm-config-c").replace(gen_length=32, temperature=0.8)]
    assert all(covers(c, model64()) for c in cfgs)
    batch = LiveBatch(model64(), max_batch=3, wait_s=60.0, fixed_tokens=4096, name="live-rows")
    seen = [Seen() for _ in cfgs]
    tickets, ledger = together(batch, [decode(p, c, i, s) for i, (p, c, s) in enumerate(zip(PROMPTS, cfgs, seen))])
    results = [t.outcome(WAIT) for t in tickets]
    batch.close()
    for i, (got, cfg, s) in enumerate(zip(results, cfgs, seen)):
        alone = s2d2.generate(model64(), PROMPTS[i], cfg, seed=i)
        assert trace_mismatch(got.trace, alone.trace) is None
        assert got.metrics["nfe"] == alone.metrics["nfe"]
        assert s.threads == {"live-rows"}
    nfe = [r.metrics["nfe"] for r in results]
    assert len(ledger.forwards) == batch.steps == max(nfe)  # one forward per step ...
    assert len(ledger.forwards[0].sequences) == 3  # ... carrying every live row
    assert sum(len(f.sequences) for f in ledger.forwards) == sum(nfe)


def test_an_uncovered_decode_is_a_thread_job_sharing_its_keys_forwards(monkeypatch):
    """sdar-config-b (a row) and a decode beyond the engine (a thread job) under one key share forwards, each its
    lone trace. The engine covers every config that decodes, so the test makes it refuse one: a diffusion baseline
    with sub-blocks (which it once refused)."""
    row_cfg = preset("sdar-config-b").replace(gen_length=32)
    job_cfg = preset("dynamic-baseline").replace(gen_length=32, sub_block_length=4)
    assert covers(row_cfg, model64()) and covers(job_cfg, model64())
    monkeypatch.setattr(live_batch, "covers", lambda cfg, model: cfg != job_cfg and covers(cfg, model))
    batch = LiveBatch(model64(), max_batch=2, wait_s=60.0, name="live-mixed")
    seen = [Seen(), Seen()]
    tickets, ledger = together(batch, [decode(PROMPTS[0], row_cfg, 1, seen[0]),
                                       decode(PROMPTS[1], job_cfg, 2, seen[1])])
    results = [t.outcome(WAIT) for t in tickets]
    batch.close()
    assert seen[0].threads == {"live-mixed"} and all(n.startswith("s2d2-seq") for n in seen[1].threads)
    assert any(sorted(f.sequences) == [0, 1] for f in ledger.forwards)  # they shared forwards
    for i, (got, cfg) in enumerate(zip(results, (row_cfg, job_cfg))):
        assert trace_mismatch(got.trace, s2d2.generate(model64(), PROMPTS[i], cfg, seed=i + 1).trace) is None


@pytest.mark.parametrize("name", ["sdar-config-a", "lossless", "llada2-conservative", "d2f-s2d2"])  # lossless: KV
def test_a_rows_stop_time_limit_and_error_are_its_own(name):  # reuse, fused commits; llada2-*: editing; d2f: pipeline
    """Four rows in one step: one stopped by its flag after its first block ends "cancelled", one at its time
    limit, one whose progress hook raises gets that error; each as its lone decode would, and the fourth decodes
    on untouched."""
    cfg = preset(name).replace(gen_length=32, **({"block_length": 4} if name.startswith(("llada2", "d2f")) else {}))
    batch = LiveBatch(model64(), max_batch=4, wait_s=60.0, name="live-own")
    seen = [Seen(), Seen(), Seen(raises=True), Seen()]
    stop = lambda: seen[0].blocks >= 1  # noqa: E731
    jobs = [decode(PROMPTS[0], cfg, 1, seen[0], stopped=stop), decode(PROMPTS[1], cfg, 2, seen[1], max_seconds=0),
            decode(PROMPTS[2], cfg, 3, seen[2]), decode(PROMPTS[0], cfg, 4, seen[3])]
    tickets, _ = together(batch, jobs)
    stopped, timed, _, other = (t.outcome(WAIT) if i != 2 else None for i, t in enumerate(tickets))
    with pytest.raises(RuntimeError, match="progress hook"):
        tickets[2].outcome(WAIT)
    assert batch.served == 4 and batch.live() == 0
    batch.close()
    assert set().union(*(s.threads for s in seen)) == {"live-own"}  # every decode a row of the batch's step
    assert stopped.trace.footer.finish_reason == "cancelled"
    assert len(stopped.trace.blocks) == 1 or cfg.loop == "pipeline"  # (D2F: several blocks in flight)
    alone = s2d2.generate(model64(), PROMPTS[0], cfg, seed=1, should_stop=lambda: True)
    assert trace_mismatch(stopped.trace, alone.trace) is None
    assert timed.trace.footer.finish_reason == "time_limit"
    assert trace_mismatch(timed.trace, s2d2.generate(model64(), PROMPTS[1], cfg, seed=2, max_seconds=0).trace) is None
    assert trace_mismatch(other.trace, s2d2.generate(model64(), PROMPTS[0], cfg, seed=4).trace) is None


class FailsFor:
    """The model, except that every forward carrying the cache of its `nth` new sequence raises from that
    sequence's `at`-th forward on (a request that fails for its own input, in whatever forward it shares)."""

    def __init__(self, model: Any, nth: int, at: int) -> None:
        self._model, self._nth, self._at = model, nth, at
        self.caches, self.bad_calls, self.bad = 0, 0, None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)

    def new_cache(self) -> Any:
        cache = self._model.new_cache()
        self.caches += 1
        if self.caches == self._nth:
            self.bad = cache
        return cache

    def _check(self, caches: list[Any]) -> None:
        if any(c is self.bad for c in caches):
            self.bad_calls += 1
            if self.bad_calls >= self._at:
                raise RuntimeError("this sequence's forward failed")

    def forward_batch(self, reqs: list[Any]) -> Any:
        self._check([r.cache for r in reqs])
        return self._model.forward_batch(reqs)

    def forward(self, cache: Any, input_ids: Any, positions: Any, attention: Any, keep: int,
                last: Optional[int] = None, rows: Optional[torch.Tensor] = None) -> Any:
        self._check([cache])
        return self._model.forward(cache, input_ids, positions, attention, keep, last, rows)


def test_a_rows_failing_forward_fails_only_that_row():
    """Three rows share their forwards; the second's forwards fail from its second on: the shared forward raises,
    each member is retried alone, only that row's ticket gets the error, the others keep their lone traces."""
    cfg = preset("sdar-config-a").replace(gen_length=32)
    model = FailsFor(model64(), nth=2, at=2)
    batch = LiveBatch(model, max_batch=3, wait_s=60.0, fixed_tokens=4096)
    tickets, ledger = together(batch, [decode(p, cfg, i, Seen()) for i, p in enumerate(PROMPTS)])
    with pytest.raises(RuntimeError, match="this sequence's forward failed"):
        tickets[1].outcome(WAIT)
    for i in (0, 2):
        assert trace_mismatch(tickets[i].outcome(WAIT).trace, s2d2.generate(model64(), PROMPTS[i], cfg, seed=i).trace) \
            is None
    batch.close()
    failed = [f for f in ledger.forwards if f.error]
    assert len(failed) == 2 and len(failed[0].sequences) == 3 and failed[1].sequences == [1]


def test_close_ends_a_live_row_and_the_queue():
    """A batch closed while a row decodes (its progress hook holds the step) and another waits: both tickets fail
    with BatchClosed, and the batch takes nothing more."""
    cfg = preset("sdar-config-a").replace(gen_length=32)
    release = threading.Event()
    holder = Seen(hold=release)
    batch = LiveBatch(model64(), max_batch=1)
    live = batch.submit(decode(PROMPTS[0], cfg, 1, holder))
    assert holder.holding.wait(WAIT)
    queued = batch.submit(decode(PROMPTS[1], cfg, 2, Seen()))
    batch.close(timeout=0)
    release.set()
    for t in (live, queued):
        with pytest.raises(BatchClosed):
            t.outcome(WAIT)
    with pytest.raises(BatchClosed):
        batch.submit(decode(PROMPTS[2], cfg, 3, Seen()))
