"""benchmarks/event_split.py: the table of where a step's wall went counts only the events named, in the window,
of the pages given, and its percentiles follow benchmarks/percentiles.py."""
from __future__ import annotations

from benchmarks.event_split import split_table


def event(t: float, api: str, session: str, wall: float) -> dict:
    return {"t": t, "api": api, "session": session, "wait": 0.0, "wall": wall, "pre": 0.0, "call": 0.0,
            "post": 0.0, "rest": wall, "hops": 1, "hop_wait": 0.0, "hop_run": 0.0}


def test_the_table_counts_only_the_named_events_of_the_window_and_pages():
    events = [event(1, "step", "a", 0.1), event(2, "step", "b", 0.2), event(3, "open_example", "a", 9.0),
              event(9, "step", "a", 5.0)]
    lines = split_table(events, "step", 0, 5, {"a", "b"})
    assert lines[0] == "2 events named 'step' from the students' pages"
    wall = next(line for line in lines if line.strip().startswith("wall"))
    assert wall.split() == ["wall", "p50", "0.200", "s", "p95", "0.200", "s"]
    assert split_table(events, "step", 0, 5, {"a"})[0] == "1 events named 'step' from the students' pages"
    assert split_table(events, "step")[0] == "3 events named 'step'"
