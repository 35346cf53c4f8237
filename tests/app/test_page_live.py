"""The Run's live output drawn by the page while it decodes (components/run/js/live_tokens.js) is the server's
render_live (components/views/canvas.py) to the character, under Node: glyphs, greying after the stop token and past
the generation length, escaping and the visible forms of odd characters."""
from __future__ import annotations

import pytest

from components.serve.page_modules import RUN_JS
from components.views.canvas import render_live
from components.views.token_state import AFTER_END, PAST_LENGTH, STATES
from tests.support.node_runner import run_module

pytestmark = pytest.mark.slow  # a Node process

LIVE = {"states": {k: list(v) for k, v in STATES.items()}, "after_end": AFTER_END, "past_length": PAST_LENGTH}
CASES = [
    ([], [], None),
    ([[12, " The", "accepted", 101], [10, "<b>&'\"", "resampled", 5], [11, "\n", "threshold", 7]], [2], 40),
    ([[20, "a", "accepted", 1], [21, "<|end|>", "fallback", 2], [22, "\t tail", "hiconf_extra", 9]], [2, 0], None),
    ([[30, "x" * 60, "ar", 4], [31, "   ", "ratio_extra", 8], [32, "", "edited", 3], [33, "\u200b\x07", "ar_seed", 6],
      [34, "q", "unknown-how", 11]], [], 33),
]


def test_the_page_draws_the_live_output_as_the_server_does():
    payload = [{"rows": rows, "live": {**LIVE, "stop_ids": stops, "keep": keep}} for rows, stops, keep in CASES]
    got = run_module(RUN_JS / "live_tokens.js", "output = input.map((c) => m.renderLive(c.rows, c.live));", payload)
    for (rows, stops, keep), html in zip(CASES, got):
        assert html == render_live(rows, stop_ids=stops, keep=keep), rows
