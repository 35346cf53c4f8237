"""Fair use of the one GPU slot: at most one job in flight per browser session, and every job can be stopped.

A job is registered when its event is admitted to the queue (the event's `validator`, keyed on
`gr.Request.session_hash`), so one visitor cannot fill the queue: a second submission from the same session is
refused with a message while the first waits or runs. The registration ends when the handler returns, when the
visitor presses Stop (`stop_session`), or when the session goes away (`demo.unload`, which Gradio calls when the
browser tab or the API client's heartbeat disconnects). A decode polls `cancelled(job_id)` before every forward,
so Stop and a closed tab end it within one forward.
"""
from __future__ import annotations

import contextvars
import inspect
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import gradio as gr

BUSY = ("⏳ You already have a run in progress (or waiting in the queue): wait for it to finish, or press "
        "Stop, then try again. One run per visitor at a time keeps the GPU fair.")
STALE_QUEUED_S = 1800.0  # a registration whose event never started (its client vanished) is dropped after this


@dataclass
class Job:
    id: str
    session: str
    admitted: float
    started: bool = False
    stop: threading.Event = field(default_factory=threading.Event)


class Jobs:
    """Registry of in-flight jobs: one per session."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_session: dict[str, Job] = {}
        self._by_id: dict[str, Job] = {}

    def admit(self, session: str) -> Optional[str]:
        """Register a queued job for the session, or return the message refusing it."""
        with self._lock:
            self._drop_stale()
            if session in self._by_session:
                return BUSY
            self._add(session)
            return None

    def claim(self, session: str) -> Optional[Job]:
        """The session's admitted job, now running (registered here if the event had no validator);
        None when the session already runs another one."""
        with self._lock:
            job = self._by_session.get(session)
            if job is None:
                job = self._add(session)
            elif job.started:
                return None
            job.started = True
            return job

    def finish(self, job: Job) -> None:
        with self._lock:
            if self._by_session.get(job.session) is job:
                del self._by_session[job.session]
            self._by_id.pop(job.id, None)

    def stop_session(self, session: str) -> bool:
        """Stop the session's job (running: its decode ends at the next forward; queued: it is dropped)."""
        with self._lock:
            job = self._by_session.get(session)
            if job is None:
                return False
            job.stop.set()
            if not job.started:
                del self._by_session[session]
                self._by_id.pop(job.id, None)
            return True

    def cancelled(self, job_id: str) -> bool:
        job = self._by_id.get(job_id)
        return job is not None and job.stop.is_set()

    def active(self) -> int:
        return len(self._by_session)

    def running(self, session: str) -> bool:
        job = self._by_session.get(session)
        return job is not None and job.started

    def _add(self, session: str) -> Job:
        job = Job(uuid.uuid4().hex, session, time.monotonic())
        self._by_session[session] = job
        self._by_id[job.id] = job
        return job

    def _drop_stale(self) -> None:
        now = time.monotonic()
        for s, job in list(self._by_session.items()):
            if not job.started and now - job.admitted > STALE_QUEUED_S:
                del self._by_session[s]
                self._by_id.pop(job.id, None)


JOBS = Jobs()
_CURRENT: contextvars.ContextVar[str] = contextvars.ContextVar("s2d2_job", default="")


def current_job() -> str:
    """Id of the job the calling handler runs for ("" outside a guarded handler)."""
    return _CURRENT.get()


def cancelled(job_id: str) -> bool:
    return bool(job_id) and JOBS.cancelled(job_id)


def session_of(request: Any) -> str:
    return str(getattr(request, "session_hash", None) or "anonymous")


def admit(request: gr.Request, *inputs: Any) -> list[Any]:
    """Event validator: refuse a second job from the same session before it enters the queue."""
    problem = JOBS.admit(session_of(request))
    n = max(1, len(inputs))
    return [gr.validate(problem is None, problem or "")] + [gr.validate(True, "")] * (n - 1)


def stop(request: gr.Request) -> str:
    """The Stop buttons: end the session's job (a queued one is dropped)."""
    return "Stopped." if JOBS.stop_session(session_of(request)) else "Nothing to stop."


def on_unload(request: gr.Request) -> None:
    JOBS.stop_session(session_of(request))


def one_job(fn: Callable[..., Any], busy: Callable[[str], Any]) -> Callable[..., Any]:
    """Wrap a GPU handler: it runs as the session's one job; `busy(message)` is what it returns when refused.
    Generators stay generators (Gradio streams them), so closing the stream closes the decode too."""
    if inspect.isgeneratorfunction(fn):
        def guarded_gen(request: gr.Request, *args: Any) -> Any:
            job = JOBS.claim(session_of(request))
            if job is None:
                yield busy(BUSY)
                return
            gen = fn(*args)
            try:
                while True:
                    # Gradio resumes a generator from a fresh worker context each time: set the job id around
                    # every step rather than once.
                    token = _CURRENT.set(job.id)
                    try:
                        item = next(gen)
                    except StopIteration:
                        return
                    finally:
                        _CURRENT.reset(token)
                    yield item
            finally:
                gen.close()  # a closed stream (Stop, tab closed) closes the decode's generator too
                JOBS.finish(job)

        wrapped: Callable[..., Any] = guarded_gen
    else:
        def guarded(request: gr.Request, *args: Any) -> Any:
            job = JOBS.claim(session_of(request))
            if job is None:
                return busy(BUSY)
            token = _CURRENT.set(job.id)
            try:
                return fn(*args)
            finally:
                _CURRENT.reset(token)
                JOBS.finish(job)

        wrapped = guarded
    wrapped.__name__ = getattr(fn, "__name__", "job")
    wrapped.__doc__ = fn.__doc__
    return wrapped
