"""`python -m s2d2 generate` on a tiny random model saved to a folder, and readable CLI errors."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.tiny_models import MASK_ID, tiny_qwen3_model, tiny_tokenizer

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow  # runs the command line in subprocesses


def run_cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "s2d2", *args], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=240)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    import torch

    path = tmp_path_factory.mktemp("ckpt")
    model = tiny_qwen3_model(seed=0, dtype=torch.float32)
    model.save_pretrained(path)
    tiny_tokenizer().save_pretrained(path)
    cfg = json.loads((path / "config.json").read_text())
    cfg.update(mask_token_id=MASK_ID, block_size=4, logits_alignment="aligned", stop_token_ids=[297, 298])
    (path / "config.json").write_text(json.dumps(cfg))
    return path


def test_generate_prints_text_metrics_and_writes_a_trace(folder, tmp_path):
    out = tmp_path / "trace.json"
    proc = run_cli("generate", "--model", str(folder), "--prompt", "t5 t6 t7", "--preset", "sdar-config-b",
                   "--set", "gen_length=16", "--no-chat", "--trace", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "NFE (forwards)" in proc.stdout and "mean acceptance length" in proc.stdout
    table = proc.stdout[proc.stdout.index("NFE (forwards)"):].split("\n\ntrace written")[0].splitlines()
    fields = [re.split(r"\s{2,}", line.strip()) for line in table]  # label, value, what it counts in words
    assert len(table) == 12 and all(len(f) == 3 and f[2] for f in fields), table
    assert "calls of the model (forward passes)" in table[0]
    from s2d2 import Trace

    trace = Trace.from_json(out.read_text())
    assert trace.header.config["block_length"] == 16 and trace.header.config["gen_length"] == 16
    assert trace.replay() == trace.footer.output_ids


@pytest.mark.parametrize(
    "args, message",
    [
        (["--preset", "nope"], "preset"),
        (["--set", "gen_length=0"], "gen_length"),
        (["--set", "temperature=-1"], "temperature"),
        (["--set", "bogus"], "KEY=VALUE"),
    ],
)
def test_bad_settings_give_one_line_errors(folder, args, message):
    proc = run_cli("generate", "--model", str(folder), "--prompt", "t5", *args)
    assert proc.returncode == 2
    assert message in proc.stderr and "Traceback" not in proc.stderr


def test_missing_model_is_a_readable_error():
    proc = run_cli("generate", "--model", "/nonexistent/folder", "--prompt", "hi")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and proc.stderr.startswith("error:")


def test_presets_lists_every_preset():
    proc = run_cli("presets")
    assert proc.returncode == 0
    for name in ("ar", "dynamic-baseline", "sdar-config-a", "fastdllm-config-c"):
        assert name in proc.stdout
    from s2d2.config import presets

    lines = proc.stdout.splitlines()  # one row each, every description starting in one column
    starts = {len(ln) - len(ln[len(name):].lstrip()) for ln, name in zip(lines, presets())}
    assert len(lines) == len(presets()) and len(starts) == 1


def test_eval_task_on_the_bundled_model():
    proc = run_cli("eval-task", "--model", "tiny", "--preset", "sdar-config-b", "--set", "acceptance=greedy_exact",
                   "--n", "3", "--threads", "1")
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout[proc.stdout.index("{"):])
    assert summary["n"] == 3 and 0 <= summary["accuracy"] <= 1 and summary["nfe"] > 0
    assert summary["overrides"]["acceptance"] == "greedy_exact"
