"""Issue 19, rows 12 and 17: every CLI argument is checked before any work or optional import, and every bad one is
one line on stderr with exit status 2 (no ModuleNotFoundError, RecursionError or OverflowError traceback)."""
from __future__ import annotations

import json
import sys

import pytest

from s2d2.__main__ import main

DEEP = "[" * 100_000 + "]" * 100_000


def run(argv, capsys):
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own errors
        code = exc.code
    return code, capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["generate", "--model", "/nonexistent", "--prompt", "hi", "--set", "x=" + DEEP],
     "error: --preset/--set: --set: the value of 'x' is nested too deeply"),
    (["bench", "--seed", "-1", "--out", "{tmp}/b"], "error: --seed: must be a whole number in [0, 2147483647], got -1"),
    (["bench", "--problems", "0", "--out", "{tmp}/b"], "error: --problems: must be a whole number in [1, 100000]"),
    (["bench", "--out", "{tmp}/afile/b"], "error: --out: cannot write into '{tmp}/afile/b'"),
    (["bench", "--grid", "{tmp}/deep.json", "--out", "{tmp}/b"], "error: --grid: {tmp}/deep.json is nested too deeply"),
    pytest.param(["bench", "--grid", "{tmp}/huge.json", "--out", "{tmp}/b"],
                 "error: --grid: at most 1000 cells, got 100000", marks=pytest.mark.slow),  # a 100,000-cell file
    (["bench", "--grid", "{tmp}/typed.json", "--out", "{tmp}/b"], "error: --grid: cell 0:"),
    (["eval-task", "--seed", "-5"], "error: --seed: must be a whole number in [0, 2147483647], got -5"),
    (["eval-task", "--n", "0"], "error: --n: must be a whole number in [1, "),
    (["eval-task", "--out", "/no/such/folder/r.json"], "error: --out: cannot write a file at '/no/such/folder/r.json'"),
    (["eval-task", "--set", "x=" + DEEP], "error: --set: the value of 'x' is nested too deeply"),
    (["train-tiny", "--steps", "-5", "--out", "{tmp}/t"], "error: --steps: must be a whole number in [1, 100000000]"),
    (["train-tiny", "--lr", "0", "--out", "{tmp}/t"], "error: --lr: must be a number in (0, 10], got 0.0"),
    (["train-tiny", "--seed", "-1", "--out", "{tmp}/t"], "error: --seed: must be a whole number in [0, 2147483647]"),
    (["train-tiny", "--out", "{tmp}/afile/t"], "error: --out: cannot write into '{tmp}/afile/t'"),
    (["train-tiny", "--blocks", "4,x", "--out", "{tmp}/t"], "error: --blocks: expected comma-separated block sizes"),
    # a mistyped name: the close one is said first, so a long list of every allowed name never loses it
    (["generate", "--prompt", "hi", "--set", "gen_lenght=64"],
     "error: --preset/--set: config: unknown option(s) ['gen_lenght'] (did you mean 'gen_length'?); known options:"),
    (["generate", "--prompt", "hi", "--preset", "sdar-config-c"],
     "error: --preset/--set: preset: unknown preset 'sdar-config-c' (did you mean 'sdar-config-b'?); allowed: ar,"),
    (["generate", "--prompt", "hi", "--model", "tinyy"],
     "error: unknown model 'tinyy' (did you mean 'tiny'?): pass a local checkpoint folder, a Hub id (owner/name), or "
     "a known name: bundled tiny, tiny-llada2; on the Hub JetLM/SDAR-1.7B-Chat,"),
    # the default dtype is leaving the flag out; its choices never list a None a user cannot type
    (["generate", "--prompt", "hi", "--dtype", "None"],
     "error: python -m s2d2 generate: argument --dtype: invalid choice: 'None' (choose from "),
])
def test_cli_arguments_are_checked_first(capsys, tmp_path, argv, message):
    (tmp_path / "afile").write_text("a file, not a folder")
    (tmp_path / "deep.json").write_text(DEEP)
    (tmp_path / "huge.json").write_text(json.dumps([{"name": f"c{i}", "preset": "ar"} for i in range(100_000)]))
    (tmp_path / "typed.json").write_text(json.dumps([{"name": "c", "preset": ["ar"]}]))
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    code, err = run(argv, capsys)
    assert code == 2 and err.startswith(message.replace("{tmp}", str(tmp_path))) and err.count("\n") == 1, err[:500]
    assert not (tmp_path / "t").exists() and not (tmp_path / "b").exists()  # nothing was created


def test_train_tiny_without_its_requirements_is_one_line_after_the_arguments(capsys, tmp_path, monkeypatch):
    """Row 17: the training extras are looked up (not imported) after the arguments and before any work."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "rdata" else real(name, *a))
    monkeypatch.delitem(sys.modules, "rdata", raising=False)
    code, err = run(["train-tiny", "--steps", "-1", "--out", str(tmp_path / "t")], capsys)
    assert code == 2 and err.startswith("error: --steps:")  # the arguments first
    code, err = run(["train-tiny", "--steps", "2", "--out", str(tmp_path / "t")], capsys)
    assert code == 2 and err == "error: train-tiny needs rdata: pip install -r requirements-train.txt\n", err
    assert not (tmp_path / "t").exists()


@pytest.mark.parametrize("command", ["generate", "eval-task", "bench"])
def test_dtype_help_names_what_leaving_it_out_picks(capsys, command):
    """`--dtype` (one declaration, cli_args.py) lists only names a user can type: its default is leaving it out, and
    the help says what that picks; `generate`'s `--device` says so too."""
    code = None
    try:
        main([command, "--help"])
    except SystemExit as exc:
        code = exc.code
    out = " ".join(capsys.readouterr().out.split())
    assert code == 0 and "--dtype {float32,bfloat16,float16,float64}" in out and "None" not in out
    assert "default: bfloat16 on CUDA, float32 elsewhere" in out
    assert command != "generate" or "default: cuda if there is one, else cpu" in out


def test_a_long_error_is_whole_up_to_its_bound_and_a_cut_says_so(capsys):
    """Every allowed name of a list fits an error line (the last preset is there); past the bound (a hostile
    value) the line is cut with a visible mark, never silently."""
    import dataclasses

    from s2d2.__main__ import MESSAGE_CHARS, bounded
    from s2d2.config import DecodeConfig, presets

    code, err = run(["generate", "--prompt", "hi", "--preset", "nope"], capsys)
    assert code == 2 and err.rstrip().endswith(list(presets())[-1]) and "cut" not in err
    code, err = run(["generate", "--prompt", "hi", "--set", "x=1"], capsys)
    last = max(f.name for f in dataclasses.fields(DecodeConfig))
    assert code == 2 and err.rstrip().endswith(f"'{last}']") and "did you mean" not in err
    long = "x" * (MESSAGE_CHARS + 10)
    assert bounded(long) == "x" * MESSAGE_CHARS + " … (10 more characters cut)" and bounded("short") == "short"


@pytest.mark.parametrize("command, file", [("export-web", "requirements-web.txt"), ("lm-eval", "requirements-eval.txt"),
                                           ("train-tiny", "requirements-train.txt"), ("bench", "requirements.txt")])
def test_an_unforeseen_missing_module_names_its_commands_requirements(capsys, monkeypatch, command, file):
    """An ImportError no upfront check caught (a module installed but broken) is one line naming the file that
    installs that command's extras, not another command's."""
    import s2d2.__main__ as cli

    def broken(args):
        raise ImportError("broken", name="onnxruntime")

    monkeypatch.setattr(cli, "_dispatch", broken)
    argv = {"export-web": ["export-web", "--model", "tiny"], "lm-eval": ["lm-eval", "--tasks", "x"],
            "train-tiny": ["train-tiny"], "bench": ["bench"]}[command]
    code, err = run(argv, capsys)
    assert (code, err) == (2, f"error: {command} needs the optional module onnxruntime: pip install -r {file}\n")
