"""The command line never overwrites a file in silence: `generate --trace` and `eval-task --out` say where they
wrote, and that they replaced a file when one was there; eval-task's `--batch-size auto` says what it chose."""
from __future__ import annotations

import json

import pytest

from s2d2.__main__ import main
from s2d2.cli_batch import AUTO_BATCH, batch_size_for
from s2d2.cli_checks import written_line


def test_the_written_line_says_a_replaced_file():
    assert written_line("trace", "t.json", False) == "trace written to t.json"
    assert written_line("trace", "t.json", True) == "trace written to t.json (it replaced the file that was there)"


def test_generate_says_when_its_trace_replaced_a_file(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    out = tmp_path / "trace.json"
    args = ["generate", "--prompt", "2+3=", "--set", "gen_length=4", "--device", "cpu", "--trace", str(out)]
    assert main(args) == 0
    assert capsys.readouterr().out.rstrip().endswith(f"trace written to {out}")
    out.write_text("a file the user had")
    assert main(args) == 0
    assert capsys.readouterr().out.rstrip().endswith(f"trace written to {out} (it replaced the file that was there)")
    from s2d2 import Trace

    assert Trace.from_json(out.read_text()).footer.output_ids  # the new trace, whole, where the user's file was


def test_eval_task_says_where_its_result_went_and_what_auto_chose(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    out = tmp_path / "result.json"
    base = ["eval-task", "--model", "tiny", "--n", "3", "--gen-length", "4", "--device", "cpu", "--dtype", "float64",
            "--out", str(out)]
    assert main([*base, "--batch-size", "1"]) == 0
    err = capsys.readouterr().err
    assert err.rstrip().endswith(f"result written to {out}")
    one = json.loads(out.read_text())
    assert main([*base, "--batch-size", "auto"]) == 0
    err = capsys.readouterr().err
    assert f"--batch-size auto: {AUTO_BATCH['cpu']} problems at once at most" in err
    assert err.rstrip().endswith(f"result written to {out} (it replaced the file that was there)")
    auto = json.loads(out.read_text())
    assert {k: v for k, v in auto.items() if k != "wall_seconds"} == {k: v for k, v in one.items()
                                                                        if k != "wall_seconds"}


@pytest.mark.parametrize("value, device, expected", [("auto", "cpu", AUTO_BATCH["cpu"]),
                                                     ("auto", "cuda", AUTO_BATCH["cuda"]), ("7", "cpu", 7)])
def test_batch_size_values(value, device, expected):
    assert batch_size_for(value, device) == expected


@pytest.mark.parametrize("value", ["0", "257", "x", "1.5"])
def test_eval_task_refuses_a_bad_batch_size_in_one_line(value, capsys):
    assert main(["eval-task", "--batch-size", value]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --batch-size") and "\n" not in err
    with pytest.raises(ValueError):
        batch_size_for(value, "cpu")
