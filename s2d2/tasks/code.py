"""Code benchmarks in HumanEval and MBPP format: read the JSONL, build the program, run it in the sandbox (pass@1).

    HumanEval: {"task_id", "prompt" (signature + docstring), "test" (def check(candidate): ...), "entry_point",
                "canonical_solution"?}            one object per line; HumanEval.jsonl.gz is read as is
    MBPP:      {"task_id", "text", "test_list" [assert lines], "test_setup_code"?, "code"?}

The model is asked for the function (HumanEval: complete this function; MBPP: the task text and its tests, as in
MBPP's own prompt). From its output the code is the first fenced block that defines the entry point (else the
first fenced block, else the whole output). A HumanEval program is the prompt followed by the code (a completion of
the prompt's body, or a whole new definition of the function after it: the prompt's imports stay in force), then
the test and `check(entry_point)`. MBPP programs are setup + code + the asserts. A sample passes when its
program runs to the end and exits 0 in the sandbox (s2d2/sandbox), which runs only after the user's opt-in.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Optional

from ..sandbox import SandboxLimits, SandboxResult, run_program
from .jsonl import json_lines

FORMATS = ("humaneval", "mbpp")
MAX_FILE_BYTES = 64 * 1024 * 1024
_FENCE = re.compile(r"```[ \t]*([\w+-]*)[ \t]*\n(.*?)```", re.S)
_MBPP_NAME = re.compile(r"assert\s+(?:not\s+)?\(?\s*([A-Za-z_]\w*)\s*\(")
HUMANEVAL_ASK = ("Complete the following Python function. Reply with the whole function in one ```python code "
                 "block.\n\n```python\n{prompt}```")
MBPP_ASK = ("{text}\nYour code should pass these tests:\n\n{tests}\n\nReply with the Python code in one ```python "
            "code block.")


def read_code_problems(path: Path, fmt: str) -> list[dict[str, Any]]:
    """Rows {"question", "answer" (the JSON the scorer reads), "id"} from a HumanEval- or MBPP-format file."""
    where = f"--task jsonl:{path}"
    rows, ids = [], set()
    for line_no, row in json_lines(path, where, MAX_FILE_BYTES):
        if not isinstance(row, dict):
            raise ValueError(f"{where} line {line_no}: expected a {fmt} object")
        problem = (_humaneval if fmt == "humaneval" else _mbpp)(row, f"{where} line {line_no}")
        if problem["id"] in ids:
            raise ValueError(f"{where} line {line_no}: duplicate task_id {problem['id']!r}")
        ids.add(problem["id"])
        rows.append(problem)
    if not rows:
        raise ValueError(f"{where}: no problems (expected one {fmt} object per line)")
    return rows


def _text_field(row: dict[str, Any], key: str, where: str, required: bool = True) -> str:
    value = row.get(key, None if required else "")
    if not isinstance(value, str) or (required and not value.strip()):
        raise ValueError(f"{where}: {key!r} must be a{' non-empty' if required else ''} string")
    return value


def _task_id(row: dict[str, Any], where: str) -> str:
    value = row.get("task_id")
    if isinstance(value, bool) or not isinstance(value, (str, int)) or str(value) == "":
        raise ValueError(f"{where}: 'task_id' must be a string or an integer")
    return str(value)


def _humaneval(row: dict[str, Any], where: str) -> dict[str, Any]:
    prompt, test = _text_field(row, "prompt", where), _text_field(row, "test", where)
    entry = _text_field(row, "entry_point", where)
    if not entry.isidentifier():
        raise ValueError(f"{where}: 'entry_point' must be a Python name, got {entry[:40]!r}")
    gold = {"format": "humaneval", "prompt": prompt, "test": test, "entry_point": entry}
    return {"question": HUMANEVAL_ASK.format(prompt=prompt), "answer": json.dumps(gold), "id": _task_id(row, where)}


def _mbpp(row: dict[str, Any], where: str) -> dict[str, Any]:
    text = _text_field(row, "text", where)
    tests = row.get("test_list")
    if not isinstance(tests, list) or not tests or not all(isinstance(t, str) and t.strip() for t in tests):
        raise ValueError(f"{where}: 'test_list' must be a non-empty list of assert lines")
    setup = _text_field(row, "test_setup_code", where, required=False)
    gold = {"format": "mbpp", "tests": tests, "setup": setup}
    question = MBPP_ASK.format(text=text.strip(), tests="\n".join(tests))
    return {"question": question, "answer": json.dumps(gold), "id": _task_id(row, where)}


def read_gold(gold: str, fmt: str) -> Optional[dict[str, Any]]:
    """The scorer's view of a problem, or None when `gold` is not one of `fmt`'s (for the loader's check)."""
    try:
        data = json.loads(gold)
    except (json.JSONDecodeError, TypeError):
        return None
    return data if isinstance(data, dict) and data.get("format") == fmt else None


def extract_code(output: str, entry_point: Optional[str] = None) -> str:
    """The code in a model's answer: the first fenced block defining `entry_point`, else the first fenced block,
    else the whole output."""
    blocks = [body for lang, body in _FENCE.findall(output or "") if lang.lower() in ("", "python", "py", "python3")]
    if not blocks:
        return output or ""
    if entry_point:
        for body in blocks:
            if _defines(body, entry_point):
                return body
    return blocks[0]


def _defines(code: str, name: str) -> bool:
    return re.search(rf"^\s*(?:async\s+)?def\s+{re.escape(name)}\s*\(", code, re.M) is not None


def humaneval_program(output: str, gold: dict[str, Any]) -> str:
    entry, prompt = gold["entry_point"], gold["prompt"]
    code = extract_code(output, entry)
    body = prompt + "\n" + code if _defines(code, entry) else prompt + code
    return f"{body}\n\n{gold['test']}\n\ncheck({entry})\n"


def mbpp_program(output: str, gold: dict[str, Any]) -> str:
    names = [m.group(1) for t in gold["tests"] for m in [_MBPP_NAME.search(t)] if m]
    code = extract_code(output, names[0] if names else None)
    return f"{gold['setup']}\n{code}\n\n" + "\n".join(gold["tests"]) + "\n"


def check_code(output: str, gold: str, fmt: str, limits: SandboxLimits = SandboxLimits()) -> SandboxResult:
    """Run the sample's program in the sandbox (CodeEvalRefused without the opt-in)."""
    data = read_gold(gold, fmt)
    if data is None:
        raise ValueError(f"scorer {fmt}: the problem is not in {fmt} format")
    build = humaneval_program if fmt == "humaneval" else mbpp_program
    return run_program(build(output, data), limits)


def score_humaneval(output: str, gold: str) -> bool:
    return check_code(output, gold, "humaneval").passed


def score_mbpp(output: str, gold: str) -> bool:
    return check_code(output, gold, "mbpp").passed
