"""Fair use of the one GPU slot: at most one job in flight per browser session, and every job can be stopped.

A job is registered when its event is admitted to the queue (the event's `validator`, keyed on
`gr.Request.session_hash`), so one visitor cannot fill the queue: a second submission from the same session is
refused with a message while the first waits or runs. The registration ends when the handler returns, or when the
session goes away (`demo.unload`, which Gradio calls when the browser tab or the API client's heartbeat
disconnects).

This registry is the app's one stop mechanism. Stop (`stop`) only raises the job's flag and writes nothing: a decode
polls `cancelled(job_id)` before every forward and ends within one forward with its trace up to the last complete
block, and the job's own handler writes the final status ("Stopped — partial trace kept"), so no late progress line
can overwrite it. A job stopped while still queued is withdrawn: the session may submit again at once, and the
withdrawn event, when its turn comes, ends without doing anything (events start in queue order, so it is claimed
before any later one of the session). A closed tab, a closed event stream and unload stop the job the same way.
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
LEAVING = ("⏳ The runs you stopped are still leaving the queue (they do no work): try again when one has left. "
           "One run per visitor at a time keeps the GPU fair.")
STOPPED_QUEUED = "⏹ Stopped before it started: nothing ran."
STALE_QUEUED_S = 1800.0  # a registration whose event never started (its client vanished) is dropped after this
MAX_WITHDRAWN = 2  # stopped-while-queued events a session may still have in the queue before it is refused


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
        self._by_session: dict[str, Job] = {}  # the session's live job, queued or running
        self._withdrawn: dict[str, list[Job]] = {}  # stopped while queued; their events still queued, oldest first
        self._by_id: dict[str, Job] = {}

    def admit(self, session: str) -> Optional[str]:
        """Register a queued job for the session, or return the message refusing it."""
        with self._lock:
            self._drop_stale()
            if session in self._by_session:
                return BUSY
            if len(self._withdrawn.get(session, ())) >= MAX_WITHDRAWN:
                return LEAVING
            self._add(session)
            return None

    def claim(self, session: str) -> Optional[Job]:
        """The job a starting event runs as: the session's oldest withdrawn job first (its stop flag is up), else
        its admitted job, now running (registered here if the event had no validator); None when the session
        already runs another one."""
        with self._lock:
            withdrawn = self._withdrawn.get(session)
            if withdrawn:
                job = withdrawn.pop(0)
                if not withdrawn:
                    del self._withdrawn[session]
                job.started = True
                return job
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
        """Stop the session's job (running: its decode ends at the next forward; queued: it is withdrawn)."""
        with self._lock:
            job = self._by_session.get(session)
            if job is None:
                return False
            job.stop.set()
            if not job.started:
                del self._by_session[session]
                self._withdrawn.setdefault(session, []).append(job)
            return True

    def end_session(self, session: str) -> None:
        """The session went away: stop its running job; its queued events left with it (Gradio drops them)."""
        with self._lock:
            for gone in self._withdrawn.pop(session, []):
                self._by_id.pop(gone.id, None)
            job = self._by_session.get(session)
            if job is None:
                return
            job.stop.set()  # a running job stays registered until its handler returns
            if not job.started:
                del self._by_session[session]
                self._by_id.pop(job.id, None)

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
        for s, jobs in list(self._withdrawn.items()):
            for job in [j for j in jobs if now - j.admitted > STALE_QUEUED_S]:
                jobs.remove(job)
                self._by_id.pop(job.id, None)
            if not jobs:
                del self._withdrawn[s]


JOBS = Jobs()
_CURRENT: contextvars.ContextVar[str] = contextvars.ContextVar("s2d2_job", default="")


def current_job() -> str:
    """Id of the job the calling handler runs for ("" outside a guarded handler)."""
    return _CURRENT.get()


def cancelled(job_id: str) -> bool:
    return bool(job_id) and JOBS.cancelled(job_id)


def stop_requested() -> bool:
    """Has the visitor stopped the job the calling handler runs for?"""
    return cancelled(current_job())


def session_of(request: Any) -> str:
    return str(getattr(request, "session_hash", None) or "anonymous")


def admit(request: gr.Request, *inputs: Any) -> list[Any]:
    """Event validator: refuse a second job from the same session before it enters the queue."""
    problem = JOBS.admit(session_of(request))
    n = max(1, len(inputs))
    return [gr.validate(problem is None, problem or "")] + [gr.validate(True, "")] * (n - 1)


def stop(request: gr.Request) -> None:
    """The Stop buttons: raise the session's job flag (a queued job is withdrawn). Writes nothing: the job's
    handler writes the final status."""
    JOBS.stop_session(session_of(request))


def on_unload(request: gr.Request) -> None:
    JOBS.end_session(session_of(request))


def _claim(request: gr.Request) -> tuple[Optional[Job], Optional[str]]:
    """The session's job, or (None, why it must not run): the session runs another job, or this one was stopped
    while queued (its claim is released)."""
    job = JOBS.claim(session_of(request))
    if job is None:
        return None, BUSY
    if job.stop.is_set():
        JOBS.finish(job)
        return None, STOPPED_QUEUED
    return job, None


def one_job(fn: Callable[..., Any], refused: Callable[[str], Any]) -> Callable[..., Any]:
    """Wrap a GPU handler: it runs as the session's one job; `refused(message)` is what it returns when it may not
    run (the session runs another job, or this one was stopped while queued). Generators stay generators (Gradio
    streams them), so closing the stream closes the decode too."""
    if inspect.isgeneratorfunction(fn):
        def guarded_gen(request: gr.Request, *args: Any) -> Any:
            job, problem = _claim(request)
            if job is None:
                yield refused(problem)
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
                gen.close()  # a closed stream (tab closed, client gone) closes the decode's generator too
                JOBS.finish(job)

        wrapped: Callable[..., Any] = guarded_gen
    else:
        def guarded(request: gr.Request, *args: Any) -> Any:
            job, problem = _claim(request)
            if job is None:
                return refused(problem)
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
