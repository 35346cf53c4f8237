"""`python -m s2d2 lm-eval`: lm-evaluation-harness with the `s2d2` backend, plus NFE/token and acceptance.

    python -m s2d2 lm-eval --model_args pretrained=JetLM/SDAR-8B-Chat,preset=sdar-config-b --tasks gsm8k \\
        --apply_chat_template --output_path results/

Every argument is checked before lm-eval is imported or a model loads (one line on stderr, exit status 2); then
the tasks are resolved (only `--include_path` is indexed when it holds them all: lm-eval's own index of ~15k tasks
takes seconds), the model loads, and `lm_eval.simple_evaluate` runs. With `--output_path`, lm-eval writes its
results (and `--log_samples` its samples) under `<output_path>/<model>/`, and beside them this writes
`s2d2_requests_<date>.jsonl` (one record per request: NFE, tokens, drafts, acceptance, finish reason) and
`s2d2_summary_<date>.json`; `--trace` adds every request's full trace under `s2d2_traces_<date>/`.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
from datetime import datetime
from pathlib import Path
from typing import Any, Optional

from .model_args import BackendArgs, check_backend_args, check_folder, parse_arg_string, typed_value
from .task_files import check_task_sources

TASK_NAME = re.compile(r"^[\w.*?\[\]/-]+$")
INSTALL_HINT = "lm-eval is not installed: pip install -r requirements-eval.txt"


def add_lm_eval_args(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    p.add_argument("--model_args", "--model-args", dest="model_args", action="append", default=[],
                   metavar="K=V,...", help="pretrained=..., preset=..., any DecodeConfig field (repeatable)")
    p.add_argument("--tasks", "-t", required=True, help="comma-separated lm-eval task names")
    p.add_argument("--include_path", "--include-path", dest="include_path", default=None,
                   help="a folder of task YAMLs (e.g. assets/tasks/lm_eval)")
    p.add_argument("--limit", "-L", type=float, default=None, help="documents per task (N, or a fraction < 1)")
    p.add_argument("--num_fewshot", "--num-fewshot", "-f", dest="num_fewshot", type=int, default=None)
    p.add_argument("--output_path", "--output-path", "-o", dest="output_path", default=None,
                   help="folder for lm-eval's results and the s2d2 records")
    p.add_argument("--log_samples", "--log-samples", "-s", dest="log_samples", action="store_true")
    p.add_argument("--apply_chat_template", "--apply-chat-template", dest="apply_chat_template",
                   action="store_true", help="wrap prompts in the model's chat template (lm-eval's option)")
    p.add_argument("--gen_kwargs", "--gen-kwargs", dest="gen_kwargs", default=None, metavar="K=V,...",
                   help="lm-eval generation kwargs (until, max_gen_toks) over the task's")
    p.add_argument("--device", default=None, help="same as model_args device")
    p.add_argument("--batch_size", "--batch-size", dest="batch_size", default=None,
                   help="requests decoded at once (same as model_args batch_size; default 1; auto = 8)")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    p.add_argument("--trace", action="store_true", help="also write every request's full trace (needs --output_path)")
    p.add_argument("--trust_task_code", "--trust-task-code", dest="trust_task_code", action="store_true",
                   help="let task YAMLs outside assets/tasks/lm_eval run their `!function` Python")
    p.add_argument("--confirm_run_unsafe_code", "--confirm-run-unsafe-code", dest="confirm_run_unsafe_code",
                   action="store_true", help="lm-eval's own opt-in for its code-execution tasks")
    return p


def check_lm_eval_args(args: argparse.Namespace) -> tuple[dict[str, Any], BackendArgs, list[str]]:
    """Every argument checked, nothing imported from lm-eval: (model_args dict, checked backend args, tasks)."""
    model_args: dict[str, Any] = {}
    for text in args.model_args:
        model_args.update(parse_arg_string(text))
    if args.device is not None:
        model_args["device"] = args.device
    if getattr(args, "batch_size", None) is not None:
        model_args["batch_size"] = typed_value(str(args.batch_size))
    model_args.setdefault("pretrained", "tiny")  # lm-eval names its results folder after it
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    if not tasks:
        raise ValueError("--tasks: give at least one task name")
    bad = [t for t in tasks if not TASK_NAME.match(t)]
    if bad:
        raise ValueError(f"--tasks: {bad[0][:60]!r} is not a task name")
    if args.include_path is not None and not os.path.isdir(args.include_path):
        raise ValueError(f"--include_path: {args.include_path!r} is not a folder")
    check_task_sources(args.include_path, tasks, args.trust_task_code)
    if args.limit is not None and not (args.limit > 0 and (args.limit < 1 or args.limit == int(args.limit))):
        raise ValueError(f"--limit: a whole number of documents or a fraction in (0, 1), got {args.limit}")
    if args.num_fewshot is not None and not 0 <= args.num_fewshot <= 1000:
        raise ValueError(f"--num_fewshot: must be in [0, 1000], got {args.num_fewshot}")
    if args.output_path is not None:
        check_folder(args.output_path, "--output_path")
    if args.trace and args.output_path is None:
        raise ValueError("--trace: the traces go beside the results; give --output_path too")
    if args.threads is not None and not 1 <= args.threads <= 1024:
        raise ValueError(f"--threads: must be in [1, 1024], got {args.threads}")
    if args.gen_kwargs is not None:
        for part in (p for p in args.gen_kwargs.split(",") if p.strip()):
            if "=" not in part:
                raise ValueError(f"--gen_kwargs: expected key=value, got {part.strip()[:60]!r}")
    if args.trace:
        model_args["trace_dir"] = str(_result_folder(args.output_path, model_args) / f"s2d2_traces_{_stamp()}")
    return model_args, check_backend_args(model_args), tasks


def run_lm_eval(args: argparse.Namespace) -> int:
    model_args, backend_args, tasks = check_lm_eval_args(args)
    try:
        import lm_eval  # noqa: F401
    except ImportError:
        raise ValueError(INSTALL_HINT) from None
    if args.threads is not None:
        import torch

        torch.set_num_threads(args.threads)
    manager = task_manager(tasks, args.include_path)
    from lm_eval import simple_evaluate
    from lm_eval.loggers import EvaluationTracker
    from lm_eval.utils import make_table

    from .backend import S2D2LM
    from .records import format_summary, summarize, write_records

    lm = S2D2LM(**model_args)
    tracker = EvaluationTracker(output_path=args.output_path)
    results = simple_evaluate(
        model=lm, model_args=model_args, tasks=tasks, num_fewshot=args.num_fewshot,
        limit=int(args.limit) if args.limit is not None and args.limit >= 1 else args.limit,
        log_samples=args.log_samples, evaluation_tracker=tracker, apply_chat_template=args.apply_chat_template,
        gen_kwargs=args.gen_kwargs, task_manager=manager, confirm_run_unsafe_code=args.confirm_run_unsafe_code,
    )
    if results is None:
        return 0
    samples = results.pop("samples", None)
    summary = {"model_args": backend_args.to_dict(), "tasks": summarize(lm.records)}
    written: list[Path] = []
    if args.output_path is not None:
        tracker.save_results_aggregated(results=results, samples=samples if args.log_samples else None)
        if args.log_samples and samples:
            for name in results["configs"]:
                tracker.save_results_samples(task_name=name, samples=samples[name])
        folder = _result_folder(args.output_path, model_args)
        written = write_records(folder, tracker.date_id, lm.records, summary)
    print(make_table(results))
    print(format_summary(results, summary["tasks"]))
    if written:
        print("\nwritten: " + ", ".join(str(p) for p in written), file=sys.stderr)
    return 0


def task_manager(tasks: list[str], include_path: Optional[str]) -> Any:
    """lm-eval's TaskManager over `include_path` alone when it holds every task, else with the built-in tasks;
    ValueError naming a task neither has."""
    from lm_eval.tasks import TaskManager

    if include_path is not None:
        local = TaskManager(include_path=include_path, include_defaults=False)
        if all(local.match_tasks([t]) or t.endswith(".yaml") for t in tasks):
            return local
    manager = TaskManager(include_path=include_path)
    missing = [t for t in tasks if not manager.match_tasks([t]) and not os.path.isfile(t)]
    if missing:
        raise ValueError(f"--tasks: unknown task {missing[0]!r} (list them with `lm-eval ls tasks`, or put a YAML "
                         f"under --include_path)")
    return manager


def _result_folder(output_path: str, model_args: dict[str, Any]) -> Path:
    """Where lm-eval's EvaluationTracker writes results: <output_path>/<sanitized model name>/."""
    path = Path(output_path)
    if path.suffix == ".json":
        return path.parent
    name = str(model_args.get("pretrained", "tiny"))
    return path / re.sub(r"[\"<>:/|\\?*\[\]]+", "__", name)  # lm_eval.utils.sanitize_model_name


def _stamp() -> str:
    return datetime.now().isoformat().replace(":", "-")

