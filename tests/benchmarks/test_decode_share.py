"""Figure (c)'s decode half (benchmarks/decode_share.py) counts only what finished inside the window, cuts place
holdings at its ends, and judges the class against 45 % (pure parts; the presses themselves need a server)."""
from __future__ import annotations

import pytest

from benchmarks import decode_share as ds
from benchmarks import load_test, one_address


def tally_of(finished: list[tuple[str, float, float]]) -> ds.Tally:
    t = ds.Tally()
    t.finished = finished
    t.sessions = {ds.CLASS: {"s1", "s2"}, ds.STRANGER: {"x1"}}
    return t


def test_only_runs_finished_inside_the_window_count() -> None:
    finished = [("class", 9.9, 1.0), ("class", 10.0, 1.0), ("stranger", 15.0, 2.0), ("class", 19.9, 1.0),
                ("stranger", 20.0, 1.0), ("stranger", 25.0, 1.0)]
    assert ds.window_counts(finished, 10.0, 20.0) == {"class": 2, "stranger": 1}


def test_place_seconds_cut_each_run_at_the_window_and_skip_other_events() -> None:
    events = [[5.0, "s1", "u", "s1", "run", 0.0, 10.0],   # 10..15 inside
              [18.0, "s2", "u", "s2", "run", 0.0, 4.0],   # 18..20 inside
              [12.0, "x1", "o", "x1", "run", 0.0, 3.0],   # 12..15
              [12.0, "x1", "o", "x1", "step", 0.0, 3.0],  # not a decode
              [12.0, "zz", "o", "zz", "run", 0.0, 3.0]]   # nobody's page
    held = ds.place_seconds(events, {"class": {"s1", "s2"}, "stranger": {"x1"}}, 10.0, 20.0)
    assert held == pytest.approx({"class": 7.0, "stranger": 3.0}, abs=1e-12)


def test_the_verdict_follows_place_seconds_when_the_ledger_has_them() -> None:
    tally = tally_of([("class", 11.0, 1.0), ("stranger", 12.0, 1.0), ("stranger", 13.0, 1.0)])
    by_runs = ds.decode_share_lines(tally, 10.0, 20.0)
    assert "class share 33.3 %" in by_runs[0] and ": FAIL;" in by_runs[-1]
    by_seconds = ds.decode_share_lines(tally, 10.0, 20.0, {"class": 9.0, "stranger": 11.0})
    assert "class share 45.0 %" in by_seconds[-2] and by_seconds[-1].endswith("PASS")
    assert ds.share(0, 0) == 0.0


def test_the_stranger_tabs_option_is_bounded(monkeypatch, capsys) -> None:
    seen = []
    monkeypatch.setattr(one_address, "run_one_address", lambda args: seen.append(args) or 0)
    load_test.main(["--classroom", "--one-address", "--figures", "r"])
    assert seen[0].stranger_tabs == 16
    with pytest.raises(SystemExit):
        load_test.main(["--classroom", "--one-address", "--stranger-tabs", "0"])
    assert "--stranger-tabs" in capsys.readouterr().err.splitlines()[-1]
