"""Work items of a sweep on disk: which (cell, problem) pairs are done, who does the rest, and the rank files.

A work item is (cell, problem). Every rank appends one JSON line per finished item to its own file,
`<out>/rows/rank-<r>.jsonl`, flushed per line; a line carries its cell key and problem index, so a file may hold
rows of any cell, sweep context or earlier run. Whoever merges reads every rank file there is (and the per-cell
files `<out>/cells/<key>.jsonl` of the single-process layout that came before), so a rerun with any number of
ranks resumes from everything already on disk. A kill mid-write leaves a torn last line: readers skip it, and
its writer starts a fresh line before appending, so the item is simply done again.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator, TextIO

ROWS_DIR, LEGACY_DIR = "rows", "cells"
Key = tuple[str, int]  # (cell key, problem index)


def rank_file(out: Path, rank: int) -> Path:
    return out / ROWS_DIR / f"rank-{rank}.jsonl"


def parse_rows(text: str, cell: str | None = None) -> Iterator[dict[str, Any]]:
    """Rows of a JSONL text; torn or foreign lines are skipped. `cell` fills in rows of the legacy per-cell files."""
    for line in text.splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if not isinstance(row, dict) or not isinstance(row.get("i"), int):
            continue
        if cell is not None:
            row.setdefault("cell", cell)
        if isinstance(row.get("cell"), str):
            yield row


def read_all_rows(out: Path) -> dict[Key, dict[str, Any]]:
    """Every finished item under `out`; where two files hold the same item, the first file (sorted) wins."""
    rows: dict[Key, dict[str, Any]] = {}
    sources = [(p, None) for p in sorted((out / ROWS_DIR).glob("rank-*.jsonl"))]
    sources += [(p, p.stem) for p in sorted((out / LEGACY_DIR).glob("*.jsonl"))]
    for path, cell in sources:
        for row in parse_rows(_read(path), cell):
            rows.setdefault((row["cell"], row["i"]), row)
    return rows


def _read(path: Path) -> str:
    return path.read_bytes().decode("utf-8", errors="replace")


def plan_items(cell_keys: list[str], n: int, done: set[Key] | dict[Key, Any]) -> list[tuple[int, int]]:
    """The missing (cell index, problem index) pairs in a stable order: cell by cell, problems ascending."""
    return [(c, i) for c, key in enumerate(cell_keys) for i in range(n) if (key, i) not in done]


def shard(plan: list[tuple[int, int]], rank: int, world_size: int) -> list[tuple[int, int]]:
    """Rank `rank`'s items: round-robin over the plan, so every rank gets a near-equal slice of every cell."""
    return plan[rank::world_size]


class RowWriter:
    """Appends rows to one rank's file, one flushed line each (a kill loses at most the item in flight)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        torn = path.is_file() and path.stat().st_size > 0 and not path.read_bytes().endswith(b"\n")
        self._fh: TextIO = path.open("a", encoding="utf-8")
        if torn:  # an interrupted write: start a fresh line after it
            self._fh.write("\n")
            self._fh.flush()

    def write(self, row: dict[str, Any]) -> None:
        self._fh.write(json.dumps(row) + "\n")
        self._fh.flush()

    def close(self) -> None:
        self._fh.close()

    def __enter__(self) -> "RowWriter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class RowCounter:
    """Counts rows appended to the rank files since it was made (rank 0's global progress).

    It reads only new bytes and counts only complete, valid rows, so it never runs ahead of the work done. A file
    on a filesystem shared between nodes may show its new lines a little late: the count lags, never leads.
    """

    def __init__(self, out: Path) -> None:
        self.dir = out / ROWS_DIR
        self.offsets = {p.name: p.stat().st_size for p in self.dir.glob("rank-*.jsonl")}
        self.pending = {name: b"" for name in self.offsets}

    def poll(self) -> int:
        """Rows completed since the last poll."""
        new = 0
        for path in sorted(self.dir.glob("rank-*.jsonl")):
            start = self.offsets.get(path.name, 0)
            try:
                with path.open("rb") as fh:
                    fh.seek(start)
                    chunk = fh.read()
            except OSError:
                continue
            self.offsets[path.name] = start + len(chunk)
            data = self.pending.get(path.name, b"") + chunk
            complete, _, rest = data.rpartition(b"\n")
            self.pending[path.name] = rest
            if complete:
                new += sum(1 for _ in parse_rows(complete.decode("utf-8", errors="replace")))
        return new
