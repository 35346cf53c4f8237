"""HumanEval- and MBPP-format code tasks (s2d2/tasks/code.py): reading, program building, pass@1 in the sandbox."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from s2d2.sandbox import ALLOW_ENV, CodeEvalRefused, SandboxLimits
from s2d2.sandbox import isolation as iso
from s2d2.tasks.code import check_code, extract_code, read_code_problems
from s2d2.tasks.sets import load_task

ROOT = Path(__file__).resolve().parents[1]
HUMANEVAL = ROOT / "assets" / "tasks" / "code_sample_humaneval.jsonl"
MBPP = ROOT / "assets" / "tasks" / "code_sample_mbpp.jsonl"
FAST = SandboxLimits(wall_s=4, cpu_s=3)
needs_bwrap = pytest.mark.skipif(iso.bwrap_available()[0] is None, reason="bubblewrap unavailable here (the sandbox "
                                 f"refuses to run code: {iso.bwrap_available()[1]})")


def raw(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture
def opted_in(monkeypatch):
    monkeypatch.setenv(ALLOW_ENV, "1")


def test_code_tasks_need_the_opt_in(monkeypatch) -> None:
    monkeypatch.delenv(ALLOW_ENV, raising=False)
    with pytest.raises(ValueError, match=f"--scorer humaneval: .*{ALLOW_ENV}=1"):
        load_task(f"jsonl:{HUMANEVAL}", 6, scorer="humaneval")
    gold = read_code_problems(HUMANEVAL, "humaneval")[0]["answer"]
    with pytest.raises(CodeEvalRefused):
        check_code("pass", gold, "humaneval")


@needs_bwrap
def test_the_samples_load_in_both_formats(opted_in) -> None:
    he = load_task(f"jsonl:{HUMANEVAL}", 100, scorer="humaneval", say=lambda m: None)
    mb = load_task(f"jsonl:{MBPP}", 100, scorer="mbpp", say=lambda m: None)
    assert len(he.items) == len(mb.items) == 6 and he.gen_length == 512
    assert he.items[0].id == "S2D2/0" and "def count_vowels" in he.items[0].prompt
    assert "Your code should pass these tests" in mb.items[0].prompt and "sum_of_squares" in mb.items[0].prompt


def fenced(code: str) -> str:
    return f"Here is the function.\n\n```python\n{code}\n```\nIt returns the answer."


@needs_bwrap
def test_reference_solutions_pass_in_every_answer_style(opted_in) -> None:
    for row, item in zip(raw(HUMANEVAL), read_code_problems(HUMANEVAL, "humaneval")):
        whole = row["prompt"] + row["canonical_solution"]
        for output in (row["canonical_solution"], fenced(whole), whole):
            result = check_code(output, item["answer"], "humaneval", FAST)
            assert result.passed, (row["task_id"], result.reason, result.stderr[-500:])
    for row, item in zip(raw(MBPP), read_code_problems(MBPP, "mbpp")):
        for output in (row["code"], fenced(row["code"])):
            result = check_code(output, item["answer"], "mbpp", FAST)
            assert result.passed, (row["task_id"], result.reason, result.stderr[-500:])


@pytest.mark.parametrize("output, reason", [
    ("    return 0\n", "AssertionError"),
    ("```python\ndef count_vowels(text):\n    return len(text)\n```", "AssertionError"),
    ("```python\ndef count_vowels(text)\n    return 0\n```", "SyntaxError"),
    ("I am not sure how to do this.", "SyntaxError"),
    ("    while True:\n        pass\n", "time limit"),
    ("    import os\n    os._exit(0)\n", "before the program's end"),
])
@needs_bwrap
def test_wrong_or_hostile_answers_fail_with_their_reason(opted_in, output: str, reason: str) -> None:
    gold = read_code_problems(HUMANEVAL, "humaneval")[0]["answer"]
    result = check_code(output, gold, "humaneval", FAST)
    assert not result.passed and reason in result.reason, result.reason


def test_extract_code_prefers_the_block_defining_the_entry_point() -> None:
    output = "```\nprint('usage')\n```\nthen\n```python\ndef f(x):\n    return x\n```"
    assert extract_code(output, "f").startswith("def f(x)")
    assert extract_code(output) == "print('usage')\n"
    assert extract_code("no fences") == "no fences"


@pytest.mark.parametrize("line, message", [
    ('{"task_id": "a", "prompt": "def f():\\n", "test": "", "entry_point": "f"}', "'test' must be a non-empty"),
    ('{"task_id": "a", "prompt": "def f():\\n", "test": "x", "entry_point": "1f"}', "'entry_point' must be"),
    ('{"task_id": true, "prompt": "p", "test": "t", "entry_point": "f"}', "'task_id'"),
    ("[1]", "expected a humaneval object"),
    ("{", "invalid JSON"),
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
])
def test_malformed_files_are_one_clear_error(tmp_path, line: str, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(line + "\n")
    with pytest.raises(ValueError, match="line 1") as info:
        read_code_problems(path, "humaneval")
    assert message in str(info.value)


def run_cli(*args: str, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != ALLOW_ENV}
    env.update({"HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT), **(env_extra or {})})
    return subprocess.run([sys.executable, "-m", "s2d2", *args], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=300)


def test_bench_refuses_code_scorers_without_the_flag_before_loading_a_model(tmp_path) -> None:
    proc = run_cli("bench", "--model", "/nonexistent/model", "--task", f"jsonl:{HUMANEVAL}", "--scorer", "humaneval",
                   "--out", str(tmp_path))
    assert proc.returncode == 2 and ALLOW_ENV in proc.stderr and proc.stderr.count("\n") == 1


@needs_bwrap
def test_bench_and_eval_task_run_code_tasks_on_the_bundled_model(tmp_path) -> None:
    grid = tmp_path / "grid.json"
    grid.write_text(json.dumps([{"name": "s2d2", "preset": "sdar-config-a"}]))
    proc = run_cli("bench", "--model", "tiny", "--task", f"jsonl:{MBPP}", "--scorer", "mbpp", "--problems", "2",
                   "--grid", str(grid), "--gen-length", "16", "--out", str(tmp_path / "out"), "--allow-code-eval",
                   "--no-progress", "--threads", "1")
    assert proc.returncode == 0, proc.stderr[-2000:]
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert results["meta"]["scorer"] == "mbpp" and results["cells"][0]["n"] == 2
    assert results["cells"][0]["accuracy"] == 0.0  # an arithmetic model writes no Python: pass@1 is 0, honestly
    out = tmp_path / "eval.json"
    proc = run_cli("eval-task", "--model", "tiny", "--task", f"jsonl:{HUMANEVAL}", "--scorer", "humaneval",
                   "--n", "2", "--gen-length", "16", "--threads", "1", "--out", str(out),
                   env_extra={ALLOW_ENV: "1"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    res = json.loads(out.read_text())
    assert res["pass@1"] == 0.0 and [f["id"] for f in res["failures"]] == ["S2D2/0", "S2D2/1"]
    assert all(f["reason"].startswith("error:") for f in res["failures"])
