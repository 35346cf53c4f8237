"""A whole class at once: the Run tab's decodes share one batch per loaded model (s2d2/decoding/live_batch.py).

`shared_generate(name)` is a drop-in for `generate_within_limits` in `record_stream`: the visitor's prompt is checked
and prepared in the visitor's own thread, then its decode is submitted to the model's one `LiveBatch` (a `Decode`:
prompt, seed, progress check, stop flag), which runs it beside every other visitor's: every config the batch-first
engine covers (all that a visitor can set) as one row of the batch's step (its own generator, masks, policy state and
trace; the step's rules are the lone loop's, run over every row at once), any other in a thread of its own (the lone
loop, only the forwards shared). So the trace, the seed's output and every decision are those of a lone Run up to the
shared forwards' float round-off. What the visitor had stays per visitor: its on_block progress (now with how many
others it decodes with, or its place in the queue), its Stop and a closed stream (its own flag, checked before each of
its forwards: it leaves within one batch step, keeping its trace to the last complete block; still waiting for a place
in the batch, it is withdrawn from the queue within POLL_S and its Run ends "stopped before it started", nothing run and
nobody else's place or decode touched), its time limit (from when it starts decoding), its errors (its own ticket; the
batch goes on).

What shares: Runs on the same loaded model with the same block loop and block length (`share_key`); a static
backend's storage is grown to S2D2_BATCH_MAX slots when the model's batch starts, a slot per Run. What decodes
alone, one at a time beside the batch (`ALONE`, also taken by Compare and what-if lanes): a model that cannot batch
(flash attention) and cost-aware policies (they calibrate and route by measured seconds, which a
shared forward does not give one sequence).

Operator knobs (docs/operating-a-space.md): S2D2_BATCH_MAX (sequences decoding at once per model, default 16; 1
turns sharing off: every Run decodes alone, one after another, as before) and S2D2_BATCH_WAIT_MS (how long an idle
batch's first request waits for companions, default 0: a lone visitor is never slowed). On ZeroGPU (a decode runs
in a forked GPU process per call) sharing is off.
"""
from __future__ import annotations

import os
import threading
from typing import Any, Callable, Hashable, Optional

from s2d2.api import encode_prompt, prepare
from s2d2.batched import batch_refusal
from s2d2.config import DecodeConfig
from s2d2.decoding.decoder import make_check
from s2d2.decoding.live_batch import LiveBatch, Withdrawn
from s2d2.decoding.live_jobs import Decode
from s2d2.limits import check_prompt_tokens
from s2d2.policies import uses_costs

from components.run.workers import RunStopped, generate_within_limits
from components.serve.gpu_slot import STOPPED_QUEUED
from components.serve.model_pool import loaded_models
from components.serve.settings import env_int

POLL_S = 0.25  # how often a queued visitor's place is re-read (progress, not synchronisation)

_LOCK = threading.Lock()
_BATCHES: dict[str, tuple[Any, LiveBatch]] = {}  # model name -> (the loaded model, its batch)
_RETIRED: list[LiveBatch] = []  # batches of models the pool dropped or reloaded, closed once they are idle


def batch_max() -> int:
    """S2D2_BATCH_MAX: sequences one model's shared batch decodes at once, default 16 (1: no sharing)."""
    return env_int("S2D2_BATCH_MAX", 16, 1, 64)


def batch_wait_s() -> float:
    """S2D2_BATCH_WAIT_MS: how long an idle batch's first request waits for companions, in seconds (default 0)."""
    return env_int("S2D2_BATCH_WAIT_MS", 0, 0, 5000) / 1000.0


def on_zerogpu() -> bool:
    return bool(os.environ.get("SPACES_ZERO_GPU"))


def sharing_on() -> bool:
    """Whether Runs share a batch here (S2D2_BATCH_MAX > 1, not on ZeroGPU)."""
    return batch_max() > 1 and not on_zerogpu()


def run_concurrency() -> int:
    """How many Run events may be in their handler at once: the batch size when sharing (the rest wait in the
    queue, with their place shown), else 1 (one decode after another)."""
    return batch_max() if sharing_on() else 1


def share_key(model: Any, cfg: DecodeConfig) -> Optional[Hashable]:
    """What a decode may share a batch with (equal keys share forwards), or None: it decodes alone."""
    if batch_refusal(model, 2) is not None or uses_costs(cfg):
        return None
    return (cfg.loop, cfg.block_length)


def batch_for(name: str, model: Any) -> LiveBatch:
    """The model's one LiveBatch (a new one when the pool reloaded the model or the batch size changed); batches
    of models the pool no longer holds are retired, and closed once idle (a decode in flight is never cut)."""
    with _LOCK:
        held = set(loaded_models())
        for gone in [n for n in _BATCHES if n != name and n not in held]:
            _RETIRED.append(_BATCHES.pop(gone)[1])
        entry = _BATCHES.get(name)
        if entry is not None and (entry[0] is not model or entry[1].batch_size != batch_max()):
            _RETIRED.append(_BATCHES.pop(name)[1])
            entry = None
        for old in [b for b in _RETIRED if b.live() == 0 and b.waiting() == 0]:
            _RETIRED.remove(old)
            old.close(timeout=0)
        if entry is not None:
            return entry[1]
        reserve = getattr(model, "reserve_slots", None)
        if callable(reserve):  # a static backend: a slot per Run of the batch (a no-op while a decode holds one)
            reserve(batch_max())
        batch = LiveBatch(model, batch_max(), batch_wait_s(), name=f"s2d2-batch-{name[:40]}")
        _BATCHES[name] = (model, batch)
        return batch


def close_all() -> None:
    """Close every shared batch (tests; a server ends with its process)."""
    with _LOCK:
        batches = [b for _, b in _BATCHES.values()] + _RETIRED
        _BATCHES.clear()
        _RETIRED.clear()
    for b in batches:
        b.close()


def shared_generate(name: str) -> Callable[..., Any]:
    """A `generate` for `record_stream` that decodes in model `name`'s shared batch (or alone, see share_key).
    Its `on_block` also receives `together=` (the others decoding with it) or, while queued, `queued=` (its
    place)."""
    def generate(model: Any, prompt: Any, cfg: DecodeConfig, *, seed: int = 0,
                 on_block: Optional[Callable[..., None]] = None, should_stop: Optional[Callable[[], bool]] = None,
                 max_seconds: Optional[float] = None) -> Any:
        raw = getattr(model, "inner", model)  # record_stream's Stoppable: the batch needs the model itself
        key = share_key(raw, cfg.validate())
        if key is None:  # before prepare: a cost calibration runs under ALONE
            return generate_within_limits(model, prompt, cfg, seed=seed, on_block=on_block,
                                          should_stop=should_stop, max_seconds=max_seconds)
        check_prompt_tokens(len(encode_prompt(raw, prompt)[0]))
        prep = prepare(raw, prompt, cfg, None, None)
        stopped = should_stop or (lambda: False)
        ticket_box: list[Any] = []

        def progress(steps: list[Any]) -> None:
            if on_block is not None:
                on_block(steps, together=ticket_box[0].companions if ticket_box else 0)

        def check() -> Any:  # its clock starts when it starts decoding
            return make_check(stopped, max_seconds, progress)

        batch = batch_for(name, raw)
        ticket = batch.submit(Decode(prep, seed, check, stopped), key)
        ticket_box.append(ticket)
        while not ticket.done.wait(POLL_S):
            if ticket.started:
                continue
            if stopped() and batch.withdraw(ticket):  # Stop while queued: it leaves the queue now, nothing ran
                break
            if on_block is not None:
                on_block([], queued=ticket.position)
        try:
            return ticket.outcome()
        except Withdrawn:
            raise RunStopped(STOPPED_QUEUED) from None

    return generate
