"""Issue 29, row 7: lm-eval task folders are code (`!function`), so they run only with --trust_task_code, and
indexing one is bounded; a local model's chat template that Jinja's sandbox stops is one line, not a traceback."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from s2d2.harness.task_files import MAX_ENTRIES, TRUST_FLAG, check_task_sources

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "assets" / "tasks" / "lm_eval"
BLOCK_LM_EVAL = ("import sys; sys.modules['lm_eval'] = None; from s2d2.__main__ import main; "
                 "sys.exit(main(sys.argv[1:]))")
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}


def _cli(*args: str, block: bool = True, timeout: int = 120) -> subprocess.CompletedProcess:
    head = ["-c", BLOCK_LM_EVAL] if block else ["-m", "s2d2"]
    return subprocess.run([sys.executable, *head, *args], capture_output=True, text=True, env=ENV, cwd=ROOT,
                          timeout=timeout)


def test_the_shipped_task_folder_is_trusted() -> None:
    check_task_sources(str(SHIPPED), ["s2d2_gsm8k_sample"], trust=False)


def test_a_task_folder_with_python_needs_the_flag(tmp_path) -> None:
    folder = tmp_path / "tasks"
    shutil.copytree(SHIPPED, folder)
    with pytest.raises(ValueError, match=f"`!function` runs Python.*{TRUST_FLAG}"):
        check_task_sources(str(folder), ["s2d2_gsm8k_sample"], trust=False)
    check_task_sources(str(folder), ["s2d2_gsm8k_sample"], trust=True)
    proc = _cli("lm-eval", "--include_path", str(folder), "--tasks", "s2d2_gsm8k_sample")  # before lm-eval imports
    assert proc.returncode == 2 and TRUST_FLAG in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr


@pytest.mark.parametrize("text", [
    "task: t\ncustom_dataset: !function utils.load\n",
    "%TAG !f! !func\n---\ntask: t\ncustom_dataset: !f!tion utils.load\n",  # a tag shorthand
    "task: t\ncustom_dataset: !%66unction utils.load\n",  # a %-escaped tag
    "task: t\nlist:\n  - a: !function utils.load\n",  # nested
], ids=["plain", "tag-shorthand", "escaped", "nested"])
def test_every_spelling_of_the_tag_is_found(tmp_path, text: str) -> None:
    (tmp_path / "t.yaml").write_text(text)
    with pytest.raises(ValueError, match="`!function`"):
        check_task_sources(str(tmp_path), ["t"], trust=False)


def test_an_included_file_and_a_task_file_named_directly_are_checked_too(tmp_path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "base.yaml").write_text("process_docs: !function utils.process\n")
    folder = tmp_path / "tasks"
    folder.mkdir()
    (folder / "t.yaml").write_text("task: t\ninclude: ../elsewhere/base.yaml\n")
    with pytest.raises(ValueError, match="base.yaml: `!function`"):
        check_task_sources(str(folder), ["t"], trust=False)
    with pytest.raises(ValueError, match="base.yaml: `!function`"):
        check_task_sources(None, [str(outside / "base.yaml")], trust=False)


def test_indexing_the_whole_filesystem_is_refused_at_once(tmp_path) -> None:
    for i in range(MAX_ENTRIES + 1):
        (tmp_path / f"f{i}").touch()
    with pytest.raises(ValueError, match=f"more than {MAX_ENTRIES} files"):
        check_task_sources(str(tmp_path), ["t"], trust=True)
    proc = _cli("lm-eval", "--include_path", "/", "--tasks", "t")
    assert proc.returncode == 2 and f"more than {MAX_ENTRIES} files" in proc.stderr, proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr


@pytest.fixture(scope="module")
def escaping_model(tmp_path_factory) -> Path:
    """The bundled model with a chat template that reaches for Python's internals (Jinja's sandbox stops it)."""
    folder = tmp_path_factory.mktemp("model") / "tiny-escape"
    shutil.copytree(ROOT / "assets" / "tiny", folder)
    (folder / "chat_template.jinja").write_text("{{ ''.__class__.__mro__[1].__subclasses__() }}")
    return folder


@pytest.mark.slow  # seconds: a subprocess or a whole CLI run (left out of the quick subset)
def test_generate_with_an_escaping_chat_template_is_one_line(escaping_model: Path) -> None:
    proc = _cli("generate", "--model", str(escaping_model), "--prompt", "hi", block=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: the model's chat template failed (SecurityError"), lines


@pytest.mark.slow  # seconds: a subprocess or a whole CLI run (left out of the quick subset)
def test_lm_eval_with_an_escaping_chat_template_ends_in_one_line(escaping_model: Path, tmp_path) -> None:
    pytest.importorskip("lm_eval")
    proc = _cli("lm-eval", "--model_args", f"pretrained={escaping_model}", "--include_path", str(SHIPPED),
                "--tasks", "s2d2_gsm8k_sample", "--apply_chat_template", "--limit", "1", block=False, timeout=300)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("error: the model's chat template failed (SecurityError"), last
