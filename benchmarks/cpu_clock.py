"""This thread's CPU time inside decode loops and inside model forwards: what a decode costs, however many other jobs
share the machine (their time slices are not this thread's CPU time; wall time counts them). Benchmarks report it
next to wall time.

    clock = CpuClock()
    with clock.watching(model):
        s2d2.generate(model, prompt, cfg)
    clock.loop, clock.forward          # seconds of CPU inside the loop / inside the model's forwards
"""
from __future__ import annotations

import contextlib
import functools
import time
from typing import Any, Iterator

import s2d2.api as api

LOOPS = ("block_loop", "ar_loop", "editing_loop")  # what s2d2.api.generate runs inside its timer


class CpuClock:
    def __init__(self) -> None:
        self.loop = self.forward = 0.0

    def timed(self, fn: Any, slot: str) -> Any:
        @functools.wraps(fn)  # keeps the signature (the recorder asks whether forward takes `rows`)
        def run(*args: Any, **kwargs: Any) -> Any:
            t0 = time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                setattr(self, slot, getattr(self, slot) + time.thread_time() - t0)
        return run

    @contextlib.contextmanager
    def watching(self, model: Any) -> Iterator["CpuClock"]:
        """Count the decode loops `generate` runs and `model`'s forwards while inside the block."""
        loops = {name: getattr(api, name) for name in LOOPS}
        forward = type(model).forward.__get__(model)
        for name, fn in loops.items():
            setattr(api, name, self.timed(fn, "loop"))
        model.forward = self.timed(forward, "forward")
        try:
            yield self
        finally:
            for name, fn in loops.items():
                setattr(api, name, fn)
            del model.forward

    @property
    def outside(self) -> float:
        """The loop's CPU share spent outside model forwards."""
        return 1 - self.forward / self.loop if self.loop > 0 else 0.0
