"""Issue 38 row 6: a run whose generation length ends inside a block decodes the whole block, and the answer keeps
only the generation length's first tokens (s2d2/output.py): the Run tab's token strip greys the rest, each with a
label saying why, so the strip never shows as accepted what the answer leaves out."""
from __future__ import annotations

import re

from components.run import handlers as run_handlers
from components.run import knobs
from components.views.canvas import render_live
from components.views.token_state import PAST_LENGTH


def _knobs(**values):
    row = dict(zip(knobs.KNOB_NAMES, knobs.preset_values("sdar-config-a")))
    row.update(values)
    return [row[name] for name in knobs.KNOB_NAMES]


def _tokens(live: str) -> list[tuple[int, str]]:
    """(position, class list) of every token span of a live strip."""
    return [(int(pos), cls) for cls, pos in re.findall(r'<span class="(tok [^"]*)" data-pos="(\d+)"', live)]


def test_generation_length_1_greys_every_decoded_token_but_the_first():
    outs = list(run_handlers.run(knobs.EXAMPLE_PROMPTS[0], "tiny", *_knobs(gen_length=1, block_length=16)))
    done = outs[-1]
    assert done["run_ok"] is True and "generation length 1 was rounded up" in done["run_status"], done["run_status"]
    tokens = _tokens(done["live"])
    assert len(tokens) > 1  # the whole block was decoded
    first = min(pos for pos, _ in tokens)
    kept = [pos for pos, cls in tokens if "after-end" not in cls]
    assert kept == [first], tokens  # only the answer's one token is shown as kept
    assert all("past-length" in cls for pos, cls in tokens if pos != first)
    assert done["live"].count(f'aria-label="{PAST_LENGTH}"') == len(tokens) - 1


def test_the_strip_greys_from_the_end_of_the_generation_length_and_the_stop_token_still_wins():
    rows = [[10, "a", "accepted", 5], [11, "b", "accepted", 6], [12, "c", "accepted", 2], [13, "d", "accepted", 7]]
    live = render_live(rows, stop_ids=[2], keep=14)
    assert [("after-end" in c, "past-length" in c) for _, c in _tokens(live)] == [(False, False)] * 3 + [(True, False)]
    live = render_live(rows, stop_ids=[], keep=12)
    assert [("past-length" in c) for _, c in _tokens(live)] == [False, False, True, True]


def test_the_event_that_opens_replay_carries_the_runs_final_views_again():
    """Issue 38 row 9: a run's final update is recorded in the session ("run_final"), and final_views (the chained
    event that opens Replay) writes the same status, answer and strip again: a page that missed the run's last
    message still ends with them, never with Replay open beside a Run tab that says "Decoding…"."""
    outs = list(run_handlers.run(knobs.EXAMPLE_PROMPTS[0], "tiny", *_knobs(gen_length=8, block_length=4)))
    assert outs[0]["run_final"] is None  # the run's first update drops an earlier run's record
    done = outs[-1]
    assert done["run_status"].startswith("✓ Done in ") and done["output"]
    again = run_handlers.final_views(done["state"], done["run_ok"], done["run_final"])
    # the same status, except that Replay now shows the run (said only with the tab switch, which it rides with)
    shown = done["run_status"].replace(run_handlers.TO_REPLAY, run_handlers.IN_REPLAY)
    assert done["run_status"].endswith(run_handlers.TO_REPLAY) and shown.endswith(run_handlers.IN_REPLAY)
    assert again == {"run_status": shown, "output": done["output"], "live": done["live"]}
    assert len(str(done["run_final"])) < len(shown) + len(done["output"]) + 100  # the strip is not stored
    refused = list(run_handlers.run(knobs.EXAMPLE_PROMPTS[0], "tiny", *_knobs(seed=-1)))[-1]
    assert run_handlers.final_views(None, False, refused["run_final"]) == {
        "run_status": refused["run_status"], "output": "", "live": render_live([])}
    assert run_handlers.final_views(None, False, None) == {}  # before any run: nothing to write


def test_the_strip_greys_past_the_generation_length_while_the_run_decodes():
    outs = list(run_handlers.run(knobs.EXAMPLE_PROMPTS[0], "tiny", *_knobs(gen_length=1, block_length=16)))
    decoding = [o for o in outs if o.get("run_status", "").startswith("Decoding")]
    assert decoding, [o.get("run_status") for o in outs]
    tokens = _tokens(decoding[0]["live"])
    assert tokens and all("past-length" in cls for pos, cls in tokens if pos > min(p for p, _ in tokens))
