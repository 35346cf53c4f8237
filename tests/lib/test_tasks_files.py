"""Task sets from files (`--task jsonl:PATH`), GSM8K through `datasets`, the named scorers and the bundled sample."""
from __future__ import annotations

import json
import re
import sys
import types
from pathlib import Path

import pytest

from s2d2.tasks.scoring import SCORERS, check_gold, parse_number
from s2d2.tasks.sets import load_task

SAMPLE = Path(__file__).resolve().parents[2] / "assets" / "tasks" / "gsm8k_style_sample.jsonl"


def _write(path: Path, rows: list) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.mark.parametrize("output, gold, right", [
    ("She has 3 + 4 = 7 apples.\n#### 7", "#### 7", True),
    ("#### 1,234", "The total is 1234.\n#### 1234", True),  # commas, gold as a full GSM8K solution
    ("so the answer is $18.00.", "18", True),  # no '####': the last number (flexible extract)
    ("#### 17 ... and later 18", "18", False),  # the strict '####' match wins over the last number
    ("it costs 2.5 dollars", "2.50", True),
    ("no number here", "5", False),
    ("#### -3", "-3", True),
])
def test_gsm8k_scorer(output, gold, right):
    assert SCORERS["gsm8k"](output, gold) is right


def test_arithmetic_and_exact_scorers():
    arith = SCORERS["arithmetic"]
    assert arith("x = 12\n#### 12", "12") and arith("#### 12", "steps\n#### 12")
    assert not arith("the answer is 12", "12")  # strict: needs the '####' line
    exact = SCORERS["exact"]
    assert exact("  Paris \n", "Paris") and exact("New   York", "New York") and not exact("paris", "Paris")
    assert parse_number("$1,000.50") == parse_number("1000.5") and parse_number("abc") is None
    assert check_gold("gsm8k", "no number") and check_gold("arithmetic", "2.5") and check_gold("exact", "  ")
    assert check_gold("gsm8k", "#### 3") is None


def test_jsonl_task_loads_ids_fingerprints_and_notes(tmp_path):
    rows = [{"question": "q1?", "answer": "#### 1", "id": "a"}, "", {"question": "q2?", "answer": 2, "id": 7}]
    path = _write(tmp_path / "set.jsonl", rows)
    notes = []
    task = load_task(f"jsonl:{path}", 5, say=notes.append)
    assert task.name == "jsonl:set.jsonl" and task.scorer == "gsm8k" and task.gen_length == 256
    assert [(i.prompt, i.gold, i.id, i.chat) for i in task.items] == [("q1?", "#### 1", "a", None),
                                                                       ("q2?", "2", "7", None)]
    assert task.has_ids and notes == ["note: jsonl:set.jsonl has 2 problems; running all of them"]
    assert task.score("so #### 2", task.items[1]) and not task.score("#### 2", task.items[0])
    # the fingerprint follows the problems and the scorer, not the path or --problems
    moved = _write(tmp_path / "moved.jsonl", rows)
    assert load_task(f"jsonl:{moved}", 1).fingerprint == task.fingerprint
    assert load_task(f"jsonl:{path}", 5, scorer="exact").fingerprint != task.fingerprint
    changed = _write(tmp_path / "changed.jsonl", [rows[0], {**rows[2], "answer": 3}])
    assert load_task(f"jsonl:{changed}", 5).fingerprint != task.fingerprint
    assert load_task("arithmetic", 2).fingerprint == "arithmetic"  # as before files: old sweeps still resume


@pytest.mark.parametrize("lines, message", [
    (["{not json"], "line 1: invalid JSON"),
    ([{"answer": "#### 1"}], "line 1: 'question' must be a non-empty string"),
    ([{"question": "q", "answer": "#### 1"}, {"question": "q", "answer": None}], "line 2: 'answer' must be"),
    ([{"question": "q", "answer": "1", "id": 1}, {"question": "r", "answer": "2", "id": "1"}], "duplicate id '1'"),
    ([[1, 2]], "line 1: expected an object"),
    ([], "no problems"),
    ([{"question": "q", "answer": "forty", "id": "x"}], "problem x: answer 'forty' is not readable by scorer gsm8k"),
])
def test_bad_jsonl_files_say_where(tmp_path, lines, message):
    path = _write(tmp_path / "bad.jsonl", lines)
    with pytest.raises(ValueError, match=re.escape(message)):
        load_task(f"jsonl:{path}", 10)


def test_task_and_scorer_names_are_checked():
    with pytest.raises(ValueError, match="--task: unknown task 'nope'"):
        load_task("nope", 3)
    with pytest.raises(ValueError, match="--scorer: unknown scorer"):
        load_task("arithmetic", 3, scorer="fuzzy")
    with pytest.raises(ValueError, match="--problems: the arithmetic task has 2000"):
        load_task("arithmetic", 2001)


def test_gsm8k_through_datasets_and_its_one_line_fallback(monkeypatch):
    rows = [{"question": "Q one?", "answer": "1 + 1 = 2\n#### 2"}, {"question": "Q two?", "answer": "#### 5"}]
    calls = []

    def load_dataset(*args, **kwargs):
        calls.append((args, kwargs))
        return rows

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=load_dataset))
    task = load_task("gsm8k", 1)
    assert calls == [(("openai/gsm8k", "main"), {"split": "test"})]
    assert task.name == "gsm8k" and task.scorer == "gsm8k" and [i.prompt for i in task.items] == ["Q one?"]
    assert task.score("#### 2", task.items[0])

    def offline(*args, **kwargs):
        raise ConnectionError("offline")

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=offline))
    with pytest.raises(ValueError, match=r"Hub is not reachable \(ConnectionError\)\. .*--task jsonl:"):
        load_task("gsm8k", 1)


def test_the_bundled_sample_is_gsm8k_format_and_its_arithmetic_holds():
    rows = [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 20 and len({r["id"] for r in rows}) == 20
    task = load_task(f"jsonl:{SAMPLE}", 20)
    for row, item in zip(rows, task.items):
        assert set(row) == {"id", "question", "answer"} and row["answer"].count("####") == 1
        # every "a op b = c" step (and GSM8K's <<a op b = c>> annotations) is true, and #### is the last result
        steps = re.findall(r"(\d+(?: [-+*/] \d+)+) = \$?(?:<<[^>]*>>)?(\d+)", row["answer"])
        assert steps, row["id"]
        for expr, result in steps:
            assert eval(expr) == int(result), (row["id"], expr, result)  # noqa: S307 (digits and + - * / only)
        assert row["answer"].endswith(f"#### {steps[-1][1]}") and task.score(row["answer"], item)
