"""benchmarks.batch_speed runs to its end on both bundled models in float64 and reports a row per model, arm and
batch size (it once crashed on tiny-llada2 in float64: the MoE experts' grouped matmul refuses float64)."""
from __future__ import annotations

import json
import re

import pytest
import torch

from benchmarks.batch_speed import main


@pytest.fixture(autouse=True)
def threads_restored():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def test_batch_speed_reports_every_model_and_batch_size_in_float64(tmp_path, capsys):
    out_file = tmp_path / "rows.json"
    main(["--n", "2", "--gen-length", "8", "--batch-sizes", "1,2", "--threads", "1", "--models", "tiny,tiny-llada2",
          "--arms", "ar", "--dtype", "float64", "--out", str(out_file)])
    out = capsys.readouterr().out
    assert "n = 2 held-out problems per run, gen length 8, float64 on cpu" in out, out
    for model in ("tiny", "tiny-llada2"):
        for batch in (1, 2):
            assert re.search(rf"^ +1 {re.escape(model)} +ar +{batch} +\d+\.\d\d +\d+ .* +\d/2 *$", out, re.M), out
    rows = json.loads(out_file.read_text())
    assert [(r["model"], r["batch"]) for r in rows] == [(m, b) for m in ("tiny", "tiny-llada2") for b in (1, 2)]
