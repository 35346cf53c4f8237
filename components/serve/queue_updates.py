"""How often Gradio tells waiting visitors their place in line: every S2D2_QUEUE_UPDATE_S seconds, not at every
event that starts.

Gradio's default ("auto") sends every waiting event of a line a fresh place-in-line message each time any event of
that line starts, so a line of n waiting events costs n messages per start: beside a flooder keeping a few dozen
steps waiting, hundreds of messages a second, each a separate write on the event loop (where every refusal, every
result and every new page is handled too) and each a chance for a handler thread to keep the interpreter
(components/serve/switch_interval.py). Sent at a fixed interval instead, a line of n costs n messages per interval,
and a visitor's place still updates (the Run's wait line, components/run/wait_line.py, reads it) within that
interval; an event that joins is told its place at once, as before.

S2D2_QUEUE_UPDATE_S: seconds between updates, default 1, within 0..60; 0 keeps Gradio's own rule (at every start).
"""
from __future__ import annotations

from typing import Literal, Union

from components.serve.settings import env_number


def status_update_rate() -> Union[float, Literal["auto"]]:
    """Gradio's `queue(status_update_rate=...)`: S2D2_QUEUE_UPDATE_S seconds, or "auto" for 0."""
    seconds = env_number("S2D2_QUEUE_UPDATE_S", 1.0, 0.0, 60.0)
    return seconds if seconds > 0 else "auto"
