"""benchmarks/gpu_check.py runs on CPU (tiny shapes, no graphs) and stays inside its budget, saying what it skips."""
from __future__ import annotations

import importlib
import re

import pytest


@pytest.fixture(scope="module")
def gpu_check():
    return importlib.import_module("benchmarks.gpu_check")


@pytest.mark.slow
def test_small_run_prints_every_section(gpu_check, capsys) -> None:
    gpu_check.main(["--small", "--budget-s", "120", "--reps", "3", "--gen-length", "8"])
    out = capsys.readouterr().out
    two_l = re.findall(r"2L vs sequential, fp32 \[(\w+)\]\s+max \|dlogit\| (\S+)", out)
    assert [b for b, _ in two_l] == ["dynamic", "static"] and all(float(v) < 1e-4 for _, v in two_l)
    for kind in ("ar, 1 query", "draft B=16", "commit B=16", "verify_2l B=16"):
        assert re.search(rf"^{re.escape(kind)}\s+static\s+[\d.]+ \(n=", out, re.M), kind
    decodes = re.findall(r"^(tiny-shape|bundled) (AR|dynamic baseline|S2D2 sdar-config-b|S2D2 reuse\+fused\+trim|"
                         r"S2D2 cost-aware)\s+(dynamic|static)\s+([\d.]+)\s+([\d.]+)", out, re.M)
    assert len(decodes) == 20 and all(float(tps) > 0 for *_, tps, _ in decodes)
    assert re.search(r"S2D2 vs AR \[static\]\s+wall x[\d.]+, NFE x[\d.]+", out)
    assert len(re.findall(r"^bundled S2D2 cost-aware vs AR \[\w+\]\s+wall x[\d.]+, NFE x[\d.]+, wall/NFE", out,
                          re.M)) == 2
    assert re.search(r"^bundled cost table \[dynamic\]\s+draft [\d.]+ ms \+ [\d.]+ ms/query; verify_2l", out, re.M)
    reads = re.findall(r"^bundled syncs/step \[(\w+)(, traced)?\]\s+engine reads ([\d.]+)", out, re.M)
    assert len(reads) == 4 and all(float(r) <= 3 for *_, r in reads)
    assert len(re.findall(r"^bundled savers \[\w+\]\s+wall without / with query masks \+ row picks: [\d.]+$", out,
                          re.M)) == 2
    assert re.search(r"^done\s+[\d.]+ s of 120 s", out, re.M)


def test_tiny_budget_skips_and_says_so(gpu_check, capsys) -> None:
    gpu_check.main(["--small", "--budget-s", "1"])
    out = capsys.readouterr().out
    assert "build float32 model" in out and "bundled model" in out
    # every section says it was skipped and why (the two single-sequence ones, the two batched ones), none ran
    assert out.count("skipped: needs") == 4 and "batched bundled model" in out and "2L vs sequential" not in out
