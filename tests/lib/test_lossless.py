"""Lossless mode (issue 18, item 4): the `lossless` preset reproduces greedy AR token for token, and a sweep's
`equals_ar` rate counts exactly the problems whose output is AR's (up to the first stop id / the length budget)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

import s2d2
from tests.support.tiny_models import tiny_qwen2, tiny_qwen3
from tests.support.lanes import tiny_with_tokenizer
from s2d2.sweeps.agreement import (add_equals_ar, agreement_bits, format_equals_ar, lossless_cell, lossless_line,
                                   same_output)
from s2d2.sweeps.bench import run_grid, write_results
from s2d2.sweeps.results_file import read_results
from s2d2.sweeps.grid import Cell, readme_table
from s2d2.tasks.sets import load_task

ROOT = Path(__file__).resolve().parents[2]


def test_the_preset_is_the_guaranteed_configuration():
    cfg = s2d2.preset("lossless")
    assert (cfg.method, cfg.acceptance, cfg.policy, cfg.min_span_length, cfg.cache_ver) == (
        "s2d2", "greedy_exact", "mask_span_length", 1, True)
    assert (cfg.block_length, cfg.kv_reuse, cfg.fused_commit, cfg.adaptive_block, cfg.temperature) == (
        16, True, True, False, 0.0)
    assert cfg.ratio_threshold is None and not cfg.always_check_high_conf and cfg.steps == cfg.block_length


@pytest.mark.parametrize("family", ["aligned", "shifted"])
def test_lossless_equals_greedy_ar_on_tiny_random_models(family):
    model = tiny_qwen3(seed=2) if family == "aligned" else tiny_qwen2(seed=2)
    for prompt in ([5, 6, 7, 8, 9, 10, 11], list(range(20, 52))):
        ar = s2d2.generate(model, prompt, s2d2.preset("ar", gen_length=40), detailed=False)
        res = s2d2.generate(model, prompt, s2d2.preset("lossless", gen_length=40), detailed=False)
        stopped = (ar.trace.footer.stop_position is not None, res.trace.footer.stop_position is not None)
        assert same_output(ar.token_ids, stopped[0], res.token_ids, stopped[1])
        assert len(res.token_ids) >= 16 or stopped[1]  # a real comparison, not an empty prefix
        assert res.metrics["nfe"] < ar.metrics["nfe"] and res.metrics["verify_rate"] == 1.0


@pytest.mark.parametrize("name", ["tiny", "tiny-llada2"])
@pytest.mark.slow
def test_lossless_equals_greedy_ar_on_the_bundled_models(name):
    from s2d2.tasks.arithmetic import heldout

    model = s2d2.load_model(name)
    for i, problem in enumerate(heldout(3)):
        ar = s2d2.generate(model, problem.question, s2d2.preset("ar", gen_length=96), seed=i, detailed=False)
        res = s2d2.generate(model, problem.question, s2d2.preset("lossless", gen_length=96), seed=i,
                            detailed=False)
        assert res.token_ids == ar.token_ids and "####" in res.text
        assert res.metrics["nfe"] * 2 < ar.metrics["nfe"]


# -- equals_ar ---------------------------------------------------------------------------------------------------

def test_same_output_counts_a_stop_as_a_token_and_stops_at_a_budget():
    assert same_output([1, 2, 3], True, [1, 2, 3], True)
    assert not same_output([1, 2, 3], True, [1, 2, 4], True)
    assert not same_output([1, 2], True, [1, 2, 3], True)  # one stopped where the other went on
    assert not same_output([1, 2], True, [1, 2, 3], False)  # ... also when the other ran out of budget later
    assert same_output([1, 2, 3, 4], True, [1, 2, 3], False)  # a budget that ended first: compared as far as it got
    assert same_output([1, 2, 3], False, [1, 2, 3, 4, 5], False)
    assert not same_output([1, 2, 3], False, [1, 9, 3, 4], False)
    assert same_output([1, 2], False, [1, 2], True)  # a budget ending exactly where the other stopped
    assert same_output([], True, [], True) and not same_output([], True, [5], False)


def _row(i, output, stopped):
    return {"i": i, "output": output, "stopped": stopped}


def test_equals_ar_compares_every_problem_with_the_ar_cell():
    ar = [_row(0, [1, 2, 3], True), _row(1, [4, 5, 6, 7], False), _row(2, [8], True), _row(3, [9, 9], True)]
    other = [_row(0, [1, 2, 3], True),   # identical
             _row(1, [4, 5, 6], False),  # a shorter budget, identical as far as it went
             _row(2, [8, 0], True),      # went on past AR's stop: different
             _row(3, [9, 8], True)]      # a different token
    cells = [{"name": "ar", "method": "ar"}, {"name": "x", "method": "s2d2", "n": 4},
             {"name": "old", "method": "dynamic", "n": 4}]
    old = [{k: v for k, v in r.items() if k != "output"} for r in other]  # rows written before outputs were kept
    add_equals_ar(cells, [ar, other, old])
    assert cells[1]["equals_ar_by_problem"] == "1100" and cells[1]["equals_ar"] == 0.5
    assert cells[0]["equals_ar"] is None and cells[2]["equals_ar"] is None
    assert format_equals_ar(cells[1]) == "2/4" and format_equals_ar(cells[0]) == "–"
    assert agreement_bits(ar, other[:3]) is None  # different problems: no comparison
    assert add_equals_ar([{"name": "x", "method": "s2d2"}], [other])[0]["equals_ar"] is None  # no AR cell


def test_a_sweep_stores_equals_ar_and_reports_the_lossless_line(tmp_path):
    model = tiny_with_tokenizer()
    task = load_task("arithmetic", 4)
    cells = [Cell("ar", s2d2.preset("ar")), Cell("lossless", s2d2.preset("lossless", block_length=8)),
             Cell("dynamic-tau0.3-b8", s2d2.preset("dynamic-baseline", block_length=8, confidence_threshold=0.3))]
    rows = run_grid(model, task, cells, tmp_path, gen_length=24, progress=False)
    # the same decodes by hand: which outputs equal AR's?
    by_hand = []
    for cell in cells[1:]:
        bits = ""
        for i, item in enumerate(task.items):
            a = s2d2.generate(model, item.prompt, cells[0].config.replace(gen_length=24), seed=i, detailed=False)
            b = s2d2.generate(model, item.prompt, cell.config.replace(gen_length=24), seed=i, detailed=False)
            bits += "1" if a.token_ids == b.token_ids else "0"  # aligned family, same budget: plain equality
        by_hand.append(bits)
    assert [r["equals_ar_by_problem"] for r in rows[1:]] == by_hand
    assert rows[1]["equals_ar"] == 1.0 and by_hand[1] != "1111"  # the loose threshold baseline parts ways
    paths = write_results(tmp_path, rows, {"model": "tiny-qwen3-tok", "task": "arithmetic", "n": 4})
    data = read_results(paths["json"].read_text())
    assert data["cells"][1]["equals_ar"] == 1.0 and data["cells"][2]["equals_ar_by_problem"] == by_hand[1]
    assert lossless_cell(data["cells"])["name"] == "lossless"
    line = lossless_line(data["cells"])
    speedup = data["cells"][1]["speedup_nfe_vs_ar"]
    assert line.startswith(f"AR-identical output at {speedup:.2f}× fewer forwards (4/4 problems")
    md = readme_table(data)
    assert "| lossless (AR-identical by construction) | `lossless` |" in md and line in md
    assert paths["csv"].read_text().splitlines()[0].endswith(",equals_ar")


def test_a_cell_that_is_not_lossless_by_construction_is_not_the_lossless_cell():
    base = {"method": "s2d2", "nfe_per_token": 0.3, "speedup_nfe_vs_ar": 3.0, "equals_ar": 1.0, "n": 4}
    paper = {**base, "name": "paper", "config": {"acceptance": "paper", "policy": "mask_span_length",
                                                 "min_span_length": 1}}
    selective = {**base, "name": "sel", "config": {"acceptance": "greedy_exact", "policy": "score_threshold"}}
    assert lossless_cell([paper, selective]) is None and lossless_line([paper, selective]) is None
    exact = {**base, "name": "lossless", "nfe_per_token": 0.4, "speedup_nfe_vs_ar": 2.5, "equals_ar": 0.75,
             "config": {"acceptance": "greedy_exact", "policy": "always"}}
    assert lossless_line([paper, exact]).startswith("AR-identical output on 3/4 problems at 2.50× fewer forwards")


@pytest.mark.parametrize("path", ["assets/results/sweep.json", "assets/results/tiny-llada2/sweep.json"])
def test_the_readme_lossless_lines_come_from_the_shipped_sweeps(path):
    data = read_results((ROOT / path).read_bytes())
    line = lossless_line(data["cells"])
    assert line is not None and line.startswith("AR-identical output")
    assert line in " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    ident = re.search(r"\((\d+)/(\d+) problems", line)
    assert ident and int(ident.group(2)) == data["meta"]["n"]
