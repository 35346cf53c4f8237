"""components/serve/heap_settle.py: after a full collector pass, what survived is frozen (later passes walk only
what came after); every SWEEP_S the frozen heap is let go once so a pass finds its garbage; nothing while a decode
holds the library's own freeze; installed only by the server's launch."""
from __future__ import annotations

import gc
import weakref

import pytest

from components.serve import heap_settle
from s2d2.decoding.heap_freeze import frozen_heap


class Cycle:
    def __init__(self) -> None:
        self.me = self


@pytest.fixture()
def clock(monkeypatch):
    """The hook installed for one test with a clock the test moves; the collector left as it was found."""
    gc.unfreeze()  # a freeze another test left would be read as this hook's
    now = [0.0]
    monkeypatch.setattr(heap_settle.settle, "clock", lambda: now[0])
    monkeypatch.setattr(heap_settle.settle, "swept", 0.0)
    heap_settle.install()
    heap_settle.install()  # idempotent
    try:
        yield now
    finally:
        gc.callbacks[:] = [cb for cb in gc.callbacks if cb is not heap_settle.settle]
        gc.unfreeze()


def test_a_full_pass_collects_the_garbage_then_freezes_what_survived(clock):
    assert gc.callbacks.count(heap_settle.settle) == 1
    garbage, live = Cycle(), Cycle()
    gone = weakref.ref(garbage)
    del garbage
    gc.collect()
    assert gone() is None  # the pass found the cycle before the freeze
    frozen = gc.get_freeze_count()
    assert frozen > 0
    later = [Cycle() for _ in range(100)]  # what came after the freeze: the next pass freezes it too
    gc.collect()
    assert gc.get_freeze_count() >= frozen + 100 and live.me is live and later[0].me is later[0]


def test_every_sweep_the_frozen_heap_is_let_go_and_its_garbage_found(clock):
    gc.collect()
    doomed = Cycle()
    gone = weakref.ref(doomed)
    gc.collect()  # frozen while alive
    del doomed  # garbage now, but frozen: no pass walks it
    gc.collect()
    assert gone() is not None
    clock[0] = heap_settle.SWEEP_S  # a sweep is due: this pass lets the heap go
    gc.collect()
    assert gc.get_freeze_count() == 0
    gc.collect()  # the next full pass walks everything, finds the cycle, and freezes again
    assert gone() is None and gc.get_freeze_count() > 0


def test_nothing_is_frozen_by_a_young_pass_or_while_a_decode_holds_the_librarys_freeze(clock):
    gc.collect(0)
    gc.collect(1)
    assert gc.get_freeze_count() == 0
    with frozen_heap():  # a decode: the library froze the heap, and unfreezes all of it at the end
        gc.unfreeze()  # (as if it had not frozen yet: the hook must still leave it alone while a decode runs)
        gc.collect()
        assert gc.get_freeze_count() == 0
    gc.collect()  # the decode ended: the next full pass freezes again
    assert gc.get_freeze_count() > 0


def test_importing_the_app_installs_nothing_its_launch_does(monkeypatch):
    import app

    assert heap_settle.settle not in gc.callbacks
    launched: list = []
    monkeypatch.setattr(app.demo, "launch", lambda **kwargs: launched.append(kwargs))
    try:
        app.serve(server_port=1)
        assert heap_settle.settle in gc.callbacks
        assert launched[0]["server_port"] == 1 and launched[0]["max_file_size"] == app.LAUNCH_KWARGS["max_file_size"]
    finally:
        gc.callbacks[:] = [cb for cb in gc.callbacks if cb is not heap_settle.settle]
        gc.unfreeze()
