"""Each visitor's share of the server's Python time, so one visitor's events cannot take the interpreter from the rest.

The app's event handlers (replay steps, views, uploads, the tour) run in one Python process, and one interpreter
runs Python on one core at a time. The per-request bounds (components/serve/client_limits.py) cap how many events a
visitor sends, not what each costs: a step of the heaviest trace an upload may hold costs about 80 ms, so twenty of
them a second would be more than the whole interpreter.

So the event guard (components/serve/event_guard.py) measures the CPU time each handler's own thread spent
(`time.thread_time`: time waiting for the interpreter or for the machine is not charged, so a busy machine charges
the same) and charges it to the visitor (components/serve/identity.py's key). A visitor's allowance is a bucket of
CPU seconds, full at S2D2_CLIENT_CPU_BURST_S and refilled at S2D2_CLIENT_CPU_SHARE seconds per second. A visitor
whose bucket is empty is refused a new event, with one line saying when to try again, but only while another
visitor has an event waiting or running: a visitor alone on the server is never slowed, however much they scrub.

Decodes (Run, Compare, the what-if re-run) are not charged: each visitor has one at a time in its own slot
(components/serve/gpu_slot.py). Stop is never refused.
"""
from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from typing import Callable, Optional

from components.serve.client_limits import MAX_CLIENTS
from components.serve.settings import env_number

OVER_SHARE = ("⏳ You have used your share of the server's time for now, and other visitors are waiting: try again "
              "in about {seconds} s.")


def client_cpu_share() -> float:
    """S2D2_CLIENT_CPU_SHARE: handler CPU seconds per second one visitor earns back, default 0.1 (a tenth of a core)."""
    return env_number("S2D2_CLIENT_CPU_SHARE", 0.1, 0.01, 64)


def client_cpu_burst_s() -> float:
    """S2D2_CLIENT_CPU_BURST_S: handler CPU seconds one visitor may spend at once, default 5."""
    return env_number("S2D2_CLIENT_CPU_BURST_S", 5, 0.1, 3600)


class CpuShare:
    """Buckets of handler CPU seconds per client. A bucket starts full (`burst()` seconds), refills at `share()`
    seconds per second, and never owes more than one full bucket, so a visitor waits at most burst / share seconds
    (50 s by default). `clock` is injectable (tests move it instead of sleeping)."""

    def __init__(self, share: Callable[[], float] = client_cpu_share, burst: Callable[[], float] = client_cpu_burst_s,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._share, self._burst, self.clock = share, burst, clock
        self._buckets: "OrderedDict[str, tuple[float, float]]" = OrderedDict()
        self._lock = threading.Lock()

    def charge(self, client: str, seconds: float, now: Optional[float] = None) -> None:
        """Take `seconds` of CPU from `client`'s bucket."""
        with self._lock:
            top, tokens, now = self._refilled(client, now)
            self._buckets[client] = (max(-top, tokens - max(0.0, seconds)), now)
            while len(self._buckets) > MAX_CLIENTS:  # the quietest clients are forgotten: their buckets were full
                self._buckets.popitem(last=False)

    def wait_s(self, client: str, now: Optional[float] = None) -> float:
        """Seconds until `client`'s bucket holds CPU time again; 0 when it holds some now."""
        with self._lock:
            _, tokens, now = self._refilled(client, now)
            self._buckets[client] = (tokens, now)
            return 0.0 if tokens > 0 else max(1e-9, -tokens / self._share())

    def refusal(self, client: str, others_waiting: Callable[[], bool]) -> Optional[str]:
        """The line that refuses `client` a new event, or None: refused only with an empty bucket while
        `others_waiting()` (asked only then: it reads the queue)."""
        wait = self.wait_s(client)
        if wait <= 0 or not others_waiting():
            return None
        return OVER_SHARE.format(seconds=max(1, math.ceil(wait)))

    def _refilled(self, client: str, now: Optional[float]) -> tuple[float, float, float]:
        now = self.clock() if now is None else now
        top = self._burst()
        tokens, last = self._buckets.pop(client, (top, now))
        return top, min(top, tokens + max(0.0, now - last) * self._share()), now


CPU_SHARE = CpuShare()
