"""benchmarks/batch_first.py, part `host`: the engines run in interleaved rounds after an untimed warm-up round,
and the figure printed per arm is the median of the rounds' own ratios (threads over batch-first, each round's CPU
time per sequence-forward), with the min-max of those same ratios."""
from __future__ import annotations

import json
from typing import Any

import pytest

from benchmarks import batch_first
from benchmarks.percentiles import pct

SMALL = ["--part", "host", "--batch", "4", "--n", "4", "--gen-length", "32", "--rounds", "3", "--min-cpu", "0"]


def fake_round(threads_cpu: float, first_cpu: float, seq_forwards: int = 100) -> dict[str, dict[str, Any]]:
    def one(cpu: float) -> dict[str, Any]:
        return {"cpu_s": cpu, "seq_forwards": seq_forwards, "outputs": [[1, 2], [3]], "sharing": 1.0, "forwards": 1}
    return {"threads": one(threads_cpu), "batch-first": one(first_cpu)}


def test_the_ratio_is_the_median_of_the_rounds_ratios_not_a_ratio_of_medians():
    # the rounds' ratios are 2, 10, 2 (median 2); the engines' medians, 400 and 100, would give 4
    rounds = [fake_round(0.02, 0.01), fake_round(0.05, 0.005), fake_round(0.04, 0.02)]
    s = batch_first.summarize(rounds)
    assert s["cpu_us"]["threads"] == pytest.approx([200.0, 500.0, 400.0], rel=1e-12)
    assert s["cpu_us_median"] == pytest.approx({"threads": 400.0, "batch-first": 100.0}, rel=1e-12)
    assert s["ratios"] == pytest.approx([2.0, 10.0, 2.0], rel=1e-12)
    assert (s["x_median"], s["x_min"], s["x_max"]) == pytest.approx((2.0, 2.0, 10.0), rel=1e-12)
    assert s["x_best"] == pytest.approx(200.0 / 50.0, rel=1e-12)  # each engine's least round: rounds 1 and 2
    assert s["same"] == 2


def test_same_counts_the_worst_round_and_a_threads_only_arm_has_no_ratio():
    rounds = [fake_round(0.02, 0.01), fake_round(0.02, 0.01)]
    rounds[1]["batch-first"]["outputs"] = [[1, 2], [4]]
    assert batch_first.summarize(rounds)["same"] == 1
    alone = batch_first.summarize([{"threads": r["threads"]} for r in rounds])
    assert "ratios" not in alone and alone["cpu_us_median"] == pytest.approx({"threads": 200.0}, rel=1e-12)


def test_a_real_run_interleaves_the_engines_and_reports_the_ratio_of_the_rounds_it_lists(tmp_path, capsys,
                                                                                         monkeypatch):
    calls: list[str] = []
    real = batch_first.decode

    def logged(model, prompts, cfg, batch, engine):
        calls.append(engine)
        return real(model, prompts, cfg, batch, engine)

    monkeypatch.setattr(batch_first, "decode", logged)
    out = tmp_path / "rows.json"
    batch_first.main(SMALL + ["--out", str(out)])
    rows = json.loads(out.read_text())
    printed = capsys.readouterr().out.splitlines()
    assert [(r["alignment"], r["arm"]) for r in rows] == batch_first.HOST_ARMS
    # per arm with both engines: a warm-up round and 3 timed ones, each threads then batch-first
    covered = [r for r in rows if "ratios" in r]  # every arm: right-shifted, the options, editing, the D2F pipeline,
    n = len(batch_first.HOST_ARMS)  # the baselines' per-row rules and sub-blocks
    assert len(covered) == len(rows) == n == 14 and len(calls) == n * 2 * 4
    assert calls[:8] == ["threads", "batch-first"] * 4
    for r in covered:
        us = r["cpu_us"]
        assert len(us["threads"]) == len(us["batch-first"]) == 3
        ratios = [t / b for t, b in zip(us["threads"], us["batch-first"])]
        assert r["ratios"] == pytest.approx(ratios, rel=1e-12)
        assert (r["x_median"], r["x_min"], r["x_max"]) == pytest.approx(
            (pct(ratios, 0.5), min(ratios), max(ratios)), rel=1e-12)
        assert r["same"] == 4  # every sequence's output is its thread-engine output, every round
        line = next(p for p in printed if p.split()[:2] == [r["alignment"], r["arm"]])
        best = min(us["threads"]) / min(us["batch-first"])
        assert r["x_best"] == pytest.approx(best, rel=1e-12)
        assert f"{r['x_median']:.2f}" in line.split() and f"{r['x_min']:.2f}-{r['x_max']:.2f}" in line
        assert f"{best:.2f}" in line.split()
        assert line.split()[-2:] == ["4/4", "1/1"] and r["decodes_per_round"] == {"threads": 1, "batch-first": 1}


def test_a_short_engine_repeats_its_decodes_to_the_cpu_asked_and_its_figure_stays_per_sequence_forward(monkeypatch):
    cpu = {"threads": 0.1, "batch-first": 0.02}
    calls: list[str] = []

    def fake(model, prompts, cfg, batch, engine):
        calls.append(engine)
        return {"wall_s": 2 * cpu[engine], "cpu_s": cpu[engine], "seq_forwards": 50, "forwards": 5,
                "sharing": 10.0, "outputs": [[7]]}

    monkeypatch.setattr(batch_first, "decode", fake)
    monkeypatch.setattr(batch_first, "engines", lambda cfg, model: ["threads", "batch-first"])
    got, times = batch_first.host_rounds(None, [[1]], None, 1, rounds=2, min_cpu=0.25)
    assert times == {"threads": 3, "batch-first": 13}  # ceil(0.25 / 0.1), ceil(0.25 / 0.02)
    assert calls == ["threads", "batch-first"] + (["threads"] * 3 + ["batch-first"] * 13) * 2
    assert got[1]["batch-first"]["seq_forwards"] == 13 * 50
    assert got[1]["batch-first"]["cpu_s"] == pytest.approx(13 * 0.02, rel=1e-12)
    s = batch_first.summarize(got)
    assert s["cpu_us_median"] == pytest.approx({"threads": 2000.0, "batch-first": 400.0}, rel=1e-12)
    assert s["ratios"] == pytest.approx([5.0, 5.0], rel=1e-12)


def test_arms_picks_the_host_arms_by_name_and_refuses_an_unknown_one(tmp_path, capsys):
    out = tmp_path / "rows.json"
    batch_first.main(SMALL + ["--rounds", "1", "--arms", "dynamic-baseline+extras", "ar", "--out", str(out)])
    rows = json.loads(out.read_text())
    assert [r["arm"] for r in rows] == ["ar", "dynamic-baseline+extras"]  # in the table's order
    assert all(r["same"] == 4 for r in rows)
    with pytest.raises(SystemExit):
        batch_first.main(SMALL + ["--arms", "sdar-config-z"])
    assert "--arms: unknown sdar-config-z" in capsys.readouterr().err
