"""The batch-first engine: every live sequence advances by one step at a time, together, on one thread.

Why: the thread engine (batch.py) runs each sequence's batch-1 loop on its own thread and shares only the forwards,
so a batch step costs the sum of every sequence's Python plus two thread hand-offs per forward and per read: the
host's work per step grows with the batch, and on a GPU it, not the forwards, sets the pace (issue 37). Here a step
is one pass over the live rows (lockstep_rows.Row): build every row's request, run them as padded forwards, then
one distribution, one draw, one read and the records for all of them (the loop's module: lockstep_ar.py,
lockstep_block.py, lockstep_editing.py or lockstep_pipeline.py, each with `start`, `requests`, `advance`, `cancel`
and `result`).

What it covers (`covers`): honest AR (lockstep_ar.py) and the block loop on both families (lockstep_block.py: the
diffusion baselines with static, dynamic and sequential remasking, any sampling, either cache mode, KV reuse and fused
commits; S2D2 with every routing policy, with or without sub-blocks, the trimmed verifier, adaptive blocks, KV reuse and
fused commits, its verifier in lockstep_verify.py; a right-shifted model's AR seeds, stop rule and causal verifier in
lockstep_shifted.py) and the LLaDA2 editing loop on position-aligned models (lockstep_editing.py: the diffusion
decoders and S2D2, edits and post-steps included). Each live row makes one forward per step whatever its phase (AR
token, prefill, draft, 2L or causal verify, commit), and all of them go to the shared forwards together, grouped
at the least modelled cost (batch.py `cheapest_groups` at the model's `fixed_tokens_for`): on an accelerator,
where a forward is bound by reading the weights, one forward carries every live row; on the CPU, where each query
token is real work, drafts and 2L verifies share a forward only when the saved fixed cost pays for the padding.
The step's rules run over all its rows at once where a rule is tensor work (the routing summary, route_summary.py;
the acceptance test, acceptance.py `acceptance_rows`, once per span length; the 2L verify rows' ids,
verify_branch.py `verify_2l_rows`); what stays per row is host bookkeeping (plans, records, a policy's decision and
update, which keep per-row Python state) and each row's own random draws. The LLaDA2 editing loop
(lockstep_editing.py) shares its steps' forwards, draft distributions, routing summaries, remasking rule and writes,
and runs the rest of each step per row. The D2F pipeline (lockstep_pipeline.py, both families) is a row in one of
two phases per step, its step's forward over every block in flight or its verifier; its rows of one config share
the drafts' and the verifiers' distributions, and every row's read is one shared read. The engine covers every
config `generate` decodes; what it does not (`refusal`: the editing loop on a right-shifted model, which that loop
refuses anyway) would run on the thread engine, which `generate_batch` picks for any batch holding such a config.

Same invariants as the thread engine: in float64 each sequence's trace is its `generate` trace apart from wall
times (a row's rules are its batch-1 loop's own functions, applied row-wise); a sequence's NFE counts the forwards
it took part in (one `Recorder.record` per request it made, each carrying the wall of the forward that served it);
the ledger keeps the machine's own forwards, a failed shared forward included (its members then run alone, the
batch-1 call, so a forward error reaches only the sequence whose request fails); a sequence whose own forward
raises `StopDecoding` ends "cancelled" where its batch-1 loop would (its last complete token or block); any
other error stops the batch and is raised.
A finished sequence leaves at once and the next prompt takes its place (its prefill joins the next step).
The same engine serves the Space's shared batch (live_batch.py, live_step.py), whose decodes arrive and leave at
any time: it calls the step's parts itself (`start` a row, `requests`, its own forwards through `attempt`, `advance`,
`finish`), so a row's stop, error or time limit ends that row alone there.
"""
from __future__ import annotations

import time
from collections import deque
from typing import Any, Callable, Iterable, NamedTuple, Optional

import torch

from ..config import DecodeConfig
from ..models.base import ForwardRequest
from ..trace import StepRecord
from . import lockstep_ar, lockstep_block, lockstep_editing, lockstep_pipeline
from .batch import cheapest_groups, error_text, fixed_tokens_for, restore_cache
from .batch_ledger import BatchForward, BatchLedger
from .draws import make_generator
from .forwards import Recorder, takes_rows
from .heap_freeze import frozen_heap, refreeze
from .lockstep_rows import Asked, Row
from .result import LoopResult, StopDecoding


class Job(NamedTuple):
    """One prompt of the batch: its prepared prompt, seed, and a factory of its progress check (called when the
    sequence starts, so its time limit counts from then)."""

    prep: Any  # api.Prepared
    seed: int
    check: Callable[[], Callable[[list[StepRecord]], Optional[str]]]
    detailed: Optional[bool] = None  # its trace's detail; None: the engine's (a live batch's jobs each say theirs)


def covers(cfg: DecodeConfig, model: Any) -> bool:
    """Whether the batch-first engine decodes this config on this model (else the thread engine does)."""
    return (lockstep_ar.covers(cfg) or lockstep_editing.covers(cfg, model) or lockstep_pipeline.covers(cfg)
            or lockstep_block.covers(cfg, model))


def refusal(cfg: DecodeConfig, model: Any) -> Optional[str]:
    """What the batch-first engine does not decode about `cfg` on `model`, in words (None: it decodes it)."""
    if covers(cfg, model):
        return None
    if cfg.loop == "editing":
        return "the LLaDA2 editing loop on a right-shifted model"
    return f"the {cfg.loop} loop with method {cfg.method!r}"  # (no config `validate` accepts gets here)


def loop_for(cfg: DecodeConfig, model: Any) -> Any:
    """The module of the loop a config runs (its `start`, `requests`, `advance`, `cancel`, `result`)."""
    if lockstep_ar.covers(cfg):
        return lockstep_ar
    if lockstep_pipeline.covers(cfg):
        return lockstep_pipeline
    return lockstep_editing if lockstep_editing.covers(cfg, model) else lockstep_block


class Lockstep:
    """Decodes jobs at most `batch_size` at a time, one step for all live rows at once; results in job order."""

    def __init__(self, model: Any, batch_size: int, detailed: bool, fixed_tokens: Optional[int] = None) -> None:
        """`fixed_tokens`: a forward's fixed cost in query tokens, which decides how the step's rows are grouped
        into forwards (batch.py `cheapest_groups`); by default the model's own (batch.py `fixed_tokens_for`), so
        on an accelerator one forward carries every live row whatever its phase."""
        if int(batch_size) < 1:
            raise ValueError(f"batch_size: must be >= 1, got {batch_size}")
        self.model, self.batch_size, self.detailed = model, int(batch_size), detailed
        self.fixed_tokens = fixed_tokens_for(model) if fixed_tokens is None else int(fixed_tokens)
        self.ledger = BatchLedger(self.batch_size)
        self._batched = callable(getattr(model, "forward_batch", None))
        self._rows_arg = takes_rows(model)

    def run(self, jobs: Iterable[Job], finish: Callable[[Row, LoopResult], Any],
            on_result: Optional[Callable[[int, Any], None]] = None) -> list[Any]:
        """Every job's result (`finish(row, loop)` builds it), in job order; `on_result(index, result)` as each
        one finishes."""
        queue = deque(enumerate(jobs))
        results: dict[int, Any] = {}
        live: list[Row] = []
        t0 = time.perf_counter()
        try:
            # no autograd bookkeeping on any op, as in the batch-1 loops; the collector's passes skip the heap
            # that was there before the decode (heap_freeze.py: they would walk it at every step)
            with torch.inference_mode(), frozen_heap():
                self._drive(queue, live, results, finish, on_result)
        finally:
            self.ledger.wall_s = time.perf_counter() - t0
        return [results[i] for i in sorted(results)]

    def _drive(self, queue: deque, live: list[Row], results: dict[int, Any], finish: Callable[[Row, LoopResult], Any],
              on_result: Optional[Callable[[int, Any], None]]) -> None:
        """Steps until the queue and the batch are empty: admit, step, settle the rows that finished. After each
        step its survivors join the frozen heap (heap_freeze.py `refreeze`), so the collector never walks the
        batch's growing records again."""
        while queue or live:
            while queue and len(live) < self.batch_size:
                live.append(self.start(*queue.popleft()))
            self._step(live)
            refreeze()
            ended = [r for r in live if r.finish_reason is not None]
            live[:] = [r for r in live if r.finish_reason is None]
            for r in ended:
                results[r.index] = self.finish(r, finish)
                if on_result is not None:
                    on_result(r.index, results[r.index])

    def start(self, index: int, job: Job) -> Row:
        """A new live row for `job` (`index`: its place in the batch, the ledger's name for it), its loop set up;
        its progress check (and time limit) starts now. Its first forward joins the next step."""
        cfg = job.prep.cfg
        rec = Recorder(self.model, self.detailed if job.detailed is None else job.detailed, job.prep.table)
        generator = make_generator(cfg.rng, job.seed, self.model.device)
        row = Row(index, job.prep, job.seed, rec, generator, self.model.new_cache(), job.check(),
                  at=len(job.prep.ids), ledger=self.ledger, loop=loop_for(cfg, self.model))
        row.loop.start(self.model, row)
        return row

    def finish(self, row: Row, finish: Callable[[Row, LoopResult], Any]) -> Any:
        """A finished row's result (`finish(row, loop)` builds it from its LoopResult); its cache and state are let
        go (a static slot goes back as soon as its sequence ends)."""
        try:
            return finish(row, row.loop.result(self.model, row))
        finally:
            row.cache = row.state = None

    def _step(self, live: list[Row]) -> None:
        """One step of every live row: each row's one forward (all of them shared, whatever each row's phase),
        then each loop's shared tensor work and records over its rows."""
        self.advance(live, self._forwards(live, self.requests(live)))

    def requests(self, live: list[Row]) -> list[Asked]:
        """Each live row's one forward of this step (in `live`'s order), built by its loop over all its rows."""
        asked: list[Any] = [None] * len(live)
        for loop, members in self._loops(live).items():
            for j, a in zip(members, loop.requests(self.model, [live[j] for j in members])):
                asked[j] = a
        return asked

    def advance(self, live: list[Row], served: list[Any]) -> None:
        """After the step's forwards (`served`: each row's logits, or its forward's error): a row whose forward
        raised StopDecoding ends "cancelled" (its loop's rollback), any other error is raised; every other row
        advances, each loop's rows together."""
        for j, out in enumerate(served):
            if isinstance(out, StopDecoding):
                live[j].loop.cancel(live[j])
            elif isinstance(out, BaseException):
                raise out
        for loop, members in self._loops(live).items():
            going = [j for j in members if not isinstance(served[j], BaseException)]
            if going:
                loop.advance(self.model, [live[j] for j in going], [served[j] for j in going])

    def _loops(self, live: list[Row]) -> dict[Any, list[int]]:
        """The live rows (their indices) by the loop that steps them (each row's, named at its start)."""
        loops: dict[Any, list[int]] = {}
        for j, r in enumerate(live):
            loops.setdefault(r.loop, []).append(j)
        return loops

    def _forwards(self, live: list[Row], asked: list[Asked]) -> list[Any]:
        """Each row's logits (or its forward's error), running the requests in the least-cost groups."""
        queries = [int(a.request.input_ids.shape[0]) for a in asked]
        out: list[Any] = [None] * len(asked)
        groups = (cheapest_groups(queries, [r.index for r in live], self.fixed_tokens) if self._batched
                  else [[j] for j in range(len(asked))])  # no forward_batch: each request its own forward
        for group in groups:
            lengths = [int(asked[j].request.cache.get_seq_length()) for j in group]
            replies, wall, error = self.attempt([asked[j].request for j in group])
            self._log(live, group, queries, lengths, wall, error)
            if error is None or len(group) == 1:
                self._serve(live, asked, group, lengths, replies, wall, out)
                continue
            for j, n in zip(group, lengths):
                restore_cache(asked[j].request.cache, n)
            for j, n in zip(group, lengths):  # each alone, once: its batch-1 forward
                replies, wall, error = self.attempt([asked[j].request])
                self._log(live, [j], queries, [n], wall, error)
                self._serve(live, asked, [j], [n], replies, wall, out)
        return out

    def attempt(self, reqs: list[ForwardRequest]) -> tuple[list[Any], float, Optional[Exception]]:
        """One forward of the requests (a lone one is the very call batch 1 makes): each one's logits or the
        error, the wall, the error."""
        t0 = time.perf_counter()
        try:
            if len(reqs) > 1 and self._batched:
                got: list[Any] = self.model.forward_batch(reqs)
            else:
                got = [self._lone(req) for req in reqs]
            if self.model.device.type == "cuda":
                torch.cuda.synchronize()  # an asynchronous CUDA error surfaces here, as this forward's
            error = None
        except Exception as e:
            got, error = [e] * len(reqs), e
        return got, time.perf_counter() - t0, error

    def _lone(self, req: ForwardRequest) -> torch.Tensor:
        """Recorder.forward's call of the model: with `rows` where the model takes it, else picked here."""
        if self._rows_arg:
            return self.model.forward(*req)
        logits = self.model.forward(*req[:6])
        return logits if req.rows is None else logits.index_select(0, req.rows)

    def _log(self, live: list[Row], group: list[int], queries: list[int], lengths: list[int], wall: float,
             error: Optional[Exception]) -> None:
        self.ledger.add(BatchForward(len(self.ledger.forwards), [live[j].index for j in group],
                                     [len(live[j].rec.forwards) for j in group], [queries[j] for j in group],
                                     lengths, wall, error_text(error)))

    def _serve(self, live: list[Row], asked: list[Asked], group: list[int],
               lengths: list[int], replies: list[Any], wall: float, out: list[Any]) -> None:
        """Hand each member its reply; a member served logits counts the forward in its own trace."""
        for j, n, reply in zip(group, lengths, replies):
            out[j] = reply
            if not isinstance(reply, BaseException):
                a = asked[j]
                live[j].rec.record(a.kind, a.block, a.step, n, int(a.request.input_ids.shape[0]), wall)
