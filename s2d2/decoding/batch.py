"""Batched decoding with batch-1 answers: each sequence runs the batch-1 decode loop unchanged, and only its model
forwards are shared.

Why this shape: the decode loops (block loop, LLaDA2 editing loop, D2F pipeline, AR) are synchronous code that
calls `model.forward` wherever its logic needs logits. Rewriting them as a batch-aware loop would give batch N a
second copy of every routing, acceptance and residual rule, free to drift from batch 1. Instead each sequence runs
the very same loop in its own thread, against a `SequenceModel` whose `forward` hands the request to the
`Scheduler` and waits. The scheduler resumes exactly one sequence at a time (a strict hand-off, never two threads
running decode code at once), so a sequence's host work, its random draws (its own torch.Generator) and its records
happen in the order batch 1 does them; when every live sequence waits on a forward (or has finished), the
scheduler groups the waiting requests (`group_requests`), runs each group as one padded forward
(`model.forward_batch`, s2d2/models/batch_forward.py) and hands each sequence its own logits.

Host reads share too. On the packed path (an accelerator, or `HostReads.pack_on_cpu`), a sequence's
`HostReads.fetch` is a hand-off like a forward (`SequenceModel.share_read`): when every live sequence waits, the
scheduler first serves ALL waiting reads with ONE transfer (`packed_values` of every reader's parts: one
`.tolist()`, split back, each value converted on its own, so each sequence gets exactly its lone fetch's values),
then runs the forwards. So a batch step costs ~2 transfers for the whole batch, not ~2 per sequence; the ledger
counts them (`reads`) against the fetches they served (`sequence_reads`, what the sequences' own `transfers` counts
add up to). A read that waits alone is done on the sequence's own thread (RUN_OWN: the very read batch 1 makes, and
nothing to share). On the plain CPU path nothing is moved and a fetch never hands off.

What a sequence sees therefore differs from batch 1 only in its forwards' float round-off (a padded batch sums in
another order) and in wall times. A sequence that finishes leaves; the next prompt of the queue takes its place
(continuous batching). A model without `forward_batch` (a test stub) runs the group's forwards one by one: the
same answers, no speed-up.

Invariants: a sequence's NFE counts the forwards it took part in (its Recorder sees one call per request, as at
batch 1); the batch's own forwards go to the `BatchLedger`; a shared forward that raises is retried once per member
alone, so a forward error reaches only the sequence whose request fails (`Scheduler._forward`); an error in one
sequence stops the batch and is raised (every other sequence's thread is released first).
"""
from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any, Callable, Iterable, NamedTuple, Optional, TypeVar

import torch

from ..models.base import ForwardRequest
from .batch_ledger import BatchForward, BatchLedger
from .transfers import packed_values

T = TypeVar("T")

# A forward's fixed cost in query tokens (its cost at zero queries over the cost of one more query): ~2.6 ms over
# ~0.086 ms for the bundled tiny model on one CPU thread (benchmarks/batch_speed.py). Larger on a GPU, where a
# forward is bound by reading the weights; `Scheduler(fixed_tokens=...)` sets it.
FIXED_TOKENS = 32
# The same on an accelerator, where a forward is bound by reading the weights: ~0.8 ms for SDAR-1.7B in bf16 on an
# H200 (issue 37) against ~3.4 GFLOP, a few ns, per query token, i.e. far above 10^4 tokens. 4096 is a floor that
# still puts every draft (B queries) and 2L verify (2B) of a batch of 128 in one forward for blocks up to 32, while
# a long prefill does not pad a whole batch of drafts to its length.
FIXED_TOKENS_ACCELERATOR = 4096


def fixed_tokens_for(model: Any) -> int:
    """A forward's fixed cost in query tokens for `model`: its own `batch_fixed_tokens` when it states one, else
    FIXED_TOKENS on the CPU and FIXED_TOKENS_ACCELERATOR on any other device."""
    own = getattr(model, "batch_fixed_tokens", None)
    if own is not None:
        return int(own)
    return FIXED_TOKENS if torch.device(model.device).type == "cpu" else FIXED_TOKENS_ACCELERATOR


RUN_OWN = object()  # the scheduler's reply to a request it does not share: run it on the sequence's thread


class ReadRequest(NamedTuple):
    """One sequence's packed host read: its parts and the dtype they pack into (HostReads.dtype)."""

    parts: list[torch.Tensor]
    dtype: torch.dtype


class BatchAborted(BaseException):
    """Raised inside a sequence's thread when the batch stops because of another sequence's error (a
    BaseException, so no `except Exception` in a decode loop swallows it)."""


class Worker:
    """One sequence's decode, run in its own thread under a strict hand-off with the scheduler."""

    def __init__(self, index: int, job: Callable[[Any], Any], model: Any) -> None:
        self.index = index
        self.model = SequenceModel(model, self)
        self.pending: Optional[ForwardRequest] = None
        self.reading: Optional[ReadRequest] = None  # a packed host read waiting for the batch's shared transfer
        self.done = False
        self._job = job
        self._go, self._back = threading.Semaphore(0), threading.Semaphore(0)
        self._reply: Any = None
        self._result: Any = None
        self._error: Optional[BaseException] = None
        self.own: tuple[float, Optional[Exception]] = (0.0, None)  # wall and error of its last RUN_OWN forward
        self._thread = threading.Thread(target=self._main, name=f"s2d2-seq-{index}", daemon=True)
        self._thread.start()

    def _main(self) -> None:
        self._go.acquire()
        try:
            self._result = self._job(self.model)
        except BaseException as e:  # handed to the scheduler, which raises it
            self._error = e
        self.done = True
        self._back.release()

    def resume(self, reply: Any = None) -> None:
        """Scheduler side: give the sequence its logits / read values (or an exception) and run it to its next
        request or end."""
        self._reply = reply
        self.pending = self.reading = None
        self._go.release()
        self._back.acquire()

    def request(self, req: ForwardRequest) -> torch.Tensor:
        """Sequence side: wait for the scheduler to run `req` (or to say RUN_OWN: run it here); its logits."""
        self.pending = req
        self._back.release()
        self._go.acquire()
        reply, self._reply = self._reply, None
        if reply is RUN_OWN:
            return self._own_forward(req)
        if isinstance(reply, BaseException):
            raise reply
        return reply

    def read(self, parts: list[torch.Tensor], dtype: torch.dtype) -> Optional[list[Any]]:
        """Sequence side: wait for the scheduler's shared read of `parts`; their values, or None (RUN_OWN: the
        sequence's HostReads reads them itself, as at batch 1)."""
        self.reading = ReadRequest(parts, dtype)
        self._back.release()
        self._go.acquire()
        reply, self._reply = self._reply, None
        if reply is RUN_OWN:
            return None
        if isinstance(reply, BaseException):
            raise reply
        return reply

    def _own_forward(self, req: ForwardRequest) -> torch.Tensor:
        """A forward of this sequence alone, on its own thread: the very call batch 1 makes. Why here and not on
        the scheduler's thread: each thread that calls torch keeps its own pool of intra-op threads, and on a small
        CPU two pools taking turns every forward slowed a lone Run by a third (issue 25). Its wall and error are
        left in `own` for the scheduler's ledger."""
        model = self.model.shared
        t0, error = time.perf_counter(), None
        try:
            out = model.forward(*req)
            if model.device.type == "cuda":
                torch.cuda.synchronize()  # an asynchronous CUDA error surfaces here, as this forward's
            return out
        except Exception as e:
            error = e
            raise
        finally:
            self.own = (time.perf_counter() - t0, error)
            self.model.forward_walls.append(self.own[0])

    def outcome(self) -> Any:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._result

    def abort(self) -> None:
        """Release a waiting sequence's thread (its forward or read raises BatchAborted) and wait for it to end."""
        while not self.done:  # a loop: after an interrupt mid-hand-off the first resume may only finish that one
            self.resume(BatchAborted())
        self._thread.join()


class SequenceModel:
    """The model as one sequence of a batch sees it: every attribute is the model's, but `forward` waits for the
    scheduler's batched forward. `forward_walls` holds, per call, the wall time of the batch forward that served
    it (what the sequence's forward records get: the time its own wait for logits included other sequences' host
    work)."""

    def __init__(self, model: Any, worker: Worker) -> None:
        self._model = model
        self.shared = model  # the model the scheduler shares (a lone forward calls it directly)
        self._worker = worker
        self.forward_walls: list[float] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)

    def forward(self, cache: Any, input_ids: torch.Tensor, positions: torch.Tensor, attention: Any, keep: int,
                last: Optional[int] = None, rows: Optional[torch.Tensor] = None) -> torch.Tensor:
        return self._worker.request(ForwardRequest(cache, input_ids, positions, attention, keep, last, rows))

    def share_read(self, parts: list[torch.Tensor], dtype: torch.dtype) -> Optional[list[Any]]:
        """The sequence's packed read, served with the batch's other waiting reads in one transfer (transfers.py's
        `share` hook); None: read alone."""
        return self._worker.read(parts, dtype)

    def settle_forwards(self, forwards: list[Any]) -> None:
        """Give the sequence's forward records the walls of the batch forwards that served them."""
        for record, wall in zip(forwards, self.forward_walls):
            record.wall_s = wall


def group_requests(workers: list[Worker], fixed_tokens: int = FIXED_TOKENS) -> list[list[Worker]]:
    """Waiting sequences grouped into shared forwards at the least modelled cost (`cheapest_groups`)."""
    queries = [int(w.pending.input_ids.shape[0]) for w in workers]  # type: ignore[union-attr]
    return [[workers[i] for i in g] for g in cheapest_groups(queries, [w.index for w in workers], fixed_tokens)]


def cheapest_groups(queries: list[int], order: list[int], fixed_tokens: int = FIXED_TOKENS) -> list[list[int]]:
    """Requests (their query counts; `order` breaks ties) grouped into shared forwards, as lists of their indices,
    at the least modelled cost: a forward costs `fixed_tokens` + (members x its longest query) query tokens, so
    drafts and 2L verifies share a forward only when the saved fixed cost pays for the padding, and a prefill never
    pads a batch of drafts to its length.

    The best grouping is contiguous in query order (sorted by query count, then `order`), and some best grouping
    never splits requests of equal query count (moving the lower part of a split run into the upper group costs
    nothing more), so dynamic programming over the distinct counts finds it exactly: O(distinct²), not O(n²), which
    matters at batch 128. Deterministic in the requests alone (ties: the earliest cut)."""
    ranked = [i for _, _, i in sorted(zip(queries, order, range(len(queries))))]  # (no key call per request)
    runs: list[list[int]] = []  # indices of equal query count, ascending
    for i in ranked:
        if runs and queries[runs[-1][0]] == queries[i]:
            runs[-1].append(i)
        else:
            runs.append([i])
    sizes = [0]
    for run in runs:
        sizes.append(sizes[-1] + len(run))
    best, cut = [0] * (len(runs) + 1), [0] * (len(runs) + 1)
    for j in range(1, len(runs) + 1):
        q = queries[runs[j - 1][0]]
        costs = [best[i] + fixed_tokens + (sizes[j] - sizes[i]) * q for i in range(j)]
        best[j] = min(costs)
        cut[j] = costs.index(best[j])
    groups: list[list[int]] = []
    j = len(runs)
    while j > 0:
        groups.insert(0, [i for run in runs[cut[j] : j] for i in run])
        j = cut[j]
    return groups


class Scheduler:
    """Runs jobs (one sequence's decode each: `job(model) -> result`) at most `batch_size` at a time, sharing
    their forwards; results in job order. The ledger records every forward it ran."""

    def __init__(self, model: Any, batch_size: int, fixed_tokens: int = FIXED_TOKENS) -> None:
        if int(batch_size) < 1:
            raise ValueError(f"batch_size: must be >= 1, got {batch_size}")
        self.model = model
        self.fixed_tokens = int(fixed_tokens)
        self.batch_size = int(batch_size)
        self.ledger = BatchLedger(self.batch_size)
        self._batched = callable(getattr(model, "forward_batch", None))

    def run(self, jobs: Iterable[Callable[[Any], T]],
            on_result: Optional[Callable[[int, T], None]] = None) -> list[T]:
        """Every job's result, in job order; `on_result(index, result)` is called (on this thread) as each one
        finishes, so a caller can write it out before the batch ends."""
        queue = deque(enumerate(jobs))
        results: dict[int, T] = {}
        live: list[Worker] = []
        t0 = time.perf_counter()
        try:
            while queue or live:
                for w in [w for w in live if w.done]:  # finished sequences leave ...
                    live.remove(w)
                    results[w.index] = w.outcome()
                    if on_result is not None:
                        on_result(w.index, results[w.index])
                while queue and len(live) < self.batch_size:  # ... and the queue refills (to a first request)
                    index, job = queue.popleft()
                    worker = Worker(index, job, self.model)
                    worker.resume()
                    live.append(worker)
                self._read([w for w in live if w.reading is not None])
                waiting = [w for w in live if w.pending is not None]
                for group in group_requests(waiting, self.fixed_tokens):
                    self._forward(group)
        finally:
            for w in live:
                w.abort()
            self.ledger.wall_s = time.perf_counter() - t0
        return [results[i] for i in sorted(results)]

    def _read(self, readers: list[Worker]) -> None:
        """Serve every waiting read with one packed transfer per dtype (one in practice: all share the model's
        device) and resume each reader with its own values, in batch order. A lone reader reads on its own thread
        (RUN_OWN). If the shared transfer raises, each reader reads alone, so each gets what its batch-1 fetch
        gives (its values or its error); the failed transfer counts among the reads."""
        by_dtype: dict[torch.dtype, list[Worker]] = {}
        for w in readers:
            by_dtype.setdefault(w.reading.dtype, []).append(w)  # type: ignore[union-attr]
        for part in by_dtype.values():
            self.ledger.sequence_reads += len(part)
            self.ledger.reads += 1
            if len(part) == 1:
                part[0].resume(RUN_OWN)
                continue
            try:
                replies: list[Any] = packed_values([w.reading.parts for w in part],  # type: ignore[union-attr]
                                                   part[0].reading.dtype, self.model.device)  # type: ignore
            except Exception:  # e.g. an asynchronous device error: each reader meets its own, as at batch 1
                self.ledger.failed_reads += 1
                self.ledger.reads += len(part)
                replies = [RUN_OWN] * len(part)
            for w, reply in zip(part, replies):
                w.resume(reply)

    def _forward(self, group: list[Worker]) -> None:
        """Run the group's requests (one forward, or one by one without `forward_batch`) and resume each member.

        A shared forward that raises is retried once per member, each alone, so only a sequence whose own request
        fails gets an error (its loop handles it as at batch 1) and the others get the logits of their batch-1
        forward. Any cache the failed forward appended to is cropped back first. What this means for failures that
        are not one sequence's: out of memory at the shared shape gives way to the smaller lone forwards (that step
        runs unshared; the next one tries to share again); a model that fails every forward (broken weights, a CUDA
        context a device-side assert poisoned) fails each member's retry too, so every sequence ends with that
        error, each its own message, and what restarts the model is the operator's call. Accounting: the
        sequence's trace counts its forward once (its NFE is its batch-1 NFE; the record carries the wall of the
        forward that served it); the ledger keeps the failed attempt as a forward the machine ran (`error` set),
        outside the sequence-forwards it served."""
        lengths = {w.index: int(w.pending.cache.get_seq_length()) for w in group}  # type: ignore[union-attr]
        parts = [group] if self._batched else [[w] for w in group]
        for part in parts:
            if len(part) == 1:
                self._run_own(part[0], lengths[part[0].index])
                continue
            replies, wall, error = self._attempt(part)
            if error is None:
                self._serve(part, lengths, replies, wall, error)
                continue
            self._log(part, lengths, wall, error)
            for w in part:
                restore_cache(w.pending.cache, lengths[w.index])  # type: ignore[union-attr]
            for w in part:  # each alone, once: its batch-1 forward
                self._serve([w], lengths, *self._attempt([w]))

    def _run_own(self, w: Worker, length: int) -> None:
        """A request that shares with nobody: the sequence runs the model's own forward on its thread (the very call
        batch 1 makes: no padding, no stacked caches) and goes on to its next request; then the ledger records it."""
        at, queries = len(w.model.forward_walls), int(w.pending.input_ids.shape[0])  # type: ignore[union-attr]
        w.resume(RUN_OWN)
        wall, error = w.own
        self.ledger.add(BatchForward(len(self.ledger.forwards), [w.index], [at], [queries], [length], wall,
                                     error_text(error)))

    def _attempt(self, part: list[Worker]) -> tuple[list[Any], float, Optional[Exception]]:
        """One shared forward of the part's requests: (each member's logits or the error, wall seconds, the
        error). A member retried alone (after a shared forward failed) runs here too, the batch-1 call."""
        reqs = [w.pending for w in part]
        t0 = time.perf_counter()
        try:
            out: list[Any] = (self.model.forward_batch(reqs) if self._batched and len(reqs) > 1
                              else [self.model.forward(*reqs[0])])
            if self.model.device.type == "cuda":
                torch.cuda.synchronize()  # an asynchronous CUDA error surfaces here, as this forward's
            error = None
        except Exception as e:  # each member's loop handles it as at batch 1 (e.g. StopDecoding)
            out, error = [e] * len(part), e
        return out, time.perf_counter() - t0, error

    def _log(self, part: list[Worker], lengths: dict[int, int], wall: float, error: Optional[Exception]) -> None:
        self.ledger.add(BatchForward(
            len(self.ledger.forwards), [w.index for w in part], [len(w.model.forward_walls) for w in part],
            [int(w.pending.input_ids.shape[0]) for w in part], [lengths[w.index] for w in part], wall,  # type: ignore
            error_text(error)))

    def _serve(self, part: list[Worker], lengths: dict[int, int], replies: list[Any], wall: float,
               error: Optional[Exception]) -> None:
        """Record the forward that served the part and hand each member its reply."""
        self._log(part, lengths, wall, error)
        for w, reply in zip(part, replies):
            w.model.forward_walls.append(wall)
            w.resume(reply)


def error_text(error: Optional[Exception]) -> str:
    """How the ledger names a failed forward ("" for one that ran)."""
    return "" if error is None else f"{type(error).__name__}: {str(error)[:200]}"


def restore_cache(cache: Any, length: int) -> None:
    """Crop a cache a failed forward may have appended to back to `length` positions (a no-op when it did not)."""
    if int(cache.get_seq_length()) > length:
        cache.crop(length)
