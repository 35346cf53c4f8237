"""Fair use of the decode slots: one decode per browser session, every decode can be stopped.

A job is registered when its event is admitted to the queue (the event's `validator`, `admit_decode`): a second decode
from the same session is refused with a message while the first waits or runs. Sessions of one unit (a class
behind one address, components/serve/identity.py) are not refused: their Runs wait in the queue, which gives free
places in fair order (components/serve/fair_queue.py: equally between units, then between a unit's sessions). The
registration ends when the handler returns, or when the session goes away (`demo.unload`, which Gradio calls when
the browser tab or the API client's heartbeat disconnects).

This registry is the app's one stop mechanism. Stop (`stop`, an event outside the queue, so it never waits behind
it) only raises the job's flag and writes nothing: a decode polls `cancelled(job_id)` before every forward and ends
within one forward with its trace up to the last complete block, and the job's own handler writes the final status
("Stopped — partial trace kept"), so no late progress line can overwrite it. Stop acts only on a job of the same
client. A job stopped while still queued is withdrawn: the session may submit again at once, and the withdrawn
event, when its turn comes, ends without doing anything (events start in queue order, so it is claimed before any
later one of the session). A closed tab, a closed event stream and unload stop the job the same way, and so does
nobody listening: a running decode whose session has had no open event stream for S2D2_LISTEN_GRACE_S seconds
(the front door, components/serve/front_door.py, reports the streams) is stopped at its next forward.
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

from components.serve.identity import LOCAL, request_key
from components.serve.settings import env_int

BUSY = ("You already have a run in progress (or waiting in the queue) on this page, on the Run or the Compare tab: "
        "wait for it to finish, or press that tab's Stop, then try again. One run per page at a time keeps the server "
        "fair.")
LEAVING = ("The runs you stopped are still leaving the queue (they do no work): try again when one has left. "
           "One run per page at a time keeps the server fair.")
STOPPED_QUEUED = "■ Stopped before it started: nothing ran."
NO_SESSION = "A run needs a session: call it through /gradio_api/call/<name> or /gradio_api/queue/join."
GPU = "gpu"  # the concurrency id of every decode but shared Runs (components/serve/event_guard.py checks the wiring)
GPU_RUN = "gpu_run"  # Runs that decode together in a model's shared batch (components/run/shared_batch.py)
DECODE_SLOTS = (GPU, GPU_RUN)
STALE_QUEUED_S = 1800.0  # a registration whose event never started (its client vanished) is dropped after this
MAX_WITHDRAWN = 2  # stopped-while-queued events a session may still have in the queue before it is refused


def listen_grace_s() -> float:
    """S2D2_LISTEN_GRACE_S: seconds a running decode may go on with no open event stream, default 3."""
    return float(env_int("S2D2_LISTEN_GRACE_S", 3, 1, 3600))


@dataclass
class Job:
    id: str
    session: str
    admitted: float
    client: str = LOCAL
    started: bool = False
    started_at: float = 0.0
    stop: threading.Event = field(default_factory=threading.Event)


# seconds since `session` last had an open event stream (0.0 while one is open), or None when not known (no front
# door installed: handlers called directly, tests); set by components/serve/front_door.py
Silence = Callable[[str, float], Optional[float]]


class Jobs:
    """Registry of in-flight jobs: one per session (a unit's sessions wait in fair order, never refused)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_session: dict[str, Job] = {}  # the session's live job, queued or running
        self._withdrawn: dict[str, list[Job]] = {}  # stopped while queued; their events still queued, oldest first
        self._by_id: dict[str, Job] = {}
        self.silence: Optional[Silence] = None

    def admit(self, session: str, client: str = LOCAL) -> Optional[str]:
        """Register a queued job for the session, or return the message refusing it."""
        with self._lock:
            self._drop_stale()
            if session in self._by_session:
                return BUSY
            if len(self._withdrawn.get(session, ())) >= MAX_WITHDRAWN:
                return LEAVING
            self._add(session, client)
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
                job.started, job.started_at = True, time.monotonic()
                return job
            job = self._by_session.get(session)
            if job is None:
                job = self._add(session, LOCAL)
            elif job.started:
                return None
            job.started, job.started_at = True, time.monotonic()
            return job

    def finish(self, job: Job) -> None:
        with self._lock:
            if self._by_session.get(job.session) is job:
                del self._by_session[job.session]
            self._by_id.pop(job.id, None)

    def stop_session(self, session: str, client: Optional[str] = None) -> bool:
        """Stop the session's job (running: its decode ends at the next forward; queued: it is withdrawn); with
        `client`, only a job that client admitted (a stranger who learnt the session hash cannot stop it)."""
        with self._lock:
            job = self._by_session.get(session)
            if job is None or (client is not None and job.client not in (client, LOCAL)):
                return False
            job.stop.set()
            if not job.started:
                del self._by_session[session]
                self._withdrawn.setdefault(session, []).append(job)
            return True

    def end_session(self, session: str, client: Optional[str] = None) -> None:
        """The session went away: stop its running job; its queued events left with it (Gradio drops them). With
        `client`, only for a job that client admitted (an unload sent by a stranger who learnt the hash is
        ignored)."""
        with self._lock:
            job = self._by_session.get(session)
            if client is not None and job is not None and job.client not in (client, LOCAL):
                return
            for gone in self._withdrawn.pop(session, []):
                self._by_id.pop(gone.id, None)
            if job is None:
                return
            job.stop.set()  # a running job stays registered until its handler returns
            if not job.started:
                del self._by_session[session]
                self._by_id.pop(job.id, None)

    def withdraw(self, session: str, client: Optional[str] = None) -> bool:
        """The session's queued job left the queue without running (Gradio's /cancel removed its event): drop its
        registration, so the visitor may run again at once. A running job is stopped instead (stop_session)."""
        with self._lock:
            job = self._by_session.get(session)
            if job is None or (client is not None and job.client not in (client, LOCAL)):
                return False
            if job.started:
                job.stop.set()
            else:
                del self._by_session[session]
                self._by_id.pop(job.id, None)
            return True

    def holds(self, session: str) -> bool:
        """Has the session a decode admitted, queued or running (its session must not be evicted)?"""
        return session in self._by_session or session in self._withdrawn

    def cancelled(self, job_id: str) -> bool:
        """Has the job been stopped? A running job nobody listens to (no open event stream for its session for
        S2D2_LISTEN_GRACE_S) is stopped here, at its next forward."""
        job = self._by_id.get(job_id)
        if job is None:
            return False
        if not job.stop.is_set() and job.started and self.silence is not None:
            now = time.monotonic()
            quiet = self.silence(job.session, now)
            if quiet is not None and min(quiet, now - job.started_at) >= listen_grace_s():
                job.stop.set()
        return job.stop.is_set()

    def active(self) -> int:
        return len(self._by_session)

    def running(self, session: str) -> bool:
        job = self._by_session.get(session)
        return job is not None and job.started

    def _add(self, session: str, client: str) -> Job:
        job = Job(uuid.uuid4().hex, session, time.monotonic(), client)
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


def admit_decode(request: gr.Request, *inputs: Any) -> Any:
    """Event validator of a decode: refuse a second job from the same session before it enters the
    queue (Gradio wants one gr.validate per input, a bare one for a single input)."""
    session = getattr(request, "session_hash", None)
    problem = JOBS.admit(session, request_key(request)) if session else NO_SESSION
    checks = [gr.validate(problem is None, problem or "")] + [gr.validate(True, "")] * (max(1, len(inputs)) - 1)
    return checks[0] if len(inputs) == 1 else checks


def stop(request: gr.Request) -> None:
    """The Stop buttons (wire them with queue=False: Stop never waits behind the queue): raise the session's job
    flag (a queued job is withdrawn), for a job of the same client only. Writes nothing: the job's handler writes
    the final status."""
    JOBS.stop_session(session_of(request), request_key(request))


def on_unload(request: gr.Request) -> None:
    JOBS.end_session(session_of(request), request_key(request))


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
    wrapped._s2d2_one_job = True  # type: ignore[attr-defined]  # components/serve/event_guard.py checks decodes have it
    return wrapped
