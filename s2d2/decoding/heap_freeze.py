"""Keep Python's cyclic garbage collector off the objects that existed before a batch decode (`frozen_heap`).

Why: a batch-first step allocates many small objects (tensors, records), so the collector runs often, and each of
its full passes walks every object of the process: the model's modules and parameters, torch's own state, every
record of every live sequence. That walk is host work per step that grows with the heap, not with the step: at
batch 128 on the stand-in model it was a third of the engine's host time for fastdllm-config-a
(docs/benchmarks.md, 'Speed benchmarks', the batch-first engine).
`gc.freeze()` moves every object that exists now into a generation the collector never walks; the decode's own new
objects are still collected as usual. Nothing is freed later than it would be by reference counting (the collector
only finds cycles), and a cycle that was already garbage at the freeze is found after the last decode ends.

The decode's own objects grow too: every step adds each live sequence's records, and the collector's older passes
walk all of them again, so a long batch decode's collector time grows with its trace (at batch 128 on the stand-in:
6-40 us of the 50-70 us per sequence-forward). `refreeze` after a step moves the step's survivors into the frozen
generation as well, so each pass walks only what the current step made. It is for a bounded decode
(lockstep.py `Lockstep.run`) that holds the freeze alone: a cycle that becomes garbage during the decode waits for
the decode's end, when the last holder unfreezes. The Space's live batch, which may hold the freeze for as long as
visitors keep arriving, never refreezes, nor does a decode while another holds the freeze (their garbage would wait
for both).

Between two refreezes the collector can find only the current step's own garbage cycles, yet its first generation
fills every 700 new containers, so a step at batch 128 ran a dozen young passes over records that all survive the
step (1.7-2.1 µs of the batch-first engine's 25-50 µs per sequence-forward on the stand-in model, timed by the
collector's own callbacks; 0.04-0.24 µs with the threshold below: docs/benchmarks.md). So while a decode
refreezes, the first generation's threshold is `STEP_YOUNG`: a step's young pass waits for that many new
containers (the refreeze resets the count), and a cycle the step drops waits, with those that outlive a step, for
the decode's end. The threshold is the caller's again as soon as a second decode holds the freeze (it never
refreezes) and when the last holder leaves.

Invariant: the freeze is process-wide, so it is counted: the first of any concurrent decodes freezes, the last one
to end unfreezes (also when a decode raises), and a decode never unfreezes under another that is still running.
"""
from __future__ import annotations

import gc
import threading
from contextlib import contextmanager
from typing import Iterator, Optional

STEP_YOUNG = 50_000  # new containers before a young pass while a decode refreezes: far more than a step makes

_lock = threading.Lock()
_holders = 0
_saved: Optional[tuple[int, ...]] = None  # the collector's thresholds before a refreezing decode raised the first


@contextmanager
def frozen_heap() -> Iterator[None]:
    """The objects that exist on entry are left out of the collector's passes until the last holder leaves."""
    global _holders
    with _lock:
        _holders += 1
        if _holders == 1:
            gc.freeze()
        else:  # the first holder no longer refreezes: the collector's own thresholds again
            _restore_threshold()
    try:
        yield
    finally:
        with _lock:
            _holders -= 1
            if _holders == 0:
                gc.unfreeze()
            _restore_threshold()


def refreeze() -> bool:
    """Freeze what exists now (a step's survivors) when exactly one decode holds the freeze: the caller, which must
    hold it. Returns whether it froze. O(1): the collector's generations are moved, not walked. While it
    refreezes, the first generation's threshold is at least `STEP_YOUNG` (module docstring)."""
    global _saved
    with _lock:
        if _holders != 1:
            return False
        gc.freeze()
        if _saved is None:
            _saved = gc.get_threshold()
            gc.set_threshold(max(STEP_YOUNG, _saved[0]), *_saved[1:])
        return True


def _restore_threshold() -> None:
    """The thresholds as they were before a refreezing decode raised the first (the caller holds `_lock`)."""
    global _saved
    if _saved is not None:
        gc.set_threshold(*_saved)
        _saved = None


def holders() -> int:
    """How many decodes hold the freeze now (0: the heap is not frozen by this module)."""
    return _holders
