"""`python -m s2d2 bench`: sweep a grid of decoding configurations over a task set (accuracy vs speed).

    python -m s2d2 bench --model tiny --task arithmetic --n 200 --grid default --out results/

Every problem of every cell appends one JSON line to `<out>/cells/<cell-key>.jsonl`; a rerun skips the problems
already there, so an interrupted sweep resumes and a finished one recomputes nothing. The summary goes to
`results.json` / `results.csv` (+ `README-table.md`: AR, the best baseline and the best S2D2 cell), the Pareto
plots to `pareto.html` (built by components/sweep.py when importable).
"""
from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Optional

from . import __version__
from .sweep import (GRIDS, RESULTS_VERSION, Cell, add_speedups, cell_key, csv_rows, load_grid, readme_table,
                    summarize)

TASKS = ("arithmetic", "gsm8k")


class TaskUnavailable(Exception):
    """A task whose data cannot be reached here; bench prints the message and skips."""


@dataclass(frozen=True)
class Item:
    prompt: str
    chat: Optional[bool]  # None: the model's default (chat template when it has one)
    gold: int


@dataclass(frozen=True)
class Task:
    name: str
    items: list[Item]
    gen_length: int  # default generation length for this task
    score: Callable[[str, int], bool]


def load_task(name: str, n: int) -> Task:
    if name == "arithmetic":
        from .tasks import arithmetic as ar

        items = [Item(ar.prompt_for(p), False, p.answer) for p in ar.heldout(n)]  # the exact training prompt
        return Task(name, items, 96, ar.score)
    if name == "gsm8k":
        return _gsm8k(n)
    raise ValueError(f"--task: unknown task {name!r}; allowed: {', '.join(TASKS)}")


def _gsm8k(n: int) -> Task:
    try:
        import datasets  # type: ignore
    except ImportError:
        raise TaskUnavailable("gsm8k needs the `datasets` package (pip install datasets)") from None
    try:
        data = datasets.load_dataset("gsm8k", "main", split="test")
    except Exception as exc:  # offline, no cache, hub error: all mean "not reachable here"
        raise TaskUnavailable(f"gsm8k is not reachable here ({type(exc).__name__}: {str(exc)[:80]})") from None
    from .tasks.arithmetic import extract_answer

    items = []
    for row in list(data)[:n]:
        gold = extract_answer(row["answer"])
        if gold is not None:
            items.append(Item(row["question"], None, gold))
    return Task("gsm8k", items, 256, _gsm8k_score)


def _gsm8k_score(text: str, gold: int) -> bool:
    """Strict `#### N` match, else the last integer in the output (lm-eval's flexible extract)."""
    import re

    from .tasks.arithmetic import extract_answer

    got = extract_answer(text)
    if got is None:
        nums = re.findall(r"-?\d[\d,]*", text or "")
        got = int(nums[-1].replace(",", "")) if nums and nums[-1].replace(",", "").lstrip("-").isdigit() else None
    return got == gold


# -- running ------------------------------------------------------------------------------------------------------

def problem_row(i: int, result: Any, correct: bool) -> dict[str, Any]:
    m, steps = result.metrics, result.trace.steps
    return {
        "i": i, "correct": bool(correct), "nfe": m["nfe"], "generated": m["generated_tokens"],
        "wall_s": m["wall_seconds"], "query_tokens": m["query_tokens"], "num_drafts": m["num_drafts"],
        "num_draft_tokens": m["num_draft_tokens"], "num_accepted_tokens": m["num_accepted_tokens"],
        "verify_steps": sum(s.verification is not None for s in steps),
        "decided_steps": sum(s.decision is not None for s in steps),
        "edits": m.get("edits", 0),
    }


def read_rows(path: Path) -> dict[int, dict[str, Any]]:
    """Finished problems of a cell; a torn last line (an interrupted write) is ignored and redone."""
    rows: dict[int, dict[str, Any]] = {}
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(row, dict) and isinstance(row.get("i"), int):
                rows[row["i"]] = row
    return rows


def run_grid(model: Any, task: Task, cells: list[Cell], out: Path, *, seed: int = 0, gen_length: Optional[int] = None,
             generate: Optional[Callable[..., Any]] = None, progress: bool = True) -> list[dict[str, Any]]:
    """Run every (cell, problem) not already stored under `out/cells`; return the results rows."""
    if generate is None:
        from .api import generate
    gen = gen_length or task.gen_length
    context = {"model": model.spec.name, "task": task.name, "seed": seed}
    cell_dir = out / "cells"
    cell_dir.mkdir(parents=True, exist_ok=True)
    plan = []
    for cell in cells:
        cfg = cell.config.replace(gen_length=gen)
        path = cell_dir / f"{cell_key(Cell(cell.name, cfg), context)}.jsonl"
        done = read_rows(path)
        plan.append((Cell(cell.name, cfg), path, done, [i for i in range(len(task.items)) if i not in done]))
    todo = sum(len(p[3]) for p in plan)
    bar = _progress(todo, progress)
    for cell, path, done, missing in plan:
        bar.set_description(cell.name[:30])
        if not missing:
            continue
        with path.open("a", encoding="utf-8") as fh:
            if path.stat().st_size and not path.read_bytes().endswith(b"\n"):
                fh.write("\n")  # a torn last line from an interrupted write: start a fresh line after it
            for i in missing:
                item = task.items[i]
                result = generate(model, item.prompt, cell.config, seed=seed + i, detailed=False, chat=item.chat)
                row = problem_row(i, result, task.score(result.text, item.gold))
                fh.write(json.dumps(row) + "\n")
                fh.flush()  # one line per problem: a kill loses at most the problem in flight
                done[i] = row
                bar.update(1)
    bar.close()
    return add_speedups([summarize(c, [d[i] for i in range(len(task.items))]) for c, _, d, _ in plan])


def _progress(total: int, enabled: bool) -> Any:
    from tqdm.auto import tqdm

    return tqdm(total=total, unit="run", disable=not enabled or total == 0, file=sys.stderr)


def write_results(out: Path, cells: list[dict[str, Any]], meta: dict[str, Any]) -> dict[str, Path]:
    out.mkdir(parents=True, exist_ok=True)
    data = {"version": RESULTS_VERSION, "meta": meta, "cells": cells}
    paths = {"json": out / "results.json", "csv": out / "results.csv"}
    paths["json"].write_text(json.dumps(data, indent=1, allow_nan=False), encoding="utf-8")
    with paths["csv"].open("w", newline="", encoding="utf-8") as fh:
        csv.writer(fh).writerows(csv_rows(cells))
    paths["md"] = out / "README-table.md"
    paths["md"].write_text(readme_table(data) + "\n", encoding="utf-8")
    html = _plots_html(data)
    if html is not None:
        paths["html"] = out / "pareto.html"
        paths["html"].write_text(html, encoding="utf-8")
    return paths


def _plots_html(data: dict[str, Any]) -> Optional[str]:
    """Plots live in components/ (plotly); the CLI imports them only here, and goes on without them."""
    try:
        from components.sweep import pareto_html
    except ImportError:
        print("note: components.sweep (plotly) is not importable; pareto.html not written", file=sys.stderr)
        return None
    return pareto_html(data)


# -- CLI ----------------------------------------------------------------------------------------------------------

def add_bench_args(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    p.add_argument("--model", default="tiny", help="registry name, Hub id or local folder (default: tiny)")
    p.add_argument("--task", default="arithmetic", choices=TASKS)
    p.add_argument("--n", type=int, default=200, help="problems per cell (default 200)")
    p.add_argument("--grid", default="default", help=f"{' | '.join(GRIDS)} | a JSON file of cells")
    p.add_argument("--out", default="results", help="output folder (resumable; default results/)")
    p.add_argument("--gen-length", type=int, default=None, help="tokens per answer (default: the task's)")
    p.add_argument("--seed", type=int, default=0, help="problem i decodes with seed + i")
    p.add_argument("--device", default=None)
    p.add_argument("--dtype", default=None, choices=[None, "float32", "bfloat16", "float16", "float64"])
    p.add_argument("--no-progress", action="store_true")
    return p


def run_bench(args: argparse.Namespace) -> int:
    if args.n < 1:
        raise ValueError(f"--n: must be at least 1, got {args.n}")
    cells = load_grid(args.grid)
    try:
        task = load_task(args.task, args.n)
    except TaskUnavailable as exc:
        print(f"skipped: {exc}", file=sys.stderr)
        return 0
    from .models.loading import load_model

    model = load_model(args.model, device=args.device, dtype=args.dtype)
    out = Path(args.out)
    t0 = time.perf_counter()
    results = run_grid(model, task, cells, out, seed=args.seed, gen_length=args.gen_length,
                       progress=not args.no_progress)
    meta = {"model": model.spec.name, "task": task.name, "n": len(task.items), "grid": args.grid,
            "seed": args.seed, "gen_length": args.gen_length or task.gen_length, "device": str(model.device),
            "dtype": str(model.dtype).replace("torch.", ""), "library_version": __version__,
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "seconds": round(time.perf_counter() - t0, 1)}
    paths = write_results(out, results, meta)
    print(format_table(results))
    print("\nwritten: " + ", ".join(str(p) for p in paths.values()))
    return 0


def format_table(cells: list[dict[str, Any]]) -> str:
    cols = [("name", 26), ("accuracy", 8), ("nfe_per_token", 13), ("wall_per_token", 14),
            ("speedup_nfe_vs_ar", 17), ("speedup_wall_vs_ar", 18)]
    lines = ["  ".join(f"{k:>{w}}" if i else f"{k:<{w}}" for i, (k, w) in enumerate(cols))]
    for c in cells:
        vals = [c["name"][:26]] + [("-" if c[k] is None else f"{c[k]:.4g}") for k, _ in cols[1:]]
        lines.append("  ".join(f"{v:>{w}}" if i else f"{v:<{w}}" for i, (v, (_, w)) in enumerate(zip(vals, cols))))
    return "\n".join(lines)
