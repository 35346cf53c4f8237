"""The load benchmarks' server on its own core and their clients on the others (`load_test --pin`), so that a figure
measures the server and not the 30 client threads and flooders that the benchmark itself runs on the same machine.

On a Space the visitors' browsers run elsewhere; here they share the server's cores, and a step's wait included
their Python. Pinning gives the server process (every thread it starts inherits the set) the first core the
benchmark may use and the benchmark's own process, its threads and the flooders it spawns the rest. It says nothing
about other programs on the machine: the printed load average does.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Optional


class Pinning:
    """Which cores the server gets and which the clients get (both empty: not pinned, and why)."""

    def __init__(self, server: set[int], clients: set[int], why: str = "") -> None:
        self.server, self.clients, self.why = server, clients, why

    def __bool__(self) -> bool:
        return bool(self.server and self.clients)

    def line(self) -> str:
        """The header's words for it."""
        if not self:
            return f"not pinned ({self.why})"
        return f"pinned: server on CPU {_cores(self.server)}, clients on CPU {_cores(self.clients)}"


def plan(wanted: Optional[bool], cores: Optional[set[int]] = None) -> Pinning:
    """The pinning for `--pin` (True), `--no-pin` (False) or neither (None: on when at least two cores are usable):
    the lowest usable core for the server, the others for the clients."""
    usable = sorted(cores if cores is not None else os.sched_getaffinity(0))
    if wanted is False:
        return Pinning(set(), set(), "--no-pin")
    if len(usable) < 2:
        return Pinning(set(), set(), f"{len(usable)} usable core")
    return Pinning({usable[0]}, set(usable[1:]))


def pin_clients(pinning: Pinning) -> None:
    """Move this process, every thread it has now, and so everything it starts later, onto the clients' cores."""
    if not pinning:
        return
    for task in Path("/proc/self/task").iterdir():
        set_thread_cores(int(task.name), pinning.clients)


def set_thread_cores(thread_id: int, cores: set[int]) -> None:
    """Put one thread of this process on `cores`; a thread that ended since it was listed needs nothing."""
    try:
        os.sched_setaffinity(thread_id, cores)
    except ProcessLookupError:
        pass


def server_preexec(pinning: Pinning):  # type: ignore[no-untyped-def]
    """A `preexec_fn` putting the server process on its core before it runs (None when not pinned)."""
    if not pinning:
        return None
    cores = set(pinning.server)
    return lambda: os.sched_setaffinity(0, cores)


def _cores(cores: set[int]) -> str:
    return ",".join(str(c) for c in sorted(cores))
