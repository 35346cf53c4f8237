"""Task sets for `python -m s2d2 bench`: the bundled arithmetic set, GSM8K through `datasets`, or a JSONL file.

    load_task("arithmetic", 200)
    load_task("jsonl:gsm8k_test.jsonl", 1319, scorer="gsm8k")   # one {"question", "answer", "id"?} per line

A task's `fingerprint` names everything that changes its rows (the problems and the scorer, not the file's path),
so a bench rerun resumes exactly when the problems are the same.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from .jsonl import json_lines
from .scoring import CODE_SCORERS, SCORERS, check_gold

TASKS = ("arithmetic", "gsm8k", "jsonl:PATH")
DEFAULT_SCORER = {"arithmetic": "arithmetic", "gsm8k": "gsm8k", "jsonl": "gsm8k"}
GSM8K_HINT = ("--task gsm8k: {why}. Run it from a local copy instead: --task jsonl:test.jsonl --scorer gsm8k "
              "(GSM8K's grade_school_math/data/test.jsonl already has the question/answer fields)")
MAX_FILE_BYTES = 256 * 1024 * 1024
CODE_GEN_LENGTH = 512  # tokens per answer for code tasks (a function and its code fence)


@dataclass(frozen=True)
class Item:
    prompt: str
    chat: Optional[bool]  # None: the model's default (chat template when it has one)
    gold: str  # what the scorer compares with: a GSM8K solution, a number, or an exact answer
    id: str


@dataclass(frozen=True)
class Task:
    name: str  # for people: "arithmetic", "gsm8k", "jsonl:sample.jsonl"
    items: list[Item]
    gen_length: int  # default generation length for this task
    scorer: str
    fingerprint: str  # for cell keys: changes exactly when the problems or the scorer do
    has_ids: bool = False  # the file named its problems (results then list the ids)

    def score(self, text: str, item: Item) -> bool:
        return SCORERS[self.scorer](text, item.gold)


def load_task(spec: str, n: int, scorer: Optional[str] = None, say: Any = print) -> Task:
    """The first `n` problems of a task (all of a file or dataset that has fewer; `say` gets that note)."""
    if n < 1:
        raise ValueError(f"--problems: must be at least 1, got {n}")
    kind = "jsonl" if spec.startswith("jsonl:") else spec
    if kind not in DEFAULT_SCORER:
        raise ValueError(f"--task: unknown task {spec!r}; allowed: {', '.join(TASKS)}")
    if scorer is not None and scorer not in SCORERS:
        raise ValueError(f"--scorer: unknown scorer {scorer!r}; allowed: {', '.join(SCORERS)}")
    scorer = scorer or DEFAULT_SCORER[kind]
    if scorer in CODE_SCORERS:
        return _code_task(spec, kind, n, scorer, say)
    if kind == "arithmetic":
        return _arithmetic(n, scorer)
    if kind == "gsm8k":
        rows, name, gen = _gsm8k_rows(), "gsm8k", 256
    else:
        path = Path(spec[len("jsonl:"):])
        rows, name, gen = read_jsonl_problems(path), f"jsonl:{path.name}", 256
    task = _from_rows(rows, name, gen, scorer, n)
    if len(task.items) < n:
        say(f"note: {name} has {len(task.items)} problems; running all of them")
    return task


def _code_task(spec: str, kind: str, n: int, scorer: str, say: Any) -> Task:
    """A HumanEval- or MBPP-format file; refused before anything is read unless the user opted in to running code."""
    from ..sandbox import REFUSAL, code_eval_allowed, isolation_refusal
    from .code import read_code_problems

    if kind != "jsonl":
        raise ValueError(f"--scorer {scorer}: give the problems as a file, --task jsonl:PATH ({scorer} format)")
    if not code_eval_allowed():
        raise ValueError(f"--scorer {scorer}: {REFUSAL}")
    if (refusal := isolation_refusal()) is not None:
        raise ValueError(f"--scorer {scorer}: {refusal}")
    path = Path(spec[len("jsonl:"):])
    task = _from_rows(read_code_problems(path, scorer), f"jsonl:{path.name}", CODE_GEN_LENGTH, scorer, n)
    if len(task.items) < n:
        say(f"note: {task.name} has {len(task.items)} problems; running all of them")
    return task


def _arithmetic(n: int, scorer: str) -> Task:
    from . import arithmetic as ar

    if n > ar.HELDOUT_MAX:
        raise ValueError(f"--problems: the arithmetic task has {ar.HELDOUT_MAX} held-out problems, got {n}")
    items = [Item(ar.prompt_for(p), False, str(p.answer), str(i)) for i, p in enumerate(ar.heldout(n))]
    # The held-out set is fixed by code, so its name is its fingerprint (as in results written before files).
    return Task("arithmetic", items, 96, scorer, "arithmetic" if scorer == "arithmetic" else f"arithmetic/{scorer}")


def _from_rows(rows: list[dict[str, Any]], name: str, gen: int, scorer: str, n: int) -> Task:
    for k, row in enumerate(rows):
        why = check_gold(scorer, row["answer"])
        if why:
            raise ValueError(f"--task {name}: problem {row.get('id', k + 1)}: {why}")
    blob = json.dumps([[r["question"], r["answer"]] for r in rows] + [scorer], ensure_ascii=False)
    fingerprint = f"{name.split(':')[0]}:{hashlib.sha1(blob.encode()).hexdigest()[:12]}"
    has_ids = any("id" in r for r in rows)
    items = [Item(r["question"], None, r["answer"], str(r.get("id", k + 1))) for k, r in enumerate(rows[:n])]
    return Task(name, items, gen, scorer, fingerprint, has_ids)


def read_jsonl_problems(path: Path) -> list[dict[str, Any]]:
    """Problems of a JSONL file: one object per line with "question" and "answer" (string or number), optionally
    "id"; blank lines are skipped. One ValueError naming the file and line for anything else."""
    where = f"--task jsonl:{path}"
    rows, ids = [], set()
    for line_no, row in json_lines(path, where, MAX_FILE_BYTES):
        rows.append(_problem(row, f"{where} line {line_no}"))
        if "id" in rows[-1]:
            if rows[-1]["id"] in ids:
                raise ValueError(f"{where} line {line_no}: duplicate id {rows[-1]['id']!r}")
            ids.add(rows[-1]["id"])
    if not rows:
        raise ValueError(f"{where}: no problems (expected one JSON object per line)")
    return rows


def _problem(row: Any, where: str) -> dict[str, Any]:
    if not isinstance(row, dict):
        raise ValueError(f"{where}: expected an object with 'question' and 'answer'")
    question, answer = row.get("question"), row.get("answer")
    if not isinstance(question, str) or not question.strip():
        raise ValueError(f"{where}: 'question' must be a non-empty string")
    if isinstance(answer, bool) or not isinstance(answer, (str, int, float)):
        raise ValueError(f"{where}: 'answer' must be a string or a number")
    out = {"question": question, "answer": str(answer)}
    if "id" in row:
        if isinstance(row["id"], bool) or not isinstance(row["id"], (str, int)):
            raise ValueError(f"{where}: 'id' must be a string or an integer")
        out["id"] = str(row["id"])
    return out


def _gsm8k_rows() -> list[dict[str, Any]]:
    try:
        import datasets  # type: ignore
    except ImportError:
        raise ValueError(GSM8K_HINT.format(why="the `datasets` package is not installed")) from None
    try:
        data = datasets.load_dataset("openai/gsm8k", "main", split="test")
    except Exception as exc:  # offline, no cache, hub error: all mean "not reachable here"
        why = f"the Hugging Face Hub is not reachable ({type(exc).__name__})"
        raise ValueError(GSM8K_HINT.format(why=why)) from None
    return [_problem(dict(row), f"gsm8k row {k}") for k, row in enumerate(data)]
