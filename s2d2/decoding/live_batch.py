"""Continuous batching for a server: a `LiveBatch` admits decodes while it runs, shares their forwards, and lets
each one leave on its own.

`generate_batch` decodes a list of jobs known before it starts and stops the whole batch at the first error: right
for a library call, wrong for a server, where visitors arrive one by one, each may stop, and one visitor's failing
decode must not end the others'. `LiveBatch` is a long-lived thread that steps the batch-first engine
(lockstep.py) over decodes that arrive at any time:

* `submit(job, key)` from any thread queues a decode. A `Decode` (live_jobs.py: a prepared prompt, seed, progress
  check and stop flag) whose config the batch-first engine covers (`lockstep.covers`) becomes one row of the
  step: every such row advances by one forward per step, all on this thread, its rules run over all rows at once.
  A `Decode` the engine does not cover (lockstep.py `refusal`: only the editing loop on a right-shifted model, which
  that loop refuses) and a plain callable
  (`job(loop_model) -> result`, as `Scheduler.run` takes them) run as thread jobs: the batch-1 loop in a thread of
  its own under batch.py's strict hand-off. Both kinds share forwards within a key (live_step.py). A decode joins
  at the next step (never waiting for a block boundary of the others) and leaves when it ends: finished, stopped
  by its own flag (read before each of its forwards: it ends "cancelled" at its last complete block, as its batch-1
  loop does when its model raises StopDecoding), at its time limit, or raising. A raised error goes to that
  submission's `Ticket` only; the batch goes on.
* At most `max_batch` sequences decode at once; the rest wait in arrival order (`Ticket.position`).
* `withdraw(ticket)`: a submission still waiting leaves the queue at once (its ticket fails with `Withdrawn`, the
  places behind it move up); one already decoding is not touched (it stops through its own flag, at its next
  forward).
* `key`: only requests with equal keys share a forward (a key names what may share; None never shares).
  `Ticket.companions` counts the others of its key decoding with it, updated every step.
* Host reads: a row's reads are its step's shared reads (lockstep_rows.py `read_rows`); a thread job's waiting
  reads are served by one shared transfer per step, before the forwards (batch.py `_read`).
* `wait_s`: when the batch is idle, the first arrival waits up to this long for companions (0: never; a lone
  visitor is not slowed). A batch already decoding admits newcomers at once.
* `batch_first=False` runs every submission as a thread job (the engine before the batch-first step: a benchmark's
  "before").

Invariants: one thread calls the model for the rows and the shared forwards (this one), so forwards never overlap;
each decode's trace is its batch-1 trace apart from wall times and the shared forwards' round-off (exact in
float64); `Ticket.done` is set exactly once per submission, after its result or error is stored; a closed LiveBatch
ends every live decode (BatchClosed; a thread job's thread is released with BatchAborted) and fails every queued
ticket.
"""
from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field
from contextlib import ExitStack
from typing import Any, Callable, Hashable, Optional, Union

import torch

from ..api import finish_result
from .batch import Worker, fixed_tokens_for
from .batch_ledger import BatchLedger
from .heap_freeze import frozen_heap
from .live_jobs import Decode, thread_job
from .live_step import LiveStep, Seat
from .lockstep import Job, covers
from .lockstep_rows import Row

MAX_LEDGER = 10_000  # forward records kept before the ledger starts afresh (a server runs for days)


class BatchClosed(RuntimeError):
    """The LiveBatch was closed before (or while) this submission decoded."""


class Withdrawn(RuntimeError):
    """The submission was withdrawn while it waited for a place: it never started, nothing of it ran."""


@dataclass
class Ticket:
    """One submitted decode: its place in the queue, who it decodes with, then its result or error."""

    index: int
    key: Optional[Hashable]
    done: threading.Event = field(default_factory=threading.Event)
    result: Any = None
    error: Optional[BaseException] = None
    position: int = 0  # 1-based place among the waiting submissions; 0 once it decodes
    companions: int = 0  # other sequences of its key decoding with it (updated every step)
    started: bool = False

    def outcome(self, timeout: Optional[float] = None) -> Any:
        """The job's result (raising its error), waiting up to `timeout` seconds (None: until it is done)."""
        if not self.done.wait(timeout):
            raise TimeoutError("the decode has not finished")
        if self.error is not None:
            raise self.error
        return self.result


class LiveBatch(LiveStep):
    """A long-lived thread over one model: `submit` decodes (a `Decode`, or a callable `job(loop_model) -> result`)
    at any time; see the module docstring."""

    def __init__(self, model: Any, max_batch: int, wait_s: float = 0.0, fixed_tokens: Optional[int] = None,
                 name: str = "s2d2-live-batch", batch_first: bool = True) -> None:
        """`fixed_tokens`: a forward's fixed cost in query tokens (how requests are grouped into forwards); by
        default the model's own (batch.py `fixed_tokens_for`)."""
        super().__init__(model, max_batch, fixed_tokens_for(model) if fixed_tokens is None else int(fixed_tokens))
        if not 0.0 <= float(wait_s) <= 60.0:
            raise ValueError(f"wait_s: must be in [0, 60] seconds, got {wait_s!r}")
        self.wait_s = float(wait_s)
        self.batch_first = bool(batch_first)
        self._cond = threading.Condition()
        self._queue: deque[tuple[Ticket, Any]] = deque()
        self._count = 0
        self._closed = False
        self.served = 0  # submissions finished (result or error)
        self.gathering = threading.Event()  # set while an idle batch holds its first arrivals for companions
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._thread.start()

    def submit(self, job: Union[Decode, Callable[[Any], Any]], key: Optional[Hashable] = "") -> Ticket:
        """Queue `job`; its Ticket (thread-safe; raises BatchClosed after `close`)."""
        with self._cond:
            if self._closed:
                raise BatchClosed("the shared decode worker has stopped")
            ticket = Ticket(self._count, key, position=len(self._queue) + 1)
            self._count += 1
            self._queue.append((ticket, job))
            self._cond.notify_all()
        return ticket

    def withdraw(self, ticket: Ticket) -> bool:
        """Take a waiting submission out of the queue (its ticket is done, failing with Withdrawn); False when it
        has already started (or finished): then only its own stop flag ends it."""
        with self._cond:
            at = next((i for i, (t, _) in enumerate(self._queue) if t is ticket), None)
            if at is None:
                return False
            del self._queue[at]
            for i, (t, _) in enumerate(self._queue):
                t.position = i + 1
            self._cond.notify_all()  # a batch gathering companions counts the queue again
        ticket.position = 0
        self._settle(ticket, None, Withdrawn("stopped before it started: nothing ran"))
        return True

    def live(self) -> int:
        """Sequences decoding now."""
        return len(self.seats)

    def waiting(self) -> int:
        """Submissions waiting for a place."""
        return len(self._queue)

    def close(self, timeout: float = 30.0) -> None:
        """Stop admitting, end the live decodes (BatchClosed) and fail queued tickets."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join(timeout)

    def _main(self) -> None:
        # one thread steps every row: no autograd bookkeeping on it (as in the batch-1 loops), and while the batch
        # is busy the collector's passes skip the heap that was there before (heap_freeze.py)
        with torch.inference_mode(), ExitStack() as busy:
            frozen = False
            while self._admit():
                if not frozen:
                    busy.enter_context(frozen_heap())
                    frozen = True
                self._step_safely()
                if not self.seats:  # idle: the freeze is lifted until the next busy period
                    busy.close()
                    frozen = False
            self._end_all()

    def _step_safely(self) -> None:
        """One step, then settle who left; a bug of the step itself fails the live tickets and the batch serves
        on."""
        try:
            self.leave(self._settle, self._finish)
            self.step()
            self.leave(self._settle, self._finish)
        except Exception as exc:
            for seat in self.seats:
                if seat.worker is not None:
                    seat.worker.abort()
                seat.error = seat.error or exc
            self.leave(self._settle, self._finish)
        if len(self.ledger.forwards) > MAX_LEDGER:
            self._fresh_ledger()

    def _end_all(self) -> None:
        """Closed: every live decode ends with BatchClosed (a thread job's thread released), every queued ticket
        fails."""
        for seat in self.seats:
            if seat.worker is not None:
                seat.worker.abort()
            seat.error = BatchClosed("the shared decode worker has stopped")
        self.leave(self._settle, self._finish)
        with self._cond:
            queued, self._queue = list(self._queue), deque()
        for t, _ in queued:
            self._settle(t, None, BatchClosed("the shared decode worker has stopped"))

    def _fresh_ledger(self) -> None:
        self.ledger = self.engine.ledger = BatchLedger(self.batch_size)

    def _admit(self) -> bool:
        """Wait for work (and, when idle, up to wait_s for companions); move queued jobs into the batch. False once
        closed."""
        with self._cond:
            while not self._closed and not self._queue and not self.seats:
                self._fresh_ledger()  # idle: the next busy period has a ledger of its own
                self._cond.wait()
            if self._closed:
                return False
            if not self.seats and self.wait_s > 0:
                until = time.monotonic() + self.wait_s
                self.gathering.set()
                while not self._closed and len(self._queue) < self.batch_size and time.monotonic() < until:
                    self._cond.wait(max(0.0, until - time.monotonic()))
                self.gathering.clear()
            fresh = []
            while self._queue and len(self.seats) + len(fresh) < self.batch_size:
                fresh.append(self._queue.popleft())
            for i, (t, _) in enumerate(self._queue):
                t.position = i + 1
        admitted = [self._seat(ticket, job) for ticket, job in fresh]
        for seat in admitted:  # all in the batch before the first of them runs
            seat.ticket.position, seat.ticket.started = 0, True
            self.seats.append(seat)
        for seat in admitted:
            if seat.worker is not None:
                seat.worker.resume()  # runs the thread job to its first forward request (or its end)
        return True

    def _seat(self, ticket: Ticket, job: Any) -> Seat:
        """The seat of an admitted job: a batch-first row for a covered Decode, else a thread job. A row whose
        start fails holds its error (settled at once)."""
        group = ticket.key if ticket.key is not None else ("alone", ticket.index)
        if not isinstance(job, Decode):
            return Seat(ticket, group, worker=Worker(ticket.index, job, self.model))
        if not (self.batch_first and covers(job.prep.cfg, self.model)):
            return Seat(ticket, group, worker=Worker(ticket.index, thread_job(self.model, job), self.model))
        seat = Seat(ticket, group, stopped=job.stopped)
        try:
            seat.row = self.engine.start(ticket.index, Job(job.prep, job.seed, _guarded(seat, job.check),
                                                           job.detailed))
        except Exception as exc:  # its own start failed (e.g. its check's factory): its ticket only
            seat.error = exc
        return seat

    def _finish(self, row: Row, loop: Any) -> Any:
        """A finished row's GenerateResult, as `generate` builds it (each forward record has its shared wall)."""
        return finish_result(self.model, row.prep, row.seed, row.rec, loop, time.perf_counter() - row.t0)

    def _settle(self, ticket: Ticket, result: Any, error: Optional[BaseException]) -> None:
        ticket.result, ticket.error = result, error
        with self._cond:  # withdraw settles from the visitor's thread
            self.served += 1
        ticket.done.set()


ERROR = "error"  # the finish reason a row gets when its own check raised (its ticket gets the error instead)


def _guarded(seat: Seat, factory: Callable[[], Callable[[list[Any]], Optional[str]]]) -> Callable[[], Any]:
    """The row's check factory, its check made safe for the step: a check that raises (a visitor's progress hook)
    ends that row with its error kept on the seat, never another row's step (batch 1 raises it out of the loop)."""
    def make() -> Callable[[list[Any]], Optional[str]]:
        check = factory()

        def checked(steps: list[Any]) -> Optional[str]:
            try:
                return check(steps)
            except Exception as exc:
                seat.error = exc
                return ERROR

        return checked

    return make
