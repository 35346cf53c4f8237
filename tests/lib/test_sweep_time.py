"""s2d2.sweeps.sweep_time: a sweep's decode time survives resumes, and sits beside a batch-1 sweep of its grid."""
from __future__ import annotations

import json

import pytest

from s2d2.__main__ import main
from s2d2.sweeps.shards import read_all_rows
from s2d2.sweeps.sweep_time import batch1_reference, decode_seconds, time_line

BENCH = ["bench", "--model", "tiny", "--grid", "quick", "--problems", "2", "--gen-length", "8", "--no-progress",
         "--threads", "1"]


def _meta(folder):
    return json.loads((folder / "results.json").read_text())["meta"]


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory):
    """The quick grid at n = 2 decoded one problem at a time, then in batches of 2 beside it."""
    one, two = tmp_path_factory.mktemp("batch1"), tmp_path_factory.mktemp("batch2")
    assert main([*BENCH, "--batch-size", "1", "--out", str(one)]) == 0
    assert main([*BENCH, "--batch-size", "2", "--out", str(two), "--batch1-reference",
                 str(one / "results.json")]) == 0
    return one, two


def test_decode_seconds_are_the_rows_walls_and_survive_a_resume(sweeps):
    one, two = sweeps
    for folder in (one, two):
        meta = _meta(folder)
        assert meta["decode_seconds"] == decode_seconds(read_all_rows(folder).values()) > 0
    before = _meta(two)
    assert main([*BENCH, "--batch-size", "2", "--out", str(two)]) == 0  # every row on disk: nothing decodes
    after = _meta(two)
    assert after["decode_seconds"] == before["decode_seconds"] and "batch1_reference" not in after


def test_the_batch1_reference_sets_seconds_per_decode_side_by_side(sweeps):
    one, two = sweeps
    ref_meta, meta = _meta(one), json.loads((two / "results.json").read_text())
    cells = len(meta["cells"])
    ref = batch1_reference(one / "results.json", meta["meta"], cells)
    per_ref = ref_meta["seconds"] / (cells * 2)
    per_this = meta["meta"]["decode_seconds"] / (cells * 2)
    assert ref["n"] == 2 and ref["seconds_per_decode"] == pytest.approx(per_ref, abs=1e-4)
    assert ref["this_seconds_per_decode"] == pytest.approx(per_this, abs=1e-4)
    assert ref["speedup_per_decode"] == pytest.approx(per_ref / per_this, rel=0.01, abs=0.01)
    line = time_line({**meta["meta"], "batch1_reference": ref})
    assert line.startswith("Decoding took") and "at batch 2" in line and "faster per decode" in line
    assert "Decoding took" in (two / "README-table.md").read_text()


def test_a_reference_of_another_sweep_is_refused_in_one_line(sweeps, tmp_path, capsys):
    one, two = sweeps
    meta = _meta(two)
    with pytest.raises(ValueError, match="decoded at batch 2, not 1"):
        batch1_reference(two / "results.json", meta, 1)
    with pytest.raises(ValueError, match="something else .*grid 'quick' vs 'default'"):
        batch1_reference(one / "results.json", {**meta, "grid": "default"}, len(json.loads(
            (one / "results.json").read_text())["cells"]))
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ValueError, match="is not a results file"):
        batch1_reference(tmp_path / "bad.json", meta, 1)
    capsys.readouterr()
    code = main([*BENCH, "--problems", "1", "--batch-size", "2", "--out", str(tmp_path / "x"),
                 "--batch1-reference", str(tmp_path / "bad.json")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "is not a results file" in err[0], err
    assert not (tmp_path / "x" / "rows").exists()  # refused before any decode


def test_a_batched_sweep_decodes_on_the_batch_first_engine(tmp_path, monkeypatch):
    """Issue 37: a sweep at batch > 1 decodes every cell the batch-first engine covers on it (all of the quick
    grid's), one engine run per cell with all its problems."""
    from s2d2.decoding import lockstep
    from s2d2.sweeps.grid import load_grid

    runs: list[int] = []
    real = lockstep.Lockstep.run

    def counted(self, jobs, *args, **kwargs):
        jobs = list(jobs)
        runs.append(len(jobs))
        return real(self, jobs, *args, **kwargs)

    monkeypatch.setattr(lockstep.Lockstep, "run", counted)
    assert main([*BENCH, "--batch-size", "2", "--out", str(tmp_path)]) == 0
    assert runs == [2] * len(load_grid("quick"))
