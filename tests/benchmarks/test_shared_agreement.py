"""benchmarks.shared_agreement runs to its end on both bundled models in float64 and reports every visitor and its
summary line (it once crashed on tiny-llada2 in float64: the MoE experts' grouped matmul refuses float64)."""
from __future__ import annotations

import re

import pytest
import torch

from benchmarks.shared_agreement import main


@pytest.fixture(autouse=True)
def restored(monkeypatch):
    """main sets S2D2_BATCH_MAX and torch's thread count for its process: put both back afterwards."""
    monkeypatch.setenv("S2D2_BATCH_MAX", "16")
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


@pytest.mark.parametrize("model", ["tiny", "tiny-llada2"])
def test_shared_agreement_reports_every_visitor_in_float64(model, capsys):
    assert main(["--model", model, "--dtype", "float64", "--visitors", "2", "--gen-length", "8"]) == 0
    out = capsys.readouterr().out
    assert f"2 Runs in one shared batch vs alone: {model} float64" in out, out
    for i in (1, 2):
        line = rf"^visitor +{i}: exact (yes|no ) +discrete (yes|no ) +nfe \d+/\d+ +same tokens"
        assert re.search(line, out, re.M), out
    assert re.search(r"^shared float64: \d/2 traces exact, \d/2 discrete-equal .*max \|d\| = ", out, re.M), out
