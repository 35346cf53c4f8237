"""Every event of the app behind the same guards, whoever registered it: `protect(demo)` runs once, after every tab
is built (app.py), and wraps each event's function.

While a handler runs, the wrapper
- records who the request comes from (components/serve/identity.py), so deep code can charge its bytes to a visitor;
- charges the handler's CPU time to that visitor's session within its unit, and refuses a session over its fair
  part while others wait and the server's total is at its bound (components/serve/cpu_share.py: never while the
  server has time to spare); decodes and Stop are not metered;
- records that the event finished, so the front door lets its chained event (`.then`) join once
  (components/serve/chains.py);
- tells a visitor, once, that their session was cleared to let a newcomer in (components/serve/client_limits.py Sessions);
- turns any exception into one readable line (gr.Error, shown in the page) and logs at most a few lines: a deeply
  nested value (RecursionError) or an unrepresentable number (OverflowError) never reaches the visitor as Python;
- passes every output through `encodable`: Gradio streams outputs through orjson, which fails on an int beyond 64
  bits or a lone UTF-16 surrogate and takes the whole event stream down with it, so such values leave as None and
  U+FFFD instead.
An event function carrying `s2d2_quick` (Replay's step events, components/replay/wire_steps.py) becomes a coroutine:
its kept answer is tried on the event loop, and only a miss goes to a worker thread; both are admitted and charged
as above.
It also checks the wiring rules the fairness guards rely on, failing at start-up rather than in production: a decode
(concurrency_id "gpu", or "gpu_run" for shared Runs) runs as gpu_slot.one_job and is admitted by
gpu_slot.admit_decode; a Stop runs outside the queue.
"""
from __future__ import annotations

import functools
import inspect
import logging
import math
import time
import traceback
from typing import Any, Callable, Optional

import anyio.to_thread
import gradio as gr

from components.serve import gpu_slot
from components.serve.identity import request_key, reset_current, set_current
from components.escape import html_text, without_surrogates
from components.serve.chains import CHAINS, door_parent
from components.serve.cpu_share import CPU_SHARE, cpu_share, cpu_window_s
from components.serve.fair_order import Ask
from components.serve.front_door import SESSIONS, event_client
from components.serve.roster import ROSTER
from components.serve.client_limits import queue_events
from components.serve.input_numbers import INT_BOUND

LOG = logging.getLogger("s2d2.app")
Contended = Optional[Callable[[], list]]  # the (unit, member) of every event waiting or running (None: not metered)
GPU = gpu_slot.DECODE_SLOTS
MAX_LOGGED = 2000  # characters of a traceback written to the log (a value in an exception can be megabytes)


def protect(demo: gr.Blocks) -> gr.Blocks:
    """Wrap every event function of `demo` (once) and check the fairness wiring; returns `demo`."""
    cpu_share(), cpu_window_s()  # a bad S2D2_CPU_* stops the start, not every event
    for index, block_fn in demo.fns.items():
        fn = block_fn.fn
        if fn is None or getattr(fn, "_s2d2_protected", False):
            continue
        if _unwrapped(fn) is gpu_slot.stop and block_fn.queue is not False:
            raise ValueError(f"{block_fn.name}: wire Stop with queue=False (Stop never waits behind the queue)")
        if block_fn.concurrency_id in GPU:
            if not _is_one_job(fn):
                raise ValueError(f"{block_fn.name}: a decode (concurrency_id='gpu') must run as gpu_slot.one_job(...)")
            if block_fn.validator is None:
                block_fn.validator = gpu_slot.admit_decode  # one decode per session and per client, refused at the door
        block_fn.fn = guarded(fn, block_fn.name or "event", _contended(demo, block_fn), index)
    return demo


def _contended(demo: gr.Blocks, block_fn: Any) -> Contended:
    """How the guard meters an event (components/serve/cpu_share.py): decodes and Stop not at all; a page's
    load and unload, and an event chained after a Python event (`.then`: a Run's views), are charged but never
    refused (refused, a page would be left half built, a session never freed, or a finished Run never shown; the
    front door lets a chained event join only once per finished parent, components/serve/chains.py); every other
    event is charged, and refused while its session is over its fair part and others wait."""
    if block_fn.concurrency_id in GPU or _unwrapped(block_fn.fn) is gpu_slot.stop:
        return None
    chained = door_parent(demo.fns, block_fn) is not None
    if chained or any(trigger in ("load", "unload") for _, trigger in block_fn.targets):
        return _never
    return functools.partial(contenders, demo)


def _never() -> list:
    return []


def ask_of(unit: str, session: Any) -> Ask:
    """The (unit, member) a session's events are charged to (components/serve/roster.py)."""
    return unit, ROSTER.member(unit, str(session or "") or None)


def contenders(demo: gr.Blocks) -> list[Ask]:
    """The (unit, member) of every event waiting or running in `demo`'s queue."""
    queue = getattr(demo, "_queue", None)
    if queue is None:
        return []
    return [ask_of(event_client(e), getattr(e, "session_hash", None)) for e in queue_events(queue)]


def guarded(fn: Callable[..., Any], name: str, contended: Contended = None,
            index: Optional[int] = None) -> Callable[..., Any]:
    """`fn` with the visitor's key set, readable errors and encodable outputs (generators stay generators). With
    `contended` (the members whose events wait or run), the handler's CPU time is charged to the session's member,
    and a member over its fair part is refused while others wait (components/serve/cpu_share.py). When it ends,
    the event `index` is recorded as finished for its session (components/serve/chains.py)."""
    if inspect.isgeneratorfunction(fn):
        @functools.wraps(fn)
        def stream(*args: Any, **kwargs: Any) -> Any:
            try:
                inner = _step(lambda: fn(*args, **kwargs), name, contended, admit=True)
                try:
                    while True:  # Gradio resumes a generator from a fresh context: set the visitor around every step
                        try:
                            item = _step(lambda: next(inner), name, contended)
                        except StopIteration:
                            return
                        yield encodable(item)
                finally:
                    inner.close()
            finally:
                _finished(index)

        wrapped: Callable[..., Any] = stream
    elif callable(getattr(fn, "s2d2_quick", None)):
        wrapped = _quick_first(fn, name, contended, index)
    else:
        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return encodable(_step(lambda: fn(*args, **kwargs), name, contended, admit=True))
            finally:
                _finished(index)

        wrapped = call
    wrapped._s2d2_protected = True  # type: ignore[attr-defined]
    wrapped.s2d2_metered = contended is not None  # type: ignore[attr-defined]
    wrapped.s2d2_refuses = contended is not None and contended is not _never  # type: ignore[attr-defined]
    return wrapped


def _quick_first(fn: Callable[..., Any], name: str, contended: Contended, index: Optional[int]) -> Callable[..., Any]:
    """`fn` as a coroutine that first tries `fn.s2d2_quick` (a kept answer, found in a dict lookup) on the event
    loop, and hands only a miss to a worker thread (components/replay/wire_steps.py); a kept answer must already
    be `encodable`'s output (it is handed back as it is). Admitted once, by the same
    rules as any event, before either; each path's own CPU is charged (a hit's lookup on the loop's thread, a miss's
    drawing on its worker), so a hit is not free of the share and a miss does not skip it."""
    quick = fn.s2d2_quick  # type: ignore[attr-defined]

    @functools.wraps(fn)
    async def call(*args: Any, **kwargs: Any) -> Any:
        try:
            kept = _step(lambda: quick(*args, **kwargs), name, contended, admit=True)
            if kept is not None:  # passed `encodable` when it was drawn: walking its text again would cost the loop
                return kept
            drawn = await anyio.to_thread.run_sync(  # the thread sees this event's context: its visitor, its request
                functools.partial(_step, lambda: fn(*args, **kwargs), name, contended))
            return encodable(drawn)
        finally:
            _finished(index)

    return call


def _finished(index: Optional[int]) -> None:
    from gradio.context import LocalContext

    CHAINS.finished(getattr(LocalContext.request.get(None), "session_hash", None), index)


def _step(run: Callable[[], Any], name: str, contended: Contended = None, admit: bool = False) -> Any:
    from gradio.context import LocalContext

    request = LocalContext.request.get(None)
    key = request_key(request)
    ask = ask_of(key, getattr(request, "session_hash", None))
    token = set_current(key)
    started = time.thread_time()
    try:
        if contended is not None and admit:
            refusal = CPU_SHARE.refusal(ask, contended)
            if refusal:
                raise gr.Error(refusal, print_exception=False)
        note = SESSIONS.evicted_note(str(getattr(request, "session_hash", "") or ""))
        if note:  # this session was cleared to let a newcomer in: say so once (components/serve/client_limits.py)
            gr.Warning(note)
        return run()
    except (StopIteration, gr.Error):
        raise
    except RecursionError:
        raise gr.Error("A value in this request is nested too deeply to read.", print_exception=False) from None
    except OverflowError:
        raise gr.Error("A number in this request is too large.", print_exception=False) from None
    except Exception as exc:  # one readable line for the visitor, a bounded one for the log
        LOG.warning("%s failed: %s", name, "".join(traceback.format_exception(exc))[-MAX_LOGGED:])
        raise gr.Error(f"Something went wrong here ({html_text(type(exc).__name__, 60)}); nothing was changed. "
                       "Reload the page if the views look stale.", print_exception=False) from None
    finally:
        if contended is not None:  # this thread's CPU only: waiting for the interpreter or the machine is free
            CPU_SHARE.charge(ask, time.thread_time() - started)
        reset_current(token)


def encodable(value: Any, depth: int = 0) -> Any:
    """`value` with ints beyond ±INT_BOUND and non-finite floats as None and lone surrogates as U+FFFD, inside
    dicts, lists and tuples a few levels deep (figures and components are left as they are)."""
    if isinstance(value, str):
        return without_surrogates(value)
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return value if -INT_BOUND <= value <= INT_BOUND else None
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if depth >= 5:
        return value
    if isinstance(value, dict):
        return {k: encodable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [encodable(v, depth + 1) for v in value]
    if isinstance(value, tuple):
        return tuple(encodable(v, depth + 1) for v in value)
    return value


def _unwrapped(fn: Any) -> Any:
    while hasattr(fn, "__wrapped__"):
        fn = fn.__wrapped__
    return fn


def _is_one_job(fn: Any) -> bool:
    while fn is not None:
        if getattr(fn, "_s2d2_one_job", False):
            return True
        fn = getattr(fn, "__wrapped__", None)
    return False
