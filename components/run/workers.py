"""A decode in a worker thread: s2d2.generate streamed as plain dicts (progress after every block, then the trace),
stopped within one forward by the job's flag or the time limit, a stopped run keeping its trace up to the last
complete block."""
from __future__ import annotations

import queue
import threading
import time
from typing import Any, Callable, Iterator, Optional

from s2d2.config import DecodeConfig
from s2d2.decoding.layout import block_lengths
from s2d2.decoding.live_jobs import StopOnFlag
from s2d2.limits import check_prompt_tokens, limits
from components.views.canvas import live_rows
from components.run.config_check import check_config


# Decodes that do not share a batch (Compare and what-if lanes, and Runs that cannot share: shared_batch.py) run
# one at a time, as they did when every decode held the one GPU slot: their wall times are compared or routed on
# (a cost calibration times forwards that must not overlap another decode's).
ALONE = threading.Lock()


def generate_within_limits(model: Any, prompt: Any, cfg: DecodeConfig, **kwargs: Any) -> Any:
    """s2d2.generate (under ALONE), refusing a prompt over S2D2_MAX_PROMPT_TOKENS (counted after the chat
    template)."""
    from s2d2.api import encode_prompt, generate

    check_prompt_tokens(len(encode_prompt(model, prompt)[0]))
    with ALONE:
        return generate(model, prompt, cfg, **kwargs)


class RunStopped(Exception):
    """Compare lanes or a what-if re-run that the visitor stopped; the message says what was kept."""


class Stoppable(StopOnFlag):
    """The model as one run sees it: every forward first checks the run's stop flag and, once it is up, raises
    s2d2's StopDecoding instead, so a stopped run frees the GPU within one forward and still returns its trace up to
    the last complete block (s2d2's StopOnFlag). Everything else is the model's; `inner` is the wrapped model."""

    def __init__(self, model: Any, stopped: Callable[[], bool]) -> None:
        super().__init__(model, stopped)
        self.inner = model


_END = object()


WARMUP_STATUS = ("Preparing the GPU fast path: capturing CUDA graphs for this block length (a few seconds, once per "
                 "model and block length)…")


def answer_end(model: Any, prompt: Any, cfg: DecodeConfig) -> Optional[int]:
    """The first position the answer does not keep (the prompt's tokens + the generation length: s2d2/output.py),
    so the live strip greys the rest of a whole block while it decodes; None when the prompt cannot be encoded
    here (the decode itself then says why)."""
    from s2d2.api import encode_prompt

    try:
        return len(encode_prompt(model, prompt)[0]) + cfg.gen_length
    except (ValueError, TypeError, AttributeError):
        return None


def progress_events(events: "queue.Queue[Any]", model: Any, start: float,
                    keep: Optional[int] = None) -> Callable[..., None]:
    """The decode's on_block: a progress event after every block (with `keep`, answer_end's position, when
    known); a shared decode also says how many others it decodes with (`together`), or, still waiting for a
    place, its position (`queued`; shared_batch.py)."""
    def on_block(steps: list[Any], *_: Any, together: Optional[int] = None, queued: Optional[int] = None,
                 **__: Any) -> None:
        event = {"kind": "progress", "steps": len(steps), "commits": live_rows(steps),
                 "stop_ids": list(getattr(getattr(model, "spec", None), "stop_ids", ())),
                 "elapsed": round(time.monotonic() - start, 2)}
        if keep is not None:
            event["keep"] = keep
        if together is not None:
            event["together"] = int(together)
        if queued is not None:
            event["queued"] = int(queued)
        events.put(event)

    return on_block


def record_stream(prompt: Any, model_name: str, config: dict[str, Any], seed: int,
                  generate: Callable[..., Any], load: Callable[[str], Any],
                  max_seconds: Optional[float] = None, min_interval: float = 0.2,
                  cancel: Callable[[], bool] = lambda: False) -> Iterator[dict[str, Any]]:
    """Run `generate` in a thread; yield {"kind": "progress"|"done"|"error"|"stopped", ...} plain dicts ("stopped":
    `generate` raised RunStopped, nothing to keep; its message says so). The run ends early
    with its partial trace as "done": after `max_seconds` (default: S2D2_MAX_RUN_SECONDS; finish_reason
    "time_limit"), and within one forward once `cancel()` turns true ("cancelled": the blocks completed before it).
    Closing this generator stops the decode within one forward too."""
    try:
        cfg = check_config(DecodeConfig.from_dict(config))
        model = load(model_name)
    except ValueError as exc:
        yield {"kind": "error", "message": str(exc)}
        return
    events: "queue.Queue[Any]" = queue.Queue()
    stop = threading.Event()
    start = time.monotonic()
    seconds = limits().max_run_seconds if max_seconds is None else max_seconds

    def stopped() -> bool:
        return stop.is_set() or cancel()

    on_block = progress_events(events, model, start, answer_end(model, prompt, cfg))

    def work() -> None:
        try:
            blocks = block_lengths(cfg)
            if getattr(model, "needs_warmup", lambda _: False)(blocks):  # static backend on a GPU: once per shape
                events.put({"kind": "progress", "steps": 0, "commits": [], "elapsed": 0.0, "status": WARMUP_STATUS})
                model.warmup(block_lengths=blocks)
            result = generate(Stoppable(model, stopped), prompt, cfg, seed=seed, on_block=on_block,
                              should_stop=stopped, max_seconds=seconds)
            events.put({"kind": "done", "trace": result.trace.to_dict(), "text": result.text,
                        "elapsed": round(time.monotonic() - start, 2)})
        except RunStopped as exc:  # stopped before anything ran (a shared Run withdrawn from its queue)
            events.put({"kind": "stopped", "message": str(exc)})
        except ValueError as exc:
            events.put({"kind": "error", "message": str(exc)[:500]})
        except Exception as exc:  # the UI shows a message, never a traceback
            events.put({"kind": "error", "message": f"The run failed: {type(exc).__name__}: {str(exc)[:300]}"})
        finally:
            events.put(_END)

    thread = threading.Thread(target=work, name="s2d2-record", daemon=True)
    thread.start()
    last = 0.0
    try:
        while True:
            item = events.get()
            if item is _END:
                break
            if item["kind"] == "progress":
                now = time.monotonic()
                if now - last < min_interval:
                    continue
                last = now
            yield item
    finally:  # a closed generator (Stop button, client gone) stops the decode before its next forward
        stop.set()
