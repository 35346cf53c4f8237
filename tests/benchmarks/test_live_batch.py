"""benchmarks/live_batch.py: N visitors' shared Runs on both engines, one table row per preset and N, and the
check that every visitor's output is the same on both (a difference is printed and fails the run)."""
from __future__ import annotations

from benchmarks import live_batch

ARGS = ["--visitors", "2", "--presets", "sdar-config-a", "--gen-length", "8"]


def test_both_arms_run_and_agree(capsys):
    assert live_batch.main(ARGS) == 0
    out = capsys.readouterr().out
    assert "| sdar-config-a | 2 |" in out and "outputs equal in both arms for every visitor" in out


def test_a_visitor_whose_outputs_differ_fails_the_run(capsys, monkeypatch):
    real = live_batch.run_arm

    def skewed(model, cfg, n, batch_first):
        got = real(model, cfg, n, batch_first)
        if batch_first:
            got["outputs"][0] = list(got["outputs"][0]) + [0]
        return got

    monkeypatch.setattr(live_batch, "run_arm", skewed)
    assert live_batch.main(ARGS) == 1
    assert "MISMATCH: sdar-config-a at N = 2" in capsys.readouterr().err


def test_the_stand_in_table_prints_host_time_per_sequence_forward(capsys):
    assert live_batch.main(["--stand-in", "--visitors", "3", "--presets", "sdar-config-b", "--gen-length", "8"]) == 0
    out = capsys.readouterr().out
    assert "µs per sequence-forward" in out and "| sdar-config-b | 3 |" in out and "outputs equal" in out
