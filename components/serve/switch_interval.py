"""How soon Gradio's event loop gets the interpreter back from a handler thread: the interpreter's switch interval.

Gradio's event loop (every request, every refusal, every result streamed to a page) runs on one thread, and the
event handlers (replay steps, views, uploads) run on others, all sharing one interpreter lock. The loop gives the
lock up at every socket write; to take it back it must wait until the running handler's thread is asked to let go,
which Python does only after the switch interval (`sys.setswitchinterval`, 5 ms by default). A loop that writes a
few hundred answers a second beside one busy handler thus spends most of its time waiting (measured beside a heavy-
step flooder: 62 % of the loop's busy samples were in a socket write, benchmarks/loop_sampler.py), and every
student's step waits behind it. A shorter interval hands the lock back sooner; the handlers lose a little to more
frequent switches, which matters less than the loop that serves everyone.

S2D2_SWITCH_INTERVAL_MS (default 1, within 0.1..50) sets it; app.py applies it once at start.
"""
from __future__ import annotations

import sys

from components.serve.settings import env_number


def switch_interval_s() -> float:
    """S2D2_SWITCH_INTERVAL_MS in seconds: how long a thread may hold the interpreter while another waits for it."""
    return env_number("S2D2_SWITCH_INTERVAL_MS", 1.0, 0.1, 50.0) / 1e3


def apply_switch_interval() -> float:
    """Set the interpreter's switch interval from S2D2_SWITCH_INTERVAL_MS; returns the seconds set."""
    seconds = switch_interval_s()
    sys.setswitchinterval(seconds)
    return seconds
