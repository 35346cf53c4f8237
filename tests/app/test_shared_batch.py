"""A whole class at once (issue 25): visitors' Runs decoded in one shared batch (components/run/shared_batch.py over
s2d2/decoding/live_batch.py) give each visitor the trace a lone Run gives, and each visitor keeps its own Stop, its
own disconnect and its own errors.

The bundled tiny model in float64 (a shared forward differs from a lone one by summation order only), the default
preset at 32 tokens. Visitors are made to share by events, never by timing: a job that holds the model's batch (it
waits, in its own sequence thread, so the batch waits with it) keeps both visitors queued until each has reported
its place in the queue; released, the batch admits them in one step and they decode together from their first
forward.
"""
from __future__ import annotations

import threading
from functools import lru_cache
from typing import Any, Optional

import pytest
import torch

import s2d2
from components.run import shared_batch
from components.run.handlers import progress_line
from components.run.knobs import EXAMPLE_PROMPTS
from components.run.workers import record_stream
from components.serve.gpu_slot import STOPPED_QUEUED
from s2d2.config import preset
from s2d2.decoding import live_batch
from s2d2.decoding.live_batch import BatchClosed, LiveBatch, Withdrawn
from s2d2.decoding.lockstep import covers
from tests.support.trace_compare import trace_mismatch

CFG = preset("sdar-config-a").replace(gen_length=32)
NAME = "tiny-float64"
WAIT = 120.0  # a bound on waiting for an event, so a broken engine fails instead of hanging (never a timing test)


@lru_cache(maxsize=None)
def model64() -> Any:
    return s2d2.load_model("tiny", dtype=torch.float64, backend="dynamic")


@lru_cache(maxsize=None)
def lone(prompt: str, seed: int, stop_after_first_block: bool = False) -> Any:
    stop = (lambda: True) if stop_after_first_block else None
    return s2d2.generate(model64(), prompt, CFG, seed=seed, should_stop=stop)


@pytest.fixture(autouse=True)
def sharing(monkeypatch):
    monkeypatch.setenv("S2D2_BATCH_MAX", "4")
    monkeypatch.delenv("S2D2_BATCH_WAIT_MS", raising=False)
    yield
    shared_batch.close_all()


class Visitor:
    """One visitor's shared Run in a thread: its progress (the most others it decoded with, whether it was queued),
    optionally a Stop after its first block, or a progress hook that raises."""

    def __init__(self, prompt: str, seed: int, stop_after: bool = False, raise_at_block: bool = False,
                 cfg: Any = CFG) -> None:
        self.prompt, self.seed, self.cfg = prompt, seed, cfg
        self.stop_after, self.raise_at_block = stop_after, raise_at_block
        self.blocks, self.together = 0, 0
        self.queued = threading.Event()
        self.first_in_line = threading.Event()  # reported place 1 in the queue
        self.result: Any = None
        self.error: Optional[BaseException] = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def on_block(self, steps: list[Any], together: Optional[int] = None, queued: Optional[int] = None) -> None:
        if queued:
            self.queued.set()
            if queued == 1:
                self.first_in_line.set()
            return
        self.blocks += 1
        self.together = max(self.together, together or 0)
        if self.raise_at_block:
            raise RuntimeError("a bug in this visitor's decode")

    def should_stop(self) -> bool:
        return self.stop_after and self.blocks >= 1

    def _run(self) -> None:
        try:
            self.result = shared_batch.shared_generate(NAME)(model64(), self.prompt, self.cfg, seed=self.seed,
                                                             on_block=self.on_block, should_stop=self.should_stop)
        except Exception as exc:
            self.error = exc

    def start(self) -> "Visitor":
        self.thread.start()
        return self

    def join(self) -> "Visitor":
        self.thread.join(WAIT)
        assert not self.thread.is_alive()
        return self


def hold_batch() -> threading.Event:
    """Hold the model's shared batch (a job that waits inside it) until the returned event is set."""
    release, holding = threading.Event(), threading.Event()

    def holder(seq_model: Any) -> bool:
        holding.set()
        return release.wait(WAIT)

    shared_batch.batch_for(NAME, model64()).submit(holder)
    assert holding.wait(WAIT)
    return release


def in_one_batch(*visitors: Visitor) -> None:
    """The visitors queued behind a held batch, then released together: they decode in one batch."""
    release = hold_batch()
    for v in visitors:
        v.start()
    for v in visitors:
        assert v.queued.wait(WAIT)
    release.set()
    for v in visitors:
        v.join()


SAMPLED = CFG.replace(temperature=0.8, top_p=0.9)  # shares with CFG (same loop and block length); the seed matters


@pytest.mark.parametrize("rng", ["torch", "counter"])  # the library's stream, and the app's on the bundled models
def test_visitors_in_one_batch_get_their_lone_traces(rng):
    """Three visitors, one of them sampling, in one batch: each trace equals its lone one in every field but wall
    times (tokens, NFE, every decision exactly; every score to trace_compare's float64 tolerance)."""
    cfg, sampled = CFG.replace(rng=rng), SAMPLED.replace(rng=rng)
    a = Visitor(EXAMPLE_PROMPTS[0], 1, cfg=cfg)
    b = Visitor(EXAMPLE_PROMPTS[1], 2, cfg=cfg)
    c = Visitor(EXAMPLE_PROMPTS[2], 3, cfg=sampled)
    in_one_batch(a, b, c)
    alone = [s2d2.generate(model64(), EXAMPLE_PROMPTS[i], c, seed=i + 1) for i, c in enumerate((cfg, cfg, sampled))]
    for v, solo in zip((a, b, c), alone):
        assert v.error is None and v.together == 2  # they did decode together
        assert trace_mismatch(v.result.trace, solo.trace) is None
        assert v.result.token_ids == solo.token_ids and v.result.metrics["nfe"] == solo.metrics["nfe"]
        steps = solo.trace.to_dict()["steps"]  # what was compared: decisions, drafts' scores, verifications
        assert steps and all(st["decision"] is not None and st["drafts"] for st in steps)
        assert any(st["verification"] for st in steps)
    assert a.result.text == alone[0].text
    other_seed = s2d2.generate(model64(), EXAMPLE_PROMPTS[2], sampled, seed=4)
    assert trace_mismatch(other_seed.trace, alone[2].trace) is not None  # the sampled one's seed is in its trace


def test_the_comparison_can_fail():
    assert trace_mismatch(lone(EXAMPLE_PROMPTS[0], 1).trace, lone(EXAMPLE_PROMPTS[1], 2).trace) is not None
    assert "p" in (trace_mismatch({"p": 0.5}, {"p": 0.5 + 1e-6}) or "")


def test_stop_of_one_keeps_its_partial_trace_and_leaves_the_other_unchanged():
    a = Visitor(EXAMPLE_PROMPTS[0], 1, stop_after=True)
    b = Visitor(EXAMPLE_PROMPTS[1], 2)
    in_one_batch(a, b)
    assert a.together == 1
    assert a.result.trace.footer.finish_reason == "cancelled" and len(a.result.trace.blocks) == 1
    assert trace_mismatch(a.result.trace, lone(EXAMPLE_PROMPTS[0], 1, stop_after_first_block=True).trace) is None
    assert trace_mismatch(b.result.trace, lone(EXAMPLE_PROMPTS[1], 2).trace) is None


def test_the_worker_survives_a_decode_that_raises():
    a = Visitor(EXAMPLE_PROMPTS[0], 1, raise_at_block=True)
    b = Visitor(EXAMPLE_PROMPTS[1], 2)
    in_one_batch(a, b)
    assert isinstance(a.error, RuntimeError) and "a bug" in str(a.error)
    assert b.error is None and trace_mismatch(b.result.trace, lone(EXAMPLE_PROMPTS[1], 2).trace) is None
    c = Visitor(EXAMPLE_PROMPTS[2], 3).start().join()  # the same batch serves the next visitor
    assert c.error is None and trace_mismatch(c.result.trace, lone(EXAMPLE_PROMPTS[2], 3).trace) is None
    assert shared_batch.batch_for(NAME, model64()).served == 4  # the holder, a, b, c


def corrupt_decode(prompt: str, seed: int, bad_forward: int) -> Any:
    """A decode whose forward number `bad_forward` asks for a token id outside the vocabulary (the embedding
    raises): a request that fails for its own input, in whatever forward it shares."""
    from s2d2.api import prepare, run_prepared
    from s2d2.decoding.decoder import make_check

    model = model64()
    prep = prepare(model, prompt, CFG, None, None)

    class Corrupt:
        def __init__(self, seq_model: Any) -> None:
            self.seq_model, self.calls = seq_model, 0

        def __getattr__(self, name: str) -> Any:
            return getattr(self.seq_model, name)

        def forward(self, cache: Any, ids: Any, *rest: Any) -> Any:
            self.calls += 1
            if self.calls == bad_forward:
                ids = torch.full_like(ids, model.model.config.vocab_size + 7)
            return self.seq_model.forward(cache, ids, *rest)

    return lambda seq_model: run_prepared(model, prep, seed, True, make_check(None, None, None),
                                          Corrupt(seq_model))[0]


def test_a_forward_that_fails_for_one_visitor_fails_only_that_visitor():
    """Three decodes share their forwards; the second forward of one asks for an impossible token: the shared
    forward raises, each member is retried alone, and only that decode fails (one readable message); the two
    visitors go on with their lone traces exactly (tokens, decisions, NFE)."""
    release = hold_batch()
    batch = shared_batch.batch_for(NAME, model64())
    ledger = batch.ledger  # this busy period's
    a, b = Visitor(EXAMPLE_PROMPTS[0], 1).start(), Visitor(EXAMPLE_PROMPTS[1], 2).start()
    assert a.queued.wait(WAIT) and b.queued.wait(WAIT)
    bad = batch.submit(corrupt_decode(EXAMPLE_PROMPTS[2], 3, bad_forward=2), shared_batch.share_key(model64(), CFG))
    release.set()
    a.join(), b.join()
    with pytest.raises(IndexError, match="index out of range"):
        bad.outcome(WAIT)
    failed = [f for f in ledger.forwards if f.error]
    assert len(failed) == 2 and len(failed[0].sequences) == 3 and len(failed[1].sequences) == 1  # shared, then alone
    for v, prompt, seed in ((a, EXAMPLE_PROMPTS[0], 1), (b, EXAMPLE_PROMPTS[1], 2)):
        assert v.error is None and v.together == 1  # at its first block end the failed decode had left
        assert trace_mismatch(v.result.trace, lone(prompt, seed).trace) is None
        assert v.result.metrics["nfe"] == lone(prompt, seed).metrics["nfe"]


def test_a_visitor_who_disconnects_leaves_the_batch():
    """Through record_stream, as the Run handler streams it: the first visitor's stream is closed (Gradio closes it
    when the tab or client goes) while both decode; the second goes on without it, with its lone trace."""
    frozen, closed = threading.Event(), threading.Event()
    config = CFG.to_dict()
    batch = shared_batch.batch_for(NAME, model64())
    calls, live_when_frozen, second_events = [0], [0], []

    def second_cancel() -> bool:  # at its third forward the whole batch waits here until the first has gone
        calls[0] += 1
        if calls[0] == 3:
            live_when_frozen[0] = batch.live()
            frozen.set()
            assert closed.wait(WAIT)
        return False

    def stream(prompt: str, seed: int, cancel: Any = lambda: False) -> Any:
        return record_stream(prompt, NAME, config, seed, shared_batch.shared_generate(NAME), lambda n: model64(),
                             min_interval=0, cancel=cancel)

    release = hold_batch()
    first = stream(EXAMPLE_PROMPTS[0], 1)
    assert next(first).get("queued") == 1  # the first visitor's stream is open, its run queued
    second = threading.Thread(target=lambda: second_events.extend(stream(EXAMPLE_PROMPTS[1], 2, second_cancel)),
                              daemon=True)
    second.start()
    release.set()
    assert frozen.wait(WAIT)
    first.close()  # the first visitor disconnects: its decode leaves at its next forward
    closed.set()
    second.join(WAIT)
    assert live_when_frozen[0] == 2  # they were decoding together when the first went
    assert second_events[-1]["kind"] == "done"
    progress = [e for e in second_events if e["kind"] == "progress" and not e.get("queued")]
    assert progress[-1]["together"] == 0
    got = s2d2.Trace.from_dict(second_events[-1]["trace"])
    assert trace_mismatch(got, lone(EXAMPLE_PROMPTS[1], 2).trace) is None
    assert batch.live() == 0 and batch.served == 3  # the holder, the first visitor (left), the second


def test_a_stop_while_queued_withdraws_the_run_at_once():
    """Stop pressed while the Run still waits for a place in the batch: it leaves the queue at once (the batch is
    still held: it took no step), its stream ends "stopped before it started" with nothing run, the visitor behind
    it moves up to place 1, and that visitor's decode is its lone one."""
    stop = threading.Event()
    config = CFG.to_dict()
    batch = shared_batch.batch_for(NAME, model64())
    release = hold_batch()
    first = record_stream(EXAMPLE_PROMPTS[0], NAME, config, 1, shared_batch.shared_generate(NAME),
                          lambda n: model64(), min_interval=0, cancel=stop.is_set)
    assert next(first).get("queued") == 1
    b = Visitor(EXAMPLE_PROMPTS[1], 2).start()
    assert b.queued.wait(WAIT) and not b.first_in_line.is_set()  # behind the first, at place 2
    assert batch.waiting() == 2
    stop.set()
    rest = list(first)  # ends while the batch is still held
    assert rest[-1] == {"kind": "stopped", "message": STOPPED_QUEUED}
    assert all(e["kind"] == "progress" and e.get("queued") for e in rest[:-1])  # nothing decoded
    assert batch.waiting() == 1 and batch.served == 1  # the withdrawn run; the holder still holds
    assert b.first_in_line.wait(WAIT)  # the place behind it moved up
    release.set()
    b.join()
    assert b.error is None and b.together == 0
    assert trace_mismatch(b.result.trace, lone(EXAMPLE_PROMPTS[1], 2).trace) is None
    assert batch.served == 3 and batch.waiting() == 0 and batch.live() == 0


def test_withdraw_leaves_a_started_decode_alone():
    hold, running = threading.Event(), threading.Event()
    batch = LiveBatch(model64(), max_batch=1)
    first = batch.submit(lambda m: (running.set(), hold.wait(WAIT))[1])
    assert running.wait(WAIT)
    second, third = batch.submit(lambda m: "second"), batch.submit(lambda m: "third")
    assert (second.position, third.position) == (1, 2)
    assert not batch.withdraw(first)  # decoding: only its own flag ends it
    assert batch.withdraw(second) and third.position == 1 and not batch.withdraw(second)
    with pytest.raises(Withdrawn):
        second.outcome(WAIT)
    hold.set()
    assert first.outcome(WAIT) is True and third.outcome(WAIT) == "third"
    batch.close()


def test_another_block_length_decodes_in_a_batch_of_its_own():
    other = CFG.replace(block_length=8)
    a = Visitor(EXAMPLE_PROMPTS[0], 1)
    b = Visitor(EXAMPLE_PROMPTS[1], 2, cfg=other)
    in_one_batch(a, b)
    assert a.together == 0 and b.together == 0  # in the batch at once, never in one forward
    assert trace_mismatch(a.result.trace, lone(EXAMPLE_PROMPTS[0], 1).trace) is None
    alone = s2d2.generate(model64(), EXAMPLE_PROMPTS[1], other, seed=2)
    assert trace_mismatch(b.result.trace, alone.trace) is None


def test_presets_that_cannot_share_decode_alone():
    model = model64()
    assert shared_batch.share_key(model, CFG) == ("block", 4)
    assert shared_batch.share_key(model, CFG.replace(block_length=8)) != shared_batch.share_key(model, CFG)
    assert shared_batch.share_key(model, preset("sdar-config-a").replace(policy="cost_aware")) is None

    class Flash:
        def batch_unsupported(self) -> str:
            return "it needs attn_implementation 'sdpa' or 'eager', not 'flash_attention_2'"

    assert shared_batch.share_key(Flash(), CFG) is None


def test_a_static_backend_model_shares_with_a_slot_per_run():
    """The static backend (CUDA graphs on a GPU; the same buffers eagerly here) joins the shared batch: its storage
    grows to S2D2_BATCH_MAX slots when the batch starts, and two Runs in one batch get their lone traces."""
    model = s2d2.load_model("tiny", dtype=torch.float64, backend="static")
    batch = shared_batch.batch_for("tiny-static", model)
    assert model.static.slots == 4
    release, holding = threading.Event(), threading.Event()
    batch.submit(lambda seq_model: (holding.set(), release.wait(WAIT))[1])
    assert holding.wait(WAIT)
    waiting = [threading.Event(), threading.Event()]  # each visitor saw its place in the queue
    results: list[Any] = [None, None]

    def visitor(i: int) -> None:
        def on_block(steps: list[Any], together: Optional[int] = None, queued: Optional[int] = None) -> None:
            if queued:
                waiting[i].set()
        results[i] = shared_batch.shared_generate("tiny-static")(model, EXAMPLE_PROMPTS[i], CFG, seed=i + 1,
                                                                 on_block=on_block)

    threads = [threading.Thread(target=visitor, args=(i,), daemon=True) for i in range(2)]
    for t in threads:
        t.start()
    assert all(w.wait(WAIT) for w in waiting)
    release.set()
    for t in threads:
        t.join(WAIT)
    assert model.static.stats.batched_forwards > 0  # they shared static forwards
    for i, got in enumerate(results):
        alone = s2d2.generate(model, EXAMPLE_PROMPTS[i], CFG, seed=i + 1)
        assert trace_mismatch(got.trace, alone.trace) is None


def test_sharing_knobs(monkeypatch):
    assert shared_batch.sharing_on() and shared_batch.run_concurrency() == 4
    monkeypatch.setenv("S2D2_BATCH_MAX", "1")
    assert not shared_batch.sharing_on() and shared_batch.run_concurrency() == 1
    monkeypatch.setenv("S2D2_BATCH_MAX", "65")
    with pytest.raises(ValueError, match="S2D2_BATCH_MAX"):
        shared_batch.batch_max()
    monkeypatch.setenv("S2D2_BATCH_WAIT_MS", "250")
    assert shared_batch.batch_wait_s() == 0.25


def test_the_status_line_says_where_a_run_is():
    assert "position 3" in progress_line({"queued": 3, "elapsed": 1.0, "steps": 0, "commits": []})
    line = progress_line({"together": 5, "elapsed": 2.0, "steps": 7, "commits": [[0, "a", "x", 1]]})
    assert "decoding together with 5 others" in line and "7 steps" in line
    assert "together" not in progress_line({"together": 0, "elapsed": 2.0, "steps": 7, "commits": []})


def test_live_batch_queue_positions_max_batch_and_close():
    """LiveBatch alone, with jobs that take no forward: at most max_batch at once, the rest queued in order, and a
    close fails what is still queued."""
    hold, running = threading.Event(), threading.Event()
    batch = LiveBatch(model64(), max_batch=1)
    first = batch.submit(lambda m: (running.set(), hold.wait(WAIT)) and "first")
    assert running.wait(WAIT)
    second = batch.submit(lambda m: "second")
    assert second.position == 1 and not second.started
    hold.set()
    assert first.outcome(WAIT) == "first" and second.outcome(WAIT) == "second"
    blocked, running = threading.Event(), threading.Event()
    third = batch.submit(lambda m: (running.set(), blocked.wait(WAIT))[1])
    assert running.wait(WAIT)
    fourth = batch.submit(lambda m: "never")
    batch.close(timeout=0)
    blocked.set()
    assert third.outcome(WAIT) is True
    with pytest.raises(BatchClosed):
        fourth.outcome(WAIT)
    with pytest.raises(BatchClosed):
        batch.submit(lambda m: None)


def test_waiting_for_companions():
    """S2D2_BATCH_WAIT_MS's engine side: with a wait, an idle batch's first job starts only once a companion came (the
    batch full, long before the wait would end); without one (the default), a lone job starts and finishes alone."""
    batch = LiveBatch(model64(), max_batch=2, wait_s=60.0)
    seen: list[int] = []
    first = batch.submit(lambda m: seen.append(batch.live()) or "first")
    assert batch.gathering.wait(WAIT) and not first.started  # held for a companion
    second = batch.submit(lambda m: "second")
    assert first.outcome(WAIT) == "first" and second.outcome(WAIT) == "second"
    assert seen == [2]  # both joined in one admission: the first had waited for the second
    batch.close()
    lone_batch = LiveBatch(model64(), max_batch=2)
    assert lone_batch.submit(lambda m: "alone").outcome(WAIT) == "alone"
    assert not lone_batch.gathering.is_set()
    lone_batch.close()


def test_a_covered_preset_runs_on_the_batch_step_and_another_in_a_thread(monkeypatch):
    """The app's shared Run on the batch-first step (issue 37): a covered preset's progress comes from the batch's
    own thread (a row of its step), a config beyond the engine from a sequence thread of its own; both decode in one
    batch with their lone traces. The engine covers every config a visitor can set, so the test makes it refuse one
    (a diffusion baseline with sub-blocks, which it once refused)."""
    threads: dict[str, set[str]] = {"row": set(), "job": set()}
    beyond = preset("dynamic-baseline").replace(gen_length=32, block_length=CFG.block_length, sub_block_length=4)
    assert covers(beyond, model64())
    monkeypatch.setattr(live_batch, "covers", lambda cfg, model: cfg != beyond and covers(cfg, model))

    class Where(Visitor):
        def __init__(self, kind: str, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.kind = kind

        def on_block(self, steps: list[Any], together: Optional[int] = None, queued: Optional[int] = None) -> None:
            if not queued:
                threads[self.kind].add(threading.current_thread().name)
            super().on_block(steps, together, queued)

    a = Where("row", EXAMPLE_PROMPTS[0], 1)
    b = Where("job", EXAMPLE_PROMPTS[1], 2, cfg=beyond)
    in_one_batch(a, b)
    assert threads["row"] == {f"s2d2-batch-{NAME}"}
    assert threads["job"] and all(n.startswith("s2d2-seq") for n in threads["job"])
    assert a.together == 1 and b.together == 1
    assert trace_mismatch(a.result.trace, lone(EXAMPLE_PROMPTS[0], 1).trace) is None
    assert trace_mismatch(b.result.trace, s2d2.generate(model64(), EXAMPLE_PROMPTS[1], beyond, seed=2).trace) is None
