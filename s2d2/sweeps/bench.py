"""`python -m s2d2 bench`: sweep a grid of decoding configurations over a task set (accuracy vs speed).

    python -m s2d2 bench --model tiny --task arithmetic --problems 200 --grid default --out results/
    torchrun --nproc_per_node 8 -m s2d2 bench --model JetLM/SDAR-8B-Chat --task jsonl:test.jsonl --problems 1319 ...

The work is (cell, problem) items. Rank 0 lists the items with no row on disk yet and broadcasts that plan; each
rank decodes its round-robin share with its own model replica and appends a row per item to its own file
(s2d2/sweeps/shards.py); rank 0 draws one progress bar for all ranks, then merges every row under `<out>` into
`results.json` / `results.csv` / `README-table.md`, exactly what a single process writes (the plots are the app's:
`python -m components.sweep.panel <out>/results.json` writes `pareto.html`; the library never imports plotly). Problem i decodes with seed + i in every cell, whichever rank runs it, so
accuracy, NFE and acceptance do not depend on the number of processes; only wall times do. A rerun of the same
command, with any number of processes, does only the items still missing.
"""
from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Optional

from .. import __version__
from .. import cli_checks as checks
from ..cli_args import add_dtype
from ..cli_batch import add_batch_size, batch_size_for, torch_device_type
from .agreement import add_equals_ar, format_equals_ar, lossless_line
from .distributed import DistEnv, broadcast, dist_env, rank_device, start, stop, wait_for_all
from .sweep_time import batch1_reference, decode_seconds, read_reference
from .shards import ROWS_DIR, RowCounter, RowWriter, plan_items, rank_file, read_all_rows, shard
from .grid import (GRIDS, RESULTS_VERSION, Cell, add_paired_tests, add_speedups, cell_key, csv_rows,
                    format_accuracy, load_grid, readme_table, summarize)
from ..sandbox import allow_code_eval
from ..tasks.scoring import SCORERS
from ..tasks.sets import TASKS, Task, load_task

# -- running ------------------------------------------------------------------------------------------------------


def problem_row(cell: str, i: int, result: Any, correct: bool) -> dict[str, Any]:
    m, steps = result.metrics, result.trace.steps
    return {
        "cell": cell, "i": i, "correct": bool(correct), "nfe": m["nfe"], "generated": m["generated_tokens"],
        "wall_s": m["wall_seconds"], "query_tokens": m["query_tokens"], "num_drafts": m["num_drafts"],
        "num_draft_tokens": m["num_draft_tokens"], "num_accepted_tokens": m["num_accepted_tokens"],
        "verify_steps": sum(s.verification is not None for s in steps),
        "decided_steps": sum(s.decision is not None for s in steps),
        "edits": m.get("edits", 0),
        "output": list(result.token_ids), "stopped": result.trace.footer.stop_position is not None,
    }


def run_grid(model: Any, task: Task, cells: list[Cell], out: Path, *, seed: int = 0, gen_length: Optional[int] = None,
             generate: Optional[Callable[..., Any]] = None, progress: bool = True,
             env: DistEnv = DistEnv(), batch_size: int = 1) -> Optional[list[dict[str, Any]]]:
    """Run this rank's share of the (cell, problem) items not yet on disk under `out`; on rank 0 return the results
    rows of the whole grid (None on the other ranks). With `batch_size` > 1 the share decodes through
    `generate_batch`, a cell at a time (`_run_batched`): each row is what batch 1 writes, wall times aside, up to
    float round-off in the shared forwards (exact in float64)."""
    if generate is None:
        from ..api import generate
    cells, keys = grid_keys(model, task, cells, seed, gen_length, batch_size)
    n, total = len(task.items), len(cells) * len(task.items)
    plan: list[tuple[int, int]] = []
    counter = None
    if env.is_main:
        plan = plan_items(keys, n, read_all_rows(out))
        counter = RowCounter(out)  # counts rows from here on: exactly this plan's items, whoever writes them
    plan = broadcast(plan, env)
    if progress and env.is_main and total - len(plan):  # a resumed sweep says what it found, and what is left
        print(f"{total - len(plan)} of {total} runs already in {out}: "
              f"{'nothing to decode' if not plan else f'{len(plan)} to decode'}", file=sys.stderr)
    bar = _progress(total, total - len(plan), progress and env.is_main)

    def tick() -> None:
        if counter is not None:
            bar.update(counter.poll())

    mine = shard(plan, env.rank, env.world_size)
    if mine:
        with RowWriter(rank_file(out, env.rank)) as writer:
            if batch_size > 1:
                _run_batched(model, task, cells, keys, mine, seed, batch_size, lambda row: (writer.write(row), tick()))
            else:
                for c, i in mine:
                    item = task.items[i]
                    bar.set_description(cells[c].name[:30], refresh=False)
                    result = generate(model, item.prompt, cells[c].config, seed=seed + i, detailed=False,
                                      chat=item.chat)
                    writer.write(problem_row(keys[c], i, result, task.score(result.text, item)))
                    tick()
    wait_for_all(env, tick)
    tick()
    bar.close()
    return merge_results(out, cells, keys, n) if env.is_main else None


def grid_keys(model: Any, task: Task, cells: list[Cell], seed: int, gen_length: Optional[int],
              batch_size: int) -> tuple[list[Cell], list[str]]:
    """The cells at the sweep's answer length, and the key under which each one's rows are kept on disk."""
    cells = [Cell(c.name, c.config.replace(gen_length=gen_length or task.gen_length)) for c in cells]
    context: dict[str, Any] = {"model": model.spec.name, "task": task.fingerprint, "seed": seed}
    if batch_size > 1:  # its rows' wall_s are batch shares: a rerun at another batch size starts fresh rows
        context["batch_size"] = batch_size
    return cells, [cell_key(c, context) for c in cells]


BATCH_CHUNK = 4096  # items handed to one generate_batch call (bounds the results held in memory)


def _run_batched(model: Any, task: Task, cells: list[Cell], keys: list[str], mine: list[tuple[int, int]], seed: int,
                 batch_size: int, emit: Callable[[dict[str, Any]], Any]) -> None:
    """Decode `mine` (cell, problem) items a cell at a time in batches; emit each item's row.

    One cell per batch, so a cell's wall time is its own (mixed cells would share every forward and every wall
    second). Shared forwards make one problem's wall inseparable from its neighbours', so each row's `wall_s` is
    its batch's wall divided by its problems: a cell's wall per token is its batched throughput."""
    from ..batched import generate_batch

    by_cell: dict[int, list[int]] = {}
    for c, i in mine:
        by_cell.setdefault(c, []).append(i)
    for c, problems in by_cell.items():
        for lo in range(0, len(problems), BATCH_CHUNK):
            chunk = problems[lo : lo + BATCH_CHUNK]
            items = [task.items[i] for i in chunk]
            t0 = time.perf_counter()
            results = generate_batch(model, [it.prompt for it in items], cells[c].config, [seed + i for i in chunk],
                                     detailed=False, batch_size=batch_size, chat=[it.chat for it in items])
            share = (time.perf_counter() - t0) / len(chunk)
            for i, item, result in zip(chunk, items, results):
                emit({**problem_row(keys[c], i, result, task.score(result.text, item)), "wall_s": share})


def merge_results(out: Path, cells: list[Cell], keys: list[str], n: int) -> list[dict[str, Any]]:
    """Every cell's results row from the rows on disk (all rank files, any earlier run)."""
    rows = read_all_rows(out)
    missing = sum((key, i) not in rows for key in keys for i in range(n))
    if missing:
        raise ValueError(f"{missing} of {len(keys) * n} work items have no row under {out / ROWS_DIR}: with several "
                         f"nodes, --out must be a folder that every node shares")
    by_cell = [[rows[(key, i)] for i in range(n)] for key in keys]
    summaries = [summarize(cell, cell_rows) for cell, cell_rows in zip(cells, by_cell)]
    return add_equals_ar(add_paired_tests(add_speedups(summaries)), by_cell)


def _progress(total: int, initial: int, enabled: bool) -> Any:
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=initial, unit="run", disable=not enabled or total == initial, file=sys.stderr)


def write_results(out: Path, cells: list[dict[str, Any]], meta: dict[str, Any]) -> dict[str, Path]:
    out.mkdir(parents=True, exist_ok=True)
    data = {"version": RESULTS_VERSION, "meta": meta, "cells": cells}
    paths = {"json": out / "results.json", "csv": out / "results.csv"}
    paths["json"].write_text(json.dumps(data, indent=1, allow_nan=False), encoding="utf-8")
    with paths["csv"].open("w", newline="", encoding="utf-8") as fh:
        csv.writer(fh).writerows(csv_rows(cells))
    paths["md"] = out / "README-table.md"
    paths["md"].write_text(readme_table(data) + "\n", encoding="utf-8")
    return paths


# -- CLI ----------------------------------------------------------------------------------------------------------

def add_bench_args(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    p.add_argument("--model", default="tiny", help="registry name, Hub id or local folder (default: tiny)")
    p.add_argument("--task", default="arithmetic", help=f"{' | '.join(TASKS)} (default: arithmetic)")
    p.add_argument("--scorer", default=None, choices=list(SCORERS),
                   help="how answers are checked (default: gsm8k for files, the task's own otherwise)")
    # `--n` stays for plain runs; under torchrun its parser refuses `--n` as ambiguous, so `--problems` is the name.
    p.add_argument("--problems", "--n", dest="problems", type=int, default=200,
                   help="problems per cell: the first N of the task (default 200)")
    p.add_argument("--grid", default="default", help=f"{' | '.join(GRIDS)} | a JSON file of cells")
    p.add_argument("--out", default="results", help="output folder (resumable; default results/)")
    p.add_argument("--gen-length", type=int, default=None, help="tokens per answer (default: the task's)")
    p.add_argument("--seed", type=int, default=0, help="problem i decodes with seed + i, in every cell")
    p.add_argument("--device", default=None, help="default: GPU LOCAL_RANK when CUDA is available, else CPU")
    add_dtype(p)
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads per process")
    add_batch_size(p, "auto")
    p.add_argument("--batch1-reference", default=None, metavar="RESULTS_JSON",
                   help="an earlier batch-1 results file of the same grid: its seconds per decode are set beside "
                        "this sweep's in the metadata")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--allow-code-eval", action="store_true",
                   help="run model-written code in the sandbox (humaneval / mbpp scorers; or S2D2_ALLOW_CODE_EVAL=1)")
    return p


MAX_GRID_CELLS = 1000  # cells of one sweep (the default grid has 50)
MAX_PROBLEMS = 100_000


def check_bench_args(args: argparse.Namespace) -> list[Cell]:
    """Every bench argument before a task or model loads; the grid's cells (ValueError, one line)."""
    checks.whole(args.problems, "--problems", 1, MAX_PROBLEMS)
    checks.seed(args.seed)
    if args.gen_length is not None:
        checks.whole(args.gen_length, "--gen-length", 1, 8192)
    if args.threads is not None:
        checks.whole(args.threads, "--threads", 1, 1024)
    checks.writable_folder(args.out, "--out")
    batch_size_for(getattr(args, "batch_size", 1), "cpu")
    cells = load_grid(args.grid)
    if len(cells) > MAX_GRID_CELLS:
        raise ValueError(f"--grid: at most {MAX_GRID_CELLS} cells, got {len(cells)}")
    if getattr(args, "batch1_reference", None):
        read_reference(args.batch1_reference, len(cells))  # a bad file is said before hours of decoding
    return cells


def run_bench(args: argparse.Namespace) -> int:
    env = dist_env()
    cells = check_bench_args(args)
    if args.threads is not None:
        import torch

        torch.set_num_threads(args.threads)
    if getattr(args, "allow_code_eval", False):
        allow_code_eval()
    task = load_task(args.task, args.problems, args.scorer, say=_say(env))
    from ..models.loading import load_model

    device = rank_device(args.device, env)
    batch = batch_size_for(getattr(args, "batch_size", 1), torch_device_type(device))
    model = load_model(args.model, device=device, dtype=args.dtype, backend="dynamic" if batch > 1 else "auto")
    out = Path(args.out)
    start(env, model.device)
    try:
        t0 = time.perf_counter()
        results = run_grid(model, task, cells, out, seed=args.seed, gen_length=args.gen_length,
                           progress=not args.no_progress, env=env, batch_size=batch)
        if results is None:
            return 0
        meta = {"model": model.spec.name, "task": task.name, "scorer": task.scorer, "n": len(task.items),
                "grid": args.grid, "seed": args.seed, "gen_length": args.gen_length or task.gen_length,
                "device": str(model.device), "dtype": str(model.dtype).replace("torch.", ""),
                "world_size": env.world_size, "batch_size": batch, "library_version": __version__,
                "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                "seconds": round(time.perf_counter() - t0, 1)}
        keys = set(grid_keys(model, task, cells, args.seed, args.gen_length, batch)[1])
        meta["decode_seconds"] = decode_seconds(r for (key, i), r in read_all_rows(out).items()
                                                if key in keys and i < len(task.items))
        if getattr(args, "batch1_reference", None):
            meta["batch1_reference"] = batch1_reference(args.batch1_reference, meta, len(results))
        if task.has_ids:
            meta["problem_ids"] = [item.id for item in task.items]
        paths = write_results(out, results, meta)
    finally:
        stop(env)
    print(format_table(results))
    print("\nwritten: " + ", ".join(str(p) for p in paths.values()))
    return 0


def _say(env: DistEnv) -> Callable[[str], None]:
    """Notes go to stderr, once per job (rank 0)."""
    return (lambda msg: print(msg, file=sys.stderr)) if env.is_main else (lambda msg: None)


NAME_CHARS = 60  # a cell's name in the table at most (a longer one is cut with a visible "…")


def format_table(cells: list[dict[str, Any]]) -> str:
    """The sweep's table: one row per cell, every name whole up to NAME_CHARS; wall time per token in seconds."""
    width = min(NAME_CHARS, max([len("name")] + [len(c["name"]) for c in cells]))
    cols = [("name", width), ("accuracy [95% CI]", 22), ("nfe_per_token", 13), ("wall_s_per_token", 16),
            ("speedup_nfe_vs_ar", 17), ("speedup_wall_vs_ar", 18), ("output = AR", 11)]
    numbers = ["nfe_per_token", "wall_per_token", "speedup_nfe_vs_ar", "speedup_wall_vs_ar"]  # (cols[2:-1]'s keys)
    lines = ["  ".join(f"{k:>{w}}" if i else f"{k:<{w}}" for i, (k, w) in enumerate(cols))]
    for c in cells:
        name = c["name"] if len(c["name"]) <= width else c["name"][: width - 1] + "…"
        vals = [name, format_accuracy(c)]
        vals += [("-" if c[k] is None else f"{c[k]:.4g}") for k in numbers] + [format_equals_ar(c)]
        lines.append("  ".join(f"{v:>{w}}" if i else f"{v:<{w}}" for i, (v, (_, w)) in enumerate(zip(vals, cols))))
    line = lossless_line(cells)
    return "\n".join(lines + ([line] if line else []))
