"""One step of a live batch (live_batch.py): every batch-first row and every thread job advance by one forward,
and the forwards are shared within each key, whichever engine a member runs on.

Why one step for both: a live batch holds decodes the batch-first engine covers (each a `Row` of lockstep.py, all
of them stepped on this one thread) beside decodes it does not cover and plain callables (each a batch.py `Worker`
running its batch-1 loop in its own thread). Two visitors of one key (the same loop and block length) share their
forwards whichever engine each is on, so a config beyond the engine (KV reuse, fused commits, ...) still pads into
the forwards of its key's other visitors, as it did when every decode was a thread job.

A step: settle who left; serve the thread jobs' waiting host reads (batch.py `_read`); build every row's request
(each loop over its rows at once); read each row's stop flag (up: its forward is not run, it ends "cancelled" as
its batch-1 loop does when its model raises StopDecoding); group every waiting request, within its key, at the
least modelled cost (`cheapest_groups`); run each group as one forward (a lone thread job runs its own forward on
its own thread, RUN_OWN, as before); a shared forward that raises is retried once per member alone, so a forward
error reaches only the member whose request fails; then every served row advances (each loop's rows together),
each thread job runs on to its next request.

Invariants: a row's or a job's error goes to its own seat only (a row's forward error, its check raising, its loop
start; a loop's shared work that raises fails the rows of that call, never another loop's or another key's); the
ledger keeps every forward this thread ran, each member named by its ticket's index; one thread calls the model
for the rows and the shared forwards, and a thread job's own forward runs only while this thread waits for it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Hashable, NamedTuple, Optional

from ..models.base import ForwardRequest
from .batch import Scheduler, Worker, cheapest_groups, error_text, restore_cache
from .batch_ledger import BatchForward
from .live_jobs import never
from .lockstep import Lockstep, loop_for
from .lockstep_rows import Asked, Row
from .result import StopDecoding


@dataclass
class Seat:
    """One decode of the batch: its ticket, what it shares forwards with (`group`), and the engine it runs on: a
    batch-first `row` or a thread `worker`; `error` is its own failure, settled when it leaves."""

    ticket: Any  # live_batch.Ticket
    group: Hashable
    row: Optional[Row] = None
    worker: Optional[Worker] = None
    stopped: Callable[[], bool] = never
    error: Optional[BaseException] = None

    @property
    def gone(self) -> bool:
        """Whether the decode has ended (finished, stopped, failed): it leaves at the next settling."""
        if self.error is not None:
            return True
        return self.worker.done if self.worker is not None else self.row.finish_reason is not None  # type: ignore


class Member(NamedTuple):
    """A request waiting for this step's forwards: its seat, the request, and (a row's) what its trace records."""

    seat: Seat
    request: ForwardRequest
    asked: Optional[Asked]


class LiveStep(Scheduler):
    """The step of a live batch over its seats (`self.seats`); live_batch.LiveBatch adds the intake."""

    def __init__(self, model: Any, max_batch: int, fixed_tokens: int) -> None:
        super().__init__(model, max_batch, fixed_tokens)
        self.engine = Lockstep(model, max_batch, True, fixed_tokens)
        self.engine.ledger = self.ledger
        self.seats: list[Seat] = []
        self.steps = 0  # steps taken (each runs every live row's forward: tests count them)

    def leave(self, settle: Callable[[Any, Any, Optional[BaseException]], None],
              finish: Callable[[Row, Any], Any]) -> None:
        """Settle every seat that ended: its result (`finish(row, loop)` for a row), or its own error."""
        for seat in [s for s in self.seats if s.gone]:
            self.seats.remove(seat)
            result, error = None, seat.error
            try:
                if seat.worker is not None:
                    result = seat.worker.outcome() if error is None else None
                elif error is None:
                    result = self.engine.finish(seat.row, finish)  # type: ignore[arg-type]
            except BaseException as exc:  # that decode's own error, for its ticket only
                error = exc
            finally:
                if seat.row is not None:
                    seat.row.cache = seat.row.state = None  # a static slot goes back at once
            settle(seat.ticket, result, error)

    def step(self) -> None:
        """One forward for every live decode (module docstring)."""
        self.steps += 1
        groups: dict[Hashable, int] = {}
        for s in self.seats:
            groups[s.group] = groups.get(s.group, 0) + 1
        for s in self.seats:
            s.ticket.companions = groups[s.group] - 1
        self._read([s.worker for s in self.seats if s.worker is not None and s.worker.reading is not None])
        members, served = self._members()
        self._run(members, served)
        self._advance(served)

    def _members(self) -> tuple[list[Member], dict[int, Any]]:
        """Every request waiting for a forward (rows' built by their loops, thread jobs' pending); `served` holds
        a StopDecoding already for each row whose stop flag is up."""
        rows = [s for s in self.seats if s.row is not None and s.error is None]
        by_loop: dict[Any, list[Seat]] = {}
        for s in rows:
            by_loop.setdefault(loop_for(s.row.prep.cfg, self.model), []).append(s)  # type: ignore[union-attr]
        members: list[Member] = []
        served: dict[int, Any] = {}
        for seats in by_loop.values():
            try:
                asked = self.engine.requests([s.row for s in seats])  # type: ignore[misc]
            except Exception as exc:  # the loop's own work failed: only the rows of this call end
                for s in seats:
                    s.error = exc
                continue
            for s, a in zip(seats, asked):
                try:
                    stop = s.stopped()
                except Exception as exc:  # the visitor's flag itself raised: its decode ends with that error
                    s.error = exc
                    continue
                if stop:
                    served[id(s)] = StopDecoding()
                else:
                    members.append(Member(s, a.request, a))
        members += [Member(s, s.worker.pending, None) for s in self.seats
                    if s.worker is not None and s.worker.pending is not None]
        return members, served

    def _run(self, members: list[Member], served: dict[int, Any]) -> None:
        """Run the members' forwards, grouped within each key at the least modelled cost; rows' replies go to
        `served`, thread jobs are resumed with theirs."""
        keys: dict[Hashable, list[Member]] = {}
        for m in members:
            keys.setdefault(m.seat.group, []).append(m)
        for same in keys.values():
            queries = [int(m.request.input_ids.shape[0]) for m in same]
            order = [m.seat.ticket.index for m in same]
            groups = (cheapest_groups(queries, order, self.fixed_tokens) if self._batched
                      else [[i] for i in range(len(same))])
            for g in groups:
                self._forward_group([same[i] for i in g], served)

    def _forward_group(self, group: list[Member], served: dict[int, Any]) -> None:
        """One shared forward of the group (a lone thread job: its own forward on its own thread); on an error
        each member once alone, its batch-1 forward."""
        lengths = [int(m.request.cache.get_seq_length()) for m in group]
        if len(group) == 1 and group[0].seat.worker is not None:
            self._run_own(group[0].seat.worker, lengths[0])
            return
        replies, wall, error = self.engine.attempt([m.request for m in group])
        self._log(group, lengths, wall, error)
        if error is None or len(group) == 1:
            self._hand(group, lengths, replies, wall, served)
            return
        for m, n in zip(group, lengths):
            restore_cache(m.request.cache, n)
        for m, n in zip(group, lengths):  # each alone, once: its batch-1 forward
            if m.seat.worker is not None:
                self._run_own(m.seat.worker, n)
                continue
            replies, wall, error = self.engine.attempt([m.request])
            self._log([m], [n], wall, error)
            self._hand([m], [n], replies, wall, served)

    def _log(self, group: list[Member], lengths: list[int], wall: float, error: Optional[Exception]) -> None:
        done = [len(m.seat.row.rec.forwards) if m.seat.row is not None else len(m.seat.worker.model.forward_walls)
                for m in group]
        self.ledger.add(BatchForward(len(self.ledger.forwards), [m.seat.ticket.index for m in group], done,
                                     [int(m.request.input_ids.shape[0]) for m in group], lengths, wall, error_text(error)))

    def _hand(self, group: list[Member], lengths: list[int], replies: list[Any], wall: float,
              served: dict[int, Any]) -> None:
        """Each member's reply: a row's is kept for its advance (logits counted in its own trace), a thread job is
        resumed with its own (it runs on to its next request)."""
        for (seat, request, asked), n, reply in zip(group, lengths, replies):
            if seat.worker is not None:
                seat.worker.model.forward_walls.append(wall)
                seat.worker.resume(reply)
                continue
            served[id(seat)] = reply
            if not isinstance(reply, BaseException):
                a: Asked = asked
                seat.row.rec.record(a.kind, a.block, a.step, n, int(request.input_ids.shape[0]), wall)

    def _advance(self, served: dict[int, Any]) -> None:
        """Every served row advances, each loop's rows together (a stopped one is cancelled by its loop); a row
        whose forward raised anything else ends with that error."""
        by_loop: dict[Any, list[Seat]] = {}
        for s in self.seats:
            if s.row is None or s.error is not None or id(s) not in served:
                continue
            reply = served[id(s)]
            if isinstance(reply, BaseException) and not isinstance(reply, StopDecoding):
                s.error = reply
                continue
            by_loop.setdefault(loop_for(s.row.prep.cfg, self.model), []).append(s)
        for seats in by_loop.values():
            try:
                self.engine.advance([s.row for s in seats], [served[id(s)] for s in seats])  # type: ignore[misc]
            except Exception as exc:  # the loop's shared work failed: only the rows of this call end
                for s in seats:
                    s.error = exc
