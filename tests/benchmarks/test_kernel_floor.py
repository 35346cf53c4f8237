"""benchmarks/kernel_floor.py: the floor counts matmul and attention kernels only, and the models part of
benchmarks/batch_first.py prints each batch-first arm's floor and the ceiling it sets."""
from __future__ import annotations

import json
import math

import pytest
import torch
import torch.nn.functional as F

from benchmarks import batch_first
from benchmarks.kernel_floor import ceiling, kernel_seconds


@pytest.fixture(autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_matmuls_and_attention_count_and_elementwise_work_does_not():
    a = torch.randn(256, 256)
    q = torch.randn(1, 2, 64, 32)
    mask = torch.ones(64, 64, dtype=torch.bool).tril()
    matmul, value = kernel_seconds(lambda: [a @ a for _ in range(5)][-1])
    attention, _ = kernel_seconds(lambda: F.scaled_dot_product_attention(q, q, q, attn_mask=mask))
    elementwise, _ = kernel_seconds(lambda: [(a + a).mul(2).exp() for _ in range(20)])
    assert matmul > 0 and attention > 0 and elementwise == 0.0
    assert torch.equal(value, a @ a)  # what the run returned comes back


def test_the_ceiling_is_batch_ones_time_over_the_floor():
    assert ceiling(3.0, 1.5) == pytest.approx(2.0, rel=1e-12)
    assert ceiling(3.0, 0.0) == math.inf


def test_the_models_part_prints_each_batch_first_arms_floor_and_ceiling(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(batch_first, "MODEL_ARMS", {"tiny": ["sdar-config-b"]})
    out = tmp_path / "rows.json"
    batch_first.main(["--part", "models", "--batch", "2", "--n", "2", "--gen-length", "8", "--out", str(out)])
    rows = {r["engine"]: r for r in json.loads(out.read_text())}
    printed = capsys.readouterr().out.splitlines()
    first, threads = rows["batch-first"], rows["threads"]
    assert 0 < first["kernel_floor_s"] < first["bN_cpu_s"]  # the kernels are part of the decode, never all of it
    assert first["ceiling"] == pytest.approx(first["b1_cpu_s"] / first["kernel_floor_s"], rel=1e-12)
    assert threads["kernel_floor_s"] is None and threads["ceiling"] is None
    line = next(p for p in printed if p.split()[:3] == ["tiny", "sdar-config-b", "batch-first"])
    assert line.split()[-2:] == [f"{first['kernel_floor_s']:.3f}", f"{first['ceiling']:.2f}"]
    assert first["same_outputs"] == threads["same_outputs"] == 2
