"""Reading a task file of JSON lines (plain or .gz), bounded, with one ValueError naming the file and line."""
from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any, Iterator


def json_lines(path: Path, where: str, max_bytes: int) -> Iterator[tuple[int, Any]]:
    """(line number, parsed value) for each non-blank line. `where` starts every message (e.g. "--task jsonl:F")."""
    if not path.is_file():
        raise ValueError(f"{where}: no such file")
    for line_no, line in enumerate(_text(path, where, max_bytes).splitlines(), 1):
        if not line.strip():
            continue
        try:
            yield line_no, json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{where} line {line_no}: invalid JSON ({exc.msg})") from None
        except RecursionError:
            raise ValueError(f"{where} line {line_no}: nested too deeply") from None


def _text(path: Path, where: str, max_bytes: int) -> str:
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as fh:
            data = fh.read(max_bytes + 1)  # a .gz file is bounded by what it inflates to
    except (OSError, EOFError):
        raise ValueError(f"{where}: not a readable (gzip) text file") from None
    if len(data) > max_bytes:
        raise ValueError(f"{where}: larger than {max_bytes // 2**20} MiB")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{where}: not UTF-8 text") from None
