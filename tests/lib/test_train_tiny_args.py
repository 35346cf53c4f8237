"""`python -m s2d2 train-tiny`: every option has a help text with its default, and a bad `--size` or a stage without
the model it starts from is one line on stderr and exit status 2 before any data preparation (nothing is created).
No training and no data work here: each case stops in the argument checks."""
from __future__ import annotations

import argparse
import json

import pytest

from s2d2.__main__ import main
from s2d2.tiny.model import SIZES
from s2d2.tiny.options import add_train_tiny_args, check_options, options_from_argv


def run(argv, capsys):
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own exits
        code = exc.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def fake_model(folder, size):
    """A Qwen3 model folder as the loaders look for it: config.json of `size` and a (here empty) model.safetensors."""
    h, layers, heads, kv, head_dim, ffn = SIZES[size]
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({
        "hidden_size": h, "num_hidden_layers": layers, "num_attention_heads": heads, "num_key_value_heads": kv,
        "head_dim": head_dim, "intermediate_size": ffn}))
    (folder / "model.safetensors").write_bytes(b"")


def listing(root):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_every_option_has_a_help_with_its_default():
    parser = add_train_tiny_args(argparse.ArgumentParser(prog="train-tiny"))
    shown = [a for a in parser._actions if a.help != argparse.SUPPRESS and not isinstance(a, argparse._HelpAction)]
    assert len(shown) >= 37
    for action in shown:
        assert action.help and action.help.strip(), action.option_strings
        assert "default:" in action.help, action.option_strings


def test_help_text(capsys):
    code, out, _ = run(["train-tiny", "--help"], capsys)
    text = " ".join(out.split())
    assert code == 0
    assert "--max-tokens" not in text  # a test hook, hidden
    assert "one of h128, h192, h256" in text and "(default: h192)" in text
    assert "(default: 3000)" in text and "(default: runs/tiny)" in text
    assert "--no-bf16 can be several times faster" in text


@pytest.mark.parametrize("argv, message, setup", [
    (["--size", "h999"], "error: --size: must be one of h128, h192, h256, got 'h999'", None),
    (["--stage", "sdar"],
     "error: --stage sdar: no stage-1 model at '{tmp}/t/ar/latest/model.safetensors'; run --stage ar with this "
     "--out first (or give --init FOLDER)", None),
    (["--stage", "sdar", "--init", "{tmp}/empty"],
     "error: --init: no model.safetensors in '{tmp}/empty' (stage sdar starts from a stage-1 model folder", None),
    (["--stage", "sdar", "--fresh"], "error: --stage sdar: no stage-1 model at", "sdar_state"),  # --fresh: no resume
    (["--stage", "sdar"], "error: --size: h192 does not match the model in '{tmp}/t/ar/latest' (hidden size 128, "
     "4 layers: give --size h128)", "ar_h128"),
    (["--stage", "ar"], "error: --size: h192 does not match the model in '{tmp}/t/ar/latest'", "ar_h128_resume"),
    (["--stage", "llada2", "--init", "{tmp}/empty"],
     "error: --init: no in-place Qwen3 model (config.json, model.safetensors, tokenizer.json) in '{tmp}/empty'; "
     "give --init the folder of one", None),
])
def test_bad_arguments_stop_before_any_work(capsys, tmp_path, argv, message, setup):
    (tmp_path / "empty").mkdir()
    out = tmp_path / "t"
    if setup in ("ar_h128", "ar_h128_resume"):
        fake_model(out / "ar" / "latest", "h128")
    if setup == "ar_h128_resume":
        (out / "ar" / "state.pt").write_bytes(b"")
    if setup == "sdar_state":
        (out / "sdar").mkdir(parents=True)
        (out / "sdar" / "state.pt").write_bytes(b"")
    before = listing(tmp_path)
    full = ["train-tiny", *argv, "--steps", "2", "--out", str(out), "--data-dir", str(tmp_path / "data")]
    code, _, err = run([a.replace("{tmp}", str(tmp_path)) for a in full], capsys)
    assert code == 2 and err.startswith(message.replace("{tmp}", str(tmp_path))) and err.count("\n") == 1, err[:500]
    assert listing(tmp_path) == before  # no data folder, tokenizer, cache or stage folder


def test_the_stage_models_found_pass(tmp_path):
    """What the checks accept: stage sdar after stage ar (or resuming), stage llada2 from the bundled model."""
    out = tmp_path / "t"
    fake_model(out / "ar" / "latest", "h128")
    base = ["--out", str(out), "--data-dir", str(tmp_path / "data")]
    check_options(options_from_argv(["--stage", "sdar", "--size", "h128", *base]))
    check_options(options_from_argv(["--stage", "ar", "--size", "h128", *base]))  # ar, fresh: loads nothing
    fake_model(tmp_path / "other", "h192")
    check_options(options_from_argv(["--stage", "sdar", "--init", str(tmp_path / "other"), *base]))
    resumed = tmp_path / "r"  # resumes from <out>/sdar/latest: no stage-1 model needed
    fake_model(resumed / "sdar" / "latest", "h256")
    (resumed / "sdar" / "state.pt").write_bytes(b"")
    check_options(options_from_argv(["--stage", "sdar", "--size", "h256", "--out", str(resumed)]))
    check_options(options_from_argv(["--stage", "llada2", *base]))  # assets/tiny
    assert not (tmp_path / "data").exists()
