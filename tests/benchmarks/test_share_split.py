"""The split of one phase's handler time between the students and the other pages (benchmarks/share_split.py),
from a ledger as benchmarks/share_ledger.py writes it: only records inside the phase count, other pages are
grouped by unit and member, and a student's step is read as waiting, wall and CPU."""
from __future__ import annotations

from benchmarks.share_split import split_lines

CLASS = "ip:10.9.0.1"


def test_the_split_counts_the_phase_only_and_compares_a_flooder_page_with_a_students():
    ledger = {
        "charges": [[5.0, "a", CLASS, "a", 9.0],  # before the phase: not counted
                    [11.0, "a", CLASS, "a", 0.1], [12.0, "b", CLASS, "b", 0.3],
                    [13.0, "f", CLASS, "f", 0.6], [14.0, "f", CLASS, "f", 0.6],
                    [15.0, "idle", "ip:10.2.0.1", "idle", 0.0]],  # a page with nothing run in the phase: left out
        "events": [[11.0, "a", CLASS, "a", "step", 2.0, 0.5], [12.0, "b", CLASS, "b", "step", 4.0, 1.5],
                   [12.5, "b", CLASS, "b", "open_example", 9.0, 9.0],
                   [13.0, "f", CLASS, "f", "step", 0.0, 0.7], [14.0, "f", CLASS, "f", "step", 0.1, 0.7]],
        "dropped": 0}
    lines = split_lines(ledger, {"a", "b"}, 10.0, 20.0)
    assert len(lines) == 4 and "10.2.0.1" not in "".join(lines)
    assert lines[0].startswith("handler CPU over 10 s: 1.6 s in all (0.16 CPU s per s); students 0.4 s over 2 "
                               "pages, 3 events (a page: mean 0.20 s, max 0.30 s)")
    assert lines[1] == (f"  other pages of unit {CLASS}: 1 pages (1 members), 1.2 s (75% of all), 2 events; a page: "
                        "mean 1.20 s = 6.0 x a student's, the busiest 1.20 s")
    assert lines[-1] == ("students' steps (2): waiting in Gradio's line p50 4000 ms, p95 4000 ms; event wall (start "
                        "to result sent) p50 1500 ms, p95 1500 ms; handler CPU per event p50 300 ms, p95 300 ms")  # p50 of two: the second
    assert lines[-2] == ("  seconds of places held by step events: students 2, other pages 1; other pages' step events "
                        "2, waiting in line p50 100 ms, p95 100 ms, wall p50 700 ms, p95 700 ms; started while the "
                        "same page had one running: 0")


def test_a_step_that_starts_while_its_page_runs_one_is_counted():
    ledger = {"charges": [], "dropped": 0,
              "events": [[1.0, "f", "u", "f", "step", 0.0, 2.0], [2.0, "f", "u", "f", "step", 0.0, 0.5],
                         [3.5, "f", "u", "f", "step", 0.0, 0.5], [1.5, "g", "u", "g", "step", 0.0, 5.0]]}
    assert split_lines(ledger, set(), 0.0, 10.0)[-2].endswith("started while the same page had one running: 1")
