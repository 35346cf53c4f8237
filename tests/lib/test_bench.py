"""s2d2.sweeps.bench / .grid: a tiny grid on a tiny random model, resume, results schema, Pareto, CLI messages."""
from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import pytest

from tests.support.lanes import tiny_with_tokenizer
from s2d2.sweeps.bench import run_grid, write_results
from s2d2.sweeps.shards import (LEGACY_DIR, RowCounter, RowWriter, parse_rows, plan_items, rank_file, read_all_rows,
                                shard)
from s2d2.sweeps.stats import wilson_interval
from s2d2.sweeps.grid import (COLUMNS, add_paired_tests, add_speedups, default_grid, headline, load_grid,
                        pareto_frontier, quick_grid, readme_table, validate_results)
from s2d2.tasks.sets import load_task


@pytest.fixture(scope="module")
def model():
    return tiny_with_tokenizer()


def _counting():
    import s2d2

    calls = []

    def generate(*args, **kwargs):
        calls.append((args[2].method, kwargs["seed"]))
        return s2d2.generate(*args, **kwargs)

    return generate, calls


def _science(cells):
    """Everything in a results row that must not depend on timing."""
    timing = {"wall_per_token", "speedup_wall_vs_ar", "speedup_wall_vs_baseline"}
    return [{k: v for k, v in c.items() if k not in timing} for c in cells]


def test_tiny_grid_runs_resumes_and_writes_a_stable_schema(model, tmp_path, capsys):
    task = load_task("arithmetic", 3)
    cells = quick_grid()[:3]  # ar, dynamic τ 0.9, dynamic τ 0.7
    cells.append(load_grid("quick")[3])  # sdar-config-a
    gen, calls = _counting()
    rows = run_grid(model, task, cells, tmp_path, gen_length=8, generate=gen, progress=False)
    assert len(calls) == 4 * 3 and {seed for _, seed in calls} == {0, 1, 2}  # problem i: seed + i in every cell
    assert [r["name"] for r in rows] == [c.name for c in cells]
    for r in rows:
        assert set(r) == set(COLUMNS) | {"config", "correct_by_problem", "equals_ar_by_problem"} and r["n"] == 3
        assert 0.0 <= r["accuracy"] <= 1.0 and r["nfe_per_token"] > 0 and r["wall_per_token"] > 0
        assert r["accuracy_ci_low"] <= r["accuracy"] <= r["accuracy_ci_high"]
        assert r["accuracy"] == r["correct_by_problem"].count("1") / 3
    ar = rows[0]
    assert ar["method"] == "ar" and ar["speedup_nfe_vs_ar"] == pytest.approx(1.0) and ar["p_vs_ar"] is None
    assert rows[3]["method"] == "s2d2" and rows[3]["verify_rate"] is not None and rows[3]["p_vs_ar"] is not None
    # resume: a second run recomputes nothing and gives the same numbers
    gen2, calls2 = _counting()
    again = run_grid(model, task, cells, tmp_path, gen_length=8, generate=gen2, progress=False)
    assert calls2 == [] and again == rows
    run_grid(model, task, cells, tmp_path, gen_length=8, generate=gen2, progress=True)  # and says so
    assert f"12 of 12 runs already in {tmp_path}: nothing to decode" in capsys.readouterr().err
    # an interrupted write (last line torn) recomputes only that problem
    path = rank_file(tmp_path, 0)
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:-1]) + "\n{\"cell\": \"x\", \"i\": 2, \"torn")
    gen3, calls3 = _counting()
    third = run_grid(model, task, cells, tmp_path, gen_length=8, generate=gen3, progress=False)
    assert calls3 == [("s2d2", 2)] and _science(third) == _science(rows)
    assert len(list(parse_rows(path.read_text()))) == 12
    paths = write_results(tmp_path, again, {"model": "tiny", "task": "arithmetic", "n": 3})
    with paths["csv"].open() as fh:
        header, *body = list(csv.reader(fh))
    assert tuple(header) == COLUMNS and len(body) == 4
    data = validate_results(json.loads(paths["json"].read_text()))
    assert paths["md"].read_text().startswith("| | cell | accuracy [95 % CI]")
    assert data["cells"][0]["name"] == "ar"
    assert set(paths) == {"json", "csv", "md"}  # the plots are the app's (python -m components.sweep.panel)


def test_a_rerun_resumes_from_rank_files_of_any_world_size_and_the_old_layout(model, tmp_path):
    task = load_task("arithmetic", 4)
    cells = [load_grid("quick")[0], load_grid("quick")[3]]  # ar, sdar-config-a
    first = run_grid(model, task, cells, tmp_path, gen_length=8, progress=False)
    rows = list(parse_rows(rank_file(tmp_path, 0).read_text()))
    assert len(rows) == 8 and len({(r["cell"], r["i"]) for r in rows}) == 8
    # As if a 4-rank run was killed: ranks 0, 1 and 3 wrote their round-robin shares, rank 3 died mid-line,
    # and rank 2's file never made it; the AR cell's rows are still in the single-process layout of before.
    rank_file(tmp_path, 0).unlink()
    legacy = tmp_path / LEGACY_DIR
    legacy.mkdir()
    ar_key = rows[0]["cell"]
    (legacy / f"{ar_key}.jsonl").write_text("".join(json.dumps({k: v for k, v in r.items() if k != "cell"}) + "\n"
                                                    for r in rows if r["cell"] == ar_key))
    s2d2_rows = [r for r in rows if r["cell"] != ar_key]
    for rank in (0, 1, 3):
        with RowWriter(rank_file(tmp_path, rank)) as w:
            for r in s2d2_rows[rank::4]:
                w.write(r)
    with rank_file(tmp_path, 3).open("a") as fh:
        fh.write('{"cell": "%s", "i": 2, "nfe"' % s2d2_rows[0]["cell"])
    assert sorted(i for (k, i) in read_all_rows(tmp_path) if k != ar_key) == [0, 1, 3]
    gen, calls = _counting()
    again = run_grid(model, task, cells, tmp_path, gen_length=8, generate=gen, progress=False)
    assert calls == [("s2d2", 2)]  # only rank 2's lost item
    assert _science(again) == _science(first)


def test_plan_and_shards_cover_every_missing_item_once():
    keys = ["a", "b", "c"]
    done = {("a", 0), ("b", 3), ("c", 1)}
    plan = plan_items(keys, 4, done)
    assert plan[:3] == [(0, 1), (0, 2), (0, 3)] and len(plan) == 12 - 3
    for world in (1, 2, 3, 5, 16):
        shards = [shard(plan, r, world) for r in range(world)]
        flat = sorted(x for s in shards for x in s)
        assert flat == sorted(plan) and len(flat) == len(set(flat))
        assert max(map(len, shards)) - min(map(len, shards)) <= 1
    assert shard(plan, 1, 2) == plan[1::2]


def test_row_counter_counts_complete_rows_only(tmp_path):
    with RowWriter(rank_file(tmp_path, 0)) as w:
        w.write({"cell": "a", "i": 0})
    counter = RowCounter(tmp_path)  # rows already there are not progress
    assert counter.poll() == 0
    with RowWriter(rank_file(tmp_path, 0)) as w:
        w.write({"cell": "a", "i": 1})
    with rank_file(tmp_path, 5).open("a") as fh:
        fh.write('{"cell": "a", "i": 2}\n{"cell": "a", "i"')  # a new rank file, its second row half-written
    assert counter.poll() == 2
    with rank_file(tmp_path, 5).open("a") as fh:
        fh.write(': 3}\nnot json\n')
    assert counter.poll() == 1 and counter.poll() == 0


def test_pareto_frontier_on_hand_made_points():
    pts = [(1.0, 0.5), (2.0, 0.7), (1.5, 0.4), (3.0, 0.7), (0.5, 0.1), (4.0, 0.9), (2.0, 0.6), (float("nan"), 1.0)]
    assert pareto_frontier(pts) == [4, 0, 1, 5]
    assert pareto_frontier([]) == []


def test_speedup_vs_the_fewest_forwards_baseline_at_equal_or_better_accuracy():
    def cell(name, method, acc, nfe, wall):
        return {"name": name, "method": method, "accuracy": acc, "nfe_per_token": nfe, "wall_per_token": wall}

    cells = add_speedups([cell("ar", "ar", 0.8, 1.0, 0.10), cell("b1", "dynamic", 0.8, 0.5, 0.06),
                          cell("b2", "dynamic", 0.6, 0.3, 0.03), cell("s", "s2d2", 0.75, 0.4, 0.04)])
    s = cells[3]
    assert s["speedup_wall_vs_ar"] == pytest.approx(2.5) and s["speedup_nfe_vs_ar"] == pytest.approx(2.5)
    assert s["baseline_ref"] == "b1" and s["speedup_wall_vs_baseline"] == pytest.approx(1.5)
    cells = add_speedups(cells + [cell("s2", "s2d2", 0.8, 0.45, 0.05)])  # as accurate as b1, and faster
    assert [(r, c["name"]) for r, c in headline(cells)] == [
        ("AR", "ar"), ("best dynamic-threshold baseline", "b1"), ("best S2D2", "s2")]
    table = readme_table({"meta": {"model": "tiny", "task": "arithmetic", "n": 4}, "cells": cells})
    assert "| best S2D2 | `s2` | 0.8 | 0.45 | 2× | 1.2× | – | – | – |" in table  # no n, no per-problem results
    # With n and per-problem results: Wilson intervals, and McNemar's p on the same 10 problems
    bits = {"ar": "1111111110", "b1": "1111111101", "b2": "1100000000", "s": "1111111000", "s2": "0111111111"}
    fresh = [{**cell(c["name"], c["method"], 0, c["nfe_per_token"], c["wall_per_token"]), "n": 10,
              "accuracy": bits[c["name"]].count("1") / 10, "correct_by_problem": bits[c["name"]]} for c in cells]
    cells = {c["name"]: c for c in add_paired_tests(add_speedups(fresh))}
    assert cells["s"]["baseline_ref"] == "b1" and cells["s"]["p_vs_baseline"] == pytest.approx(0.5)  # 2 vs 0
    assert cells["b2"]["p_vs_ar"] == pytest.approx(2 / 2**7)  # AR alone right on 7 problems, b2 alone on none
    assert cells["s2"]["p_vs_ar"] == 1.0 and cells["s2"]["p_vs_baseline"] == 1.0 and cells["ar"]["p_vs_ar"] is None
    table = readme_table({"meta": {"n": 10}, "cells": list(cells.values())})
    assert "| AR | `ar` | 0.9 [0.596, 0.982] | 1 | 1× | 0.6× | – | 1 | – |" in table
    assert "| best S2D2 | `s2` | 0.9 [0.596, 0.982] | 0.45 | 2× | 1.2× | 1 | 1 | – |" in table
    assert "Wilson 95 %" in table and "McNemar" in table


def test_grids_validate_and_bad_grids_say_why(tmp_path):
    names = [c.name for c in default_grid()]
    assert names[0] == "ar" and len(set(names)) == len(names)
    assert {"dynamic-tau0.95-b4", "dynamic-tau0.5-b16", "sdar-config-a", "sdar-config-b"} <= set(names)
    good = tmp_path / "g.json"
    good.write_text(json.dumps({"cells": [{"name": "x", "preset": "ar"}, {"preset": "sdar-config-a",
                                                                            "config": {"score_threshold": 1.5}}]}))
    assert [c.config.score_threshold for c in load_grid(str(good))][1] == 1.5
    bad = tmp_path / "b.json"
    bad.write_text(json.dumps([{"preset": "sdar-config-a", "config": {"block_length": 0}}]))
    with pytest.raises(ValueError, match="cell 0: block_length"):
        load_grid(str(bad))
    with pytest.raises(ValueError, match="neither a named grid"):
        load_grid("nope")


def test_cli_messages_are_one_line(tmp_path, capsys, monkeypatch):
    from s2d2.__main__ import main

    pytest.importorskip("s2d2.sweeps.bench")
    assert main(["bench", "--grid", "nope", "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip().startswith("error: --grid")
    for args, start in ((["--problems", "0"], "error: --problems"), (["--n", "0"], "error: --problems"),
                        (["--task", "nope"], "error: --task"), (["--threads", "0"], "error: --threads"),
                        (["--task", "jsonl:/nonexistent.jsonl"], "error: --task jsonl:/nonexistent.jsonl: no such")):
        assert main(["bench", "--grid", "quick", "--out", str(tmp_path), *args]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith(start) and "\n" not in err, err
    monkeypatch.setitem(sys.modules, "datasets", None)  # not installed, whatever this machine has
    assert main(["bench", "--task", "gsm8k", "--grid", "quick", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "datasets" in err and "--task jsonl:" in err and "\n" not in err and "Traceback" not in err
    assert not (tmp_path / "rows").exists()


def test_sweep_tab_shows_intervals_for_new_and_old_results_files(tmp_path):
    from components.sweep import panel as sw

    # A file as written before intervals (the shipped one without them): intervals computed from accuracy and n
    shipped = json.loads(sw.BUNDLED.read_text())
    later = {"accuracy_ci_low", "accuracy_ci_high", "p_vs_ar", "p_vs_baseline", "correct_by_problem", "equals_ar",
             "equals_ar_by_problem"}
    shipped["cells"] = [{k: v for k, v in c.items() if k not in later} for c in shipped["cells"]]
    (tmp_path / "old.json").write_text(json.dumps(shipped))
    old = sw.load_results_file(tmp_path / "old.json")
    ar = next(c for c in old["cells"] if c["method"] == "ar")
    fig = sw.pareto_figure(old, "nfe")
    star = next(t for t in fig.data if t.name == "AR (B = 1)")
    lo, hi = wilson_interval(round(ar["accuracy"] * ar["n"]), ar["n"])
    assert star.error_y.array[0] == pytest.approx(hi - ar["accuracy"])
    assert star.error_y.arrayminus[0] == pytest.approx(ar["accuracy"] - lo)
    headers = [label for _, label in sw.TABLE_COLUMNS]
    row = sw.results_table(old)[0]
    assert row[headers.index("accuracy 95 % CI")] == f"{lo:.3f}–{hi:.3f}"
    assert row[headers.index("p vs AR (McNemar)")] == "–"
    new = {"version": 1, "meta": {"n": 4}, "cells": [
        {**{k: None for k in COLUMNS}, "name": "ar", "method": "ar", "n": 4, "accuracy": 0.5, "nfe_per_token": 1.0,
         "wall_per_token": 0.1, "accuracy_ci_low": 0.2, "accuracy_ci_high": 0.8, "correct_by_problem": "1100"},
        {**{k: None for k in COLUMNS}, "name": "s", "method": "s2d2", "n": 4, "accuracy": 1.0, "nfe_per_token": 0.5,
         "wall_per_token": 0.05, "accuracy_ci_low": 0.5, "accuracy_ci_high": 1.0, "p_vs_ar": 0.5,
         "correct_by_problem": "1111"}]}
    fig = sw.pareto_figure(validate_results(new), "wall")
    s2d2 = next(t for t in fig.data if t.name == "S2D2")
    assert list(s2d2.error_y.arrayminus) == [0.5] and list(s2d2.error_y.array) == [0.0]
    low, high = fig.layout.yaxis.range  # the y-axis fits the data and its error bars (0.2-1.0), not just 0.5-1.0
    assert low < 0.2 and 1.0 < high <= 1.03
    assert sw.results_table(new)[1][headers.index("p vs AR (McNemar)")] == "0.5"
    assert '"error_y"' in sw.pareto_html(new)
    for bad in ({"p_vs_ar": 1.5}, {"correct_by_problem": "11"}, {"correct_by_problem": "11x1"},
                {"accuracy_ci_low": "0.1"}):
        broken = {**new, "cells": [{**new["cells"][1], **bad}]}
        with pytest.raises(ValueError, match=r"results\.cells\[0\]\.(p_vs_ar|correct_by_problem|accuracy_ci_low)"):
            validate_results(broken)


def test_pareto_page_cli_writes_both_plots_and_refuses_a_bad_file(tmp_path, capsys):
    """`python -m components.sweep.panel` writes the plots the library leaves out (s2d2 never imports plotly)."""
    from components.sweep.panel import main

    results = tmp_path / "results.json"
    results.write_text((Path(__file__).resolve().parents[2] / "assets/results/sweep.json").read_text())
    assert main([str(results)]) == 0
    page = (tmp_path / "pareto.html").read_text()
    assert page.count('"error_y"') >= 2 and "plotly" in page
    (tmp_path / "bad.json").write_text('{"cells": 3}')
    assert main([str(tmp_path / "bad.json"), str(tmp_path / "x.html")]) == 2
    assert "error:" in capsys.readouterr().err and not (tmp_path / "x.html").exists()


def test_the_table_keeps_every_name_whole_and_says_the_unit():
    """A cell's name is whole up to NAME_CHARS (a longer one is cut with a visible "…"), and wall time per token is
    headed as seconds."""
    from s2d2.sweeps.bench import NAME_CHARS, format_table

    def cell(name):
        return {"name": name, "n": 2, "correct": 1, "accuracy": 0.5, "accuracy_ci": [0.1, 0.9], "nfe_per_token": 0.5,
                "wall_per_token": 0.0042, "speedup_nfe_vs_ar": 2.0, "speedup_wall_vs_ar": None, "equals_ar": None}

    long = "s2d2-hysteresis-b4+reuse+fused+trim"
    lines = format_table([cell(long), cell("x" * (NAME_CHARS + 5))]).splitlines()
    assert "wall_s_per_token" in lines[0] and lines[1].startswith(long + " ")
    assert lines[2].startswith("x" * (NAME_CHARS - 1) + "… ")
