"""benchmarks/against_tree.py: this tree's engines against another checkout's thread engine, each measurement a
subprocess in its own tree; the ratios are the medians of the rounds' own ratios over the batch-first engine."""
from __future__ import annotations

import json
from typing import Any

import pytest

from benchmarks import against_tree


def fake_round(other: float, threads: float, first: float, outputs: Any = ((1, 2), (3,))) -> dict[str, Any]:
    return {"other threads": {"us": other, "outputs": [list(o) for o in outputs]},
            "threads": {"us": threads, "outputs": [[1, 2], [3]]},
            "batch-first": {"us": first, "outputs": [[1, 2], [3]]}}


def test_the_ratios_are_medians_of_each_rounds_own_ratio_and_same_is_the_worst_round():
    rounds = [fake_round(400, 300, 100), fake_round(900, 600, 100), fake_round(500, 200, 50, ((1, 2), (4,)))]
    s = against_tree.summarize(rounds)
    assert s["us_median"] == pytest.approx({"other threads": 500, "threads": 300, "batch-first": 100}, rel=1e-12)
    # the other tree's rounds: 4, 9, 10 (median 9), never 500 / 100 = 5
    assert s["x other threads"] == pytest.approx({"median": 9.0, "min": 4.0, "max": 10.0}, rel=1e-12)
    assert s["x threads"] == pytest.approx({"median": 4.0, "min": 3.0, "max": 6.0}, rel=1e-12)
    assert s["same"] == 1


def test_a_real_run_against_this_very_tree(tmp_path, capsys):
    out = tmp_path / "rows.json"
    against_tree.main(["--tree", str(against_tree.THIS_TREE), "--arms", "aligned:sdar-config-b", "--rounds", "1",
                       "--batch", "4", "--n", "4", "--gen-length", "16", "--decodes", "1", "--out", str(out)])
    (row,) = json.loads(out.read_text())
    assert row["arm"] == "aligned:sdar-config-b"
    assert set(row["us"]) == {"other threads", "threads", "batch-first"}
    assert all(v[0] > 0 for v in row["us"].values())
    assert row["same"] == 4  # one tree: the thread engine and the batch-first engine decode the same tokens
    assert "aligned:sdar-config-b" in capsys.readouterr().out


def test_without_a_tree_it_says_what_is_missing(capsys):
    with pytest.raises(SystemExit):
        against_tree.main([])
    assert "--tree is required" in capsys.readouterr().err
