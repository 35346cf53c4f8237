"""Keep Python's cyclic garbage collector off the objects that existed before a batch decode (`frozen_heap`).

Why: a batch-first step allocates many small objects (tensors, records), so the collector runs often, and each of
its full passes walks every object of the process: the model's modules and parameters, torch's own state, every
record of every live sequence. That walk is host work per step that grows with the heap, not with the step: at
batch 128 on the stand-in model it was a third of the engine's host time for fastdllm-config-a
(docs/benchmarks.md, 'Speed benchmarks', the batch-first engine).
`gc.freeze()` moves every object that exists now into a generation the collector never walks; the decode's own new
objects are still collected as usual. Nothing is freed later than it would be by reference counting (the collector
only finds cycles), and a cycle that was already garbage at the freeze is found after the last decode ends.

Invariant: the freeze is process-wide, so it is counted: the first of any concurrent decodes freezes, the last one
to end unfreezes (also when a decode raises), and a decode never unfreezes under another that is still running.
"""
from __future__ import annotations

import gc
import threading
from contextlib import contextmanager
from typing import Iterator

_lock = threading.Lock()
_holders = 0


@contextmanager
def frozen_heap() -> Iterator[None]:
    """The objects that exist on entry are left out of the collector's passes until the last holder leaves."""
    global _holders
    with _lock:
        _holders += 1
        if _holders == 1:
            gc.freeze()
    try:
        yield
    finally:
        with _lock:
            _holders -= 1
            if _holders == 0:
                gc.unfreeze()


def holders() -> int:
    """How many decodes hold the freeze now (0: the heap is not frozen by this module)."""
    return _holders
