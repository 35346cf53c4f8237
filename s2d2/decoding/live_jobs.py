"""What a live batch (live_batch.py) decodes: a `Decode`, one visitor's prepared prompt with its seed, progress
check and stop flag, which the batch runs on the batch-first step (lockstep.py) when the engine covers its config,
and as a thread job (`thread_job`: the batch-1 loop in its own thread, batch.py's Worker) when it does not.

Why a record and not a callable: a callable can only run its own loop in its own thread; the batch-first step needs
the decode's parts (prompt, seed, check) to hold it as one row of its step. The rules that stay the visitor's own
are the batch-1 ones either way: its Stop is checked before each of its forwards (a raised StopDecoding ends it
"cancelled" at its last complete block, `StopOnFlag` on the thread path, the live step itself on the batch-first
one); its progress check streams its steps and applies its time limit; an error of its check is its own.
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple, Optional

from ..api import run_prepared
from ..trace import StepRecord
from .result import StopDecoding


def never() -> bool:
    """The stop flag of a decode nobody stops."""
    return False


class Decode(NamedTuple):
    """One submitted decode: `check` is a factory of its progress check (called when the decode starts, so its
    time limit counts from then); `stopped` its stop flag, read before each of its forwards."""

    prep: Any  # api.Prepared
    seed: int
    check: Callable[[], Callable[[list[StepRecord]], Optional[str]]]
    stopped: Callable[[], bool] = never
    detailed: bool = True


class StopOnFlag:
    """The model as a stoppable decode sees it on the thread path: each forward first reads the stop flag and, once
    it is up, raises StopDecoding instead (the loop's rollback keeps the trace to its last complete block)."""

    def __init__(self, model: Any, stopped: Callable[[], bool]) -> None:
        self._model, self._stopped = model, stopped

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        if self._stopped():
            raise StopDecoding()
        return self._model.forward(*args, **kwargs)


def thread_job(model: Any, decode: Decode) -> Callable[[Any], Any]:
    """`decode` as a thread job (`job(sequence_model) -> GenerateResult`): `run_prepared`, the batch-1 decode, its
    forwards handed to the batch through `sequence_model`."""
    def job(seq_model: Any) -> Any:
        return run_prepared(model, decode.prep, decode.seed, decode.detailed, decode.check(),
                            StopOnFlag(seq_model, decode.stopped))[0]

    return job
