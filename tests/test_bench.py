"""s2d2.bench / s2d2.sweep: a tiny grid on a tiny random model, resume, results schema, Pareto, CLI messages."""
from __future__ import annotations

import csv
import json

import pytest

from lanes_helpers import tiny_with_tokenizer
from s2d2.bench import load_task, read_rows, run_grid, write_results
from s2d2.sweep import (COLUMNS, add_speedups, default_grid, headline, load_grid, pareto_frontier, quick_grid,
                        readme_table, validate_results)


@pytest.fixture(scope="module")
def model():
    return tiny_with_tokenizer()


def _counting():
    import s2d2

    calls = []

    def generate(*args, **kwargs):
        calls.append(args[2].method)
        return s2d2.generate(*args, **kwargs)

    return generate, calls


def test_tiny_grid_runs_resumes_and_writes_a_stable_schema(model, tmp_path):
    task = load_task("arithmetic", 3)
    cells = quick_grid()[:3]  # ar, dynamic τ 0.9, dynamic τ 0.7
    cells.append(load_grid("quick")[3])  # sdar-config-a
    gen, calls = _counting()
    rows = run_grid(model, task, cells, tmp_path, gen_length=8, generate=gen, progress=False)
    assert len(calls) == 4 * 3
    assert [r["name"] for r in rows] == [c.name for c in cells]
    for r in rows:
        assert set(r) == set(COLUMNS) | {"config"} and r["n"] == 3
        assert 0.0 <= r["accuracy"] <= 1.0 and r["nfe_per_token"] > 0 and r["wall_per_token"] > 0
    ar = rows[0]
    assert ar["method"] == "ar" and ar["speedup_nfe_vs_ar"] == pytest.approx(1.0)
    assert rows[3]["method"] == "s2d2" and rows[3]["verify_rate"] is not None
    # resume: a second run recomputes nothing and gives the same numbers
    gen2, calls2 = _counting()
    again = run_grid(model, task, cells, tmp_path, gen_length=8, generate=gen2, progress=False)
    assert calls2 == [] and [r["nfe_per_token"] for r in again] == [r["nfe_per_token"] for r in rows]
    # an interrupted cell (last line lost) recomputes only the missing problem
    path = sorted((tmp_path / "cells").glob("sdar-config-a-*.jsonl"))[0]
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:-1]) + "\n{\"i\": 2, \"torn")
    gen3, calls3 = _counting()
    run_grid(model, task, cells, tmp_path, gen_length=8, generate=gen3, progress=False)
    assert calls3 == ["s2d2"] and sorted(read_rows(path)) == [0, 1, 2]
    paths = write_results(tmp_path, again, {"model": "tiny", "task": "arithmetic", "n": 3})
    with paths["csv"].open() as fh:
        header, *body = list(csv.reader(fh))
    assert tuple(header) == COLUMNS and len(body) == 4
    data = validate_results(json.loads(paths["json"].read_text()))
    assert paths["md"].read_text().startswith("| | cell | accuracy")
    assert data["cells"][0]["name"] == "ar"
    assert "plotly" in paths["html"].read_text()[:200000].lower()


def test_pareto_frontier_on_hand_made_points():
    pts = [(1.0, 0.5), (2.0, 0.7), (1.5, 0.4), (3.0, 0.7), (0.5, 0.1), (4.0, 0.9), (2.0, 0.6), (float("nan"), 1.0)]
    assert pareto_frontier(pts) == [4, 0, 1, 5]
    assert pareto_frontier([]) == []


def test_speedup_vs_the_fastest_baseline_at_equal_or_better_accuracy():
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
    assert "| best S2D2 | `s2` | 0.8 | 0.45 | 2× | 1.2× |" in table


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


def test_cli_messages_are_one_line(tmp_path, capsys):
    from s2d2.__main__ import main

    pytest.importorskip("s2d2.bench")
    assert main(["bench", "--grid", "nope", "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip().startswith("error: --grid")
    try:
        import datasets  # noqa: F401
    except ImportError:
        assert main(["bench", "--task", "gsm8k", "--grid", "quick", "--out", str(tmp_path)]) == 0
        err = capsys.readouterr().err.strip()
        assert err.startswith("skipped: gsm8k") and "\n" not in err
