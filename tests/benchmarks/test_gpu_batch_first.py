"""benchmarks/gpu_batch_first.py (issue 37's prepared GPU run) runs on the CPU (tiny shapes, no graphs), prints every
figure the issue asks for with its target, and stays inside its budget, saying what it skips."""
from __future__ import annotations

import importlib
import re

import pytest


@pytest.fixture(scope="module")
def gpu_batch_first():
    return importlib.import_module("benchmarks.gpu_batch_first")


def test_small_run_prints_every_figure(gpu_batch_first, capsys) -> None:
    gpu_batch_first.main(["--small", "--budget-s", "120", "--batch", "6", "--alone", "2", "--gen-length", "8"])
    out = capsys.readouterr().out
    assert re.search(r"^tiny-shape capture, batch 6\s+[\d.]+ s, graphs 0", out, re.M)
    base = re.search(r"^tiny-shape batch 1\s+([\d.]+) decodes/s \(2 prompts\); forwards ([\d.]+)% of wall", out, re.M)
    assert base and float(base.group(1)) > 0 and 0 < float(base.group(2)) <= 100
    for engine in ("batch-first", "threads"):
        m = re.search(rf"^tiny-shape batch 6 {engine}\s+([\d.]+) decodes/s, \d+ tokens/s, x([\d.]+) vs batch 1 "
                      r"\(target >= 25\); forwards ([\d.]+)% of wall \(target >= 85 %\); ([\d.]+) sequences per "
                      r"forward of ([\d.]+) live, x([\d.]+) \(target >= 0.9\); host \d+ us per sequence-forward "
                      r"\(\d+ over \d+ forwards\); tokens = batch 1 2/2$", out, re.M)
        assert m, engine
        assert float(m.group(4)) <= float(m.group(5)) <= 6 and 0 < float(m.group(6)) <= 1
    assert re.search(r"^bundled alone, static\s+[\d.]+% of wall outside forwards \(target <= 15 %\), \d+ forwards",
                     out, re.M)
    assert re.search(r"^done\s+[\d.]+ s of 120 s", out, re.M)
    assert "skipped" not in out


def test_tiny_budget_skips_and_says_so(gpu_batch_first, capsys) -> None:
    gpu_batch_first.main(["--small", "--budget-s", "1"])
    out = capsys.readouterr().out
    assert re.search(r"^tiny-shape build\s+skipped: needs ~2 s", out, re.M)
    assert re.search(r"^bundled alone\s+skipped: needs ~15 s", out, re.M)
    assert "decodes/s" not in out
