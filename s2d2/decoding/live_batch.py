"""Continuous batching for a server: a `LiveBatch` admits decodes while it runs, shares their forwards, and lets
each one leave on its own.

`Scheduler.run` (batch.py) decodes a list of jobs known before it starts and stops the whole batch at the first
error: right for `generate_batch`, wrong for a server, where visitors arrive one by one, each may stop, and one
visitor's failing decode must not end the others'. `LiveBatch` is the same engine (the same `Worker` threads under
the strict hand-off, the same `group_requests` and the same padded forwards, so a sequence's answer is still its
batch-1 answer up to the forwards' round-off) run as a long-lived thread:

* `submit(job, key)` from any thread queues a decode; it joins the batch at the scheduler's next step (between two
  forwards or reads: as soon as the engine allows, never waiting for a block boundary of the others), and leaves
  when its job returns (finished, stopped by its own flag, at its time limit) or raises. A raised error goes to that
  submission's `Ticket` only; the batch goes on.
* At most `max_batch` sequences decode at once; the rest wait in arrival order (`Ticket.position`).
* `withdraw(ticket)`: a submission still waiting leaves the queue at once (its ticket fails with `Withdrawn`, the
  places behind it move up); one already decoding is not touched (it stops through its own flag, at its next
  forward).
* `key`: only waiting requests with equal keys share a forward (a key names what may share; None never shares).
  Every key's groups are still run by this one thread, so the model sees one forward at a time.
* Host reads (the packed path, batch.py): every live sequence's waiting read, whatever its key, is served by one
  shared transfer per step, before the forwards; a sequence whose read waits blocks nobody.
* `wait_s`: when the batch is idle, the first arrival waits up to this long for companions (0: never; a lone
  visitor is not slowed). A batch already decoding admits newcomers at once.

Invariants: one thread calls the model (this one), so forwards never overlap; `Ticket.done` is set exactly once per
submission, after its result or error is stored; a closed LiveBatch releases every live sequence's thread
(BatchAborted) and fails every queued ticket.
"""
from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Optional

from .batch import FIXED_TOKENS, Scheduler, Worker, group_requests
from .batch_ledger import BatchLedger

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


class LiveBatch(Scheduler):
    """A long-lived scheduler thread over one model: `submit` jobs (`job(loop_model) -> result`, as
    `Scheduler.run` takes them) at any time; see the module docstring."""

    def __init__(self, model: Any, max_batch: int, wait_s: float = 0.0, fixed_tokens: int = FIXED_TOKENS,
                 name: str = "s2d2-live-batch") -> None:
        super().__init__(model, max_batch, fixed_tokens)
        if not 0.0 <= float(wait_s) <= 60.0:
            raise ValueError(f"wait_s: must be in [0, 60] seconds, got {wait_s!r}")
        self.wait_s = float(wait_s)
        self._cond = threading.Condition()
        self._queue: deque[tuple[Ticket, Callable[[Any], Any]]] = deque()
        self._live: list[tuple[Worker, Ticket]] = []
        self._count = 0
        self._closed = False
        self.served = 0  # submissions finished (result or error)
        self.gathering = threading.Event()  # set while an idle batch holds its first arrivals for companions
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._thread.start()

    def submit(self, job: Callable[[Any], Any], key: Optional[Hashable] = "") -> Ticket:
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
        return len(self._live)

    def waiting(self) -> int:
        """Submissions waiting for a place."""
        return len(self._queue)

    def close(self, timeout: float = 30.0) -> None:
        """Stop admitting, release the live sequences (their jobs end with BatchAborted) and fail queued tickets."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join(timeout)

    def _main(self) -> None:
        while True:
            if not self._admit():
                break
            try:
                self._step()
            except Exception as exc:  # a bug of the step itself: fail the live tickets, keep serving
                for w, t in self._live:
                    w.abort()
                    self._settle(t, None, exc)
                self._live = []
        for w, t in self._live:
            w.abort()
            self._settle(t, None, BatchClosed("the shared decode worker has stopped"))
        with self._cond:
            queued, self._queue = list(self._queue), deque()
        for t, _ in queued:
            self._settle(t, None, BatchClosed("the shared decode worker has stopped"))

    def _admit(self) -> bool:
        """Wait for work (and, when idle, up to wait_s for companions); move queued jobs into the batch. False once
        closed."""
        with self._cond:
            while not self._closed and not self._queue and not self._live:
                self.ledger = BatchLedger(self.batch_size)  # idle: the next busy period has a ledger of its own
                self._cond.wait()
            if self._closed:
                return False
            if not self._live and self.wait_s > 0:
                until = time.monotonic() + self.wait_s
                self.gathering.set()
                while not self._closed and len(self._queue) < self.batch_size and time.monotonic() < until:
                    self._cond.wait(max(0.0, until - time.monotonic()))
                self.gathering.clear()
            fresh = []
            while self._queue and len(self._live) + len(fresh) < self.batch_size:
                fresh.append(self._queue.popleft())
            for i, (t, _) in enumerate(self._queue):
                t.position = i + 1
        admitted = [(Worker(ticket.index, job, self.model), ticket) for ticket, job in fresh]
        for worker, ticket in admitted:  # all in the batch before the first of them runs
            ticket.position, ticket.started = 0, True
            self._live.append((worker, ticket))
        for worker, _ in admitted:
            worker.resume()  # runs the sequence to its first forward request (or its end)
        return True

    def _step(self) -> None:
        """Settle finished sequences, then serve every waiting host read (one shared transfer for all keys: a read
        shares nothing but the transfer), then run every waiting forward, grouped within its key."""
        for w, t in [(w, t) for w, t in self._live if w.done]:
            self._live.remove((w, t))
            try:
                self._settle(t, w.outcome(), None)
            except BaseException as exc:  # that sequence's own error, for its ticket only
                self._settle(t, None, exc)
        keys: dict[Any, list[Worker]] = {}
        for w, t in self._live:
            keys.setdefault(t.key if t.key is not None else ("alone", t.index), []).append(w)
        for w, t in self._live:
            t.companions = len(keys[t.key if t.key is not None else ("alone", t.index)]) - 1
        self._read([w for w, _ in self._live if w.reading is not None])
        for members in keys.values():
            waiting = [w for w in members if w.pending is not None]
            for group in group_requests(waiting, self.fixed_tokens):
                self._forward(group)
        if len(self.ledger.forwards) > MAX_LEDGER:
            self.ledger = BatchLedger(self.batch_size)

    def _settle(self, ticket: Ticket, result: Any, error: Optional[BaseException]) -> None:
        ticket.result, ticket.error = result, error
        with self._cond:  # withdraw settles from the visitor's thread
            self.served += 1
        ticket.done.set()
