"""Command-line hooks for `python -m s2d2 train-tiny ...` and `python -m s2d2 eval-task ...`.

`s2d2/__main__.py` wires `add_train_tiny_args` / `run_train_tiny` (and the eval pair) into its subcommands.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from .. import cli_checks as c
from ..cli_args import add_dtype
from ..cli_batch import add_batch_size, batch_size_for, torch_device_type
from .options import add_train_tiny_args, check_options, options_from_args

TRAIN_REQUIREMENTS = ("rdata",)  # requirements-train.txt beyond the base install


def run_train_tiny(args: argparse.Namespace) -> int:
    options = check_options(options_from_args(args))  # every argument first, then the extras, then the work
    c.requirements("train-tiny", TRAIN_REQUIREMENTS, "requirements-train.txt")
    from .train import train_tiny

    train_tiny(options)
    return 0


TASKS = ("arithmetic", "jsonl:PATH")


def add_eval_task_args(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("--model", default="tiny", help="registry name or checkpoint folder (default: tiny)")
    parser.add_argument("--task", default="arithmetic", help=f"{' | '.join(TASKS)} (default: arithmetic)")
    parser.add_argument("--scorer", default=None,
                        help="gsm8k | exact | arithmetic | humaneval | mbpp (default: the task's; see bench)")
    parser.add_argument("--allow-code-eval", action="store_true",
                        help="run model-written code in the sandbox (humaneval / mbpp; or S2D2_ALLOW_CODE_EVAL=1)")
    parser.add_argument("--preset", default="ar",
                        help="a preset name (python -m s2d2 presets; default: ar, plain autoregressive decoding)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override a DecodeConfig option, e.g. --set confidence_threshold=0.9 (repeatable)")
    parser.add_argument("--n", type=int, default=100,
                        help="held-out problems (the first n of the fixed set; default: 100)")
    parser.add_argument("--seed", type=int, default=0, help="problem i decodes with seed + i (default: 0)")
    parser.add_argument("--gen-length", type=int, default=128, help="tokens per answer at most (default: 128)")
    parser.add_argument("--device", default=None, help="cpu, cuda, ... (default: cuda if there is one, else cpu)")
    add_dtype(parser)
    parser.add_argument("--out", default=None, help="write the result (with outputs) to this JSON file")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    add_batch_size(parser, "1")
    return parser


def check_eval_args(args: argparse.Namespace) -> Any:
    """Every eval-task argument, before the model loads: the config it runs (ValueError, one line)."""
    from .. import preset
    from ..overrides import parse_overrides
    from ..tasks import arithmetic as A

    c.whole(args.n, "--n", 1, A.HELDOUT_MAX if args.task == "arithmetic" else 100_000)
    c.seed(args.seed)
    c.whole(args.gen_length, "--gen-length", 1, 8192)
    if args.threads is not None:
        c.whole(args.threads, "--threads", 1, 1024)
    batch_size_for(getattr(args, "batch_size", 1), "cpu")  # (auto is checked, not resolved: no device yet)
    c.writable_file(args.out, "--out")
    return preset(args.preset, **{"gen_length": args.gen_length, **parse_overrides(args.set)})


def run_eval_task(args: argparse.Namespace) -> int:
    import json

    cfg = check_eval_args(args)
    import torch

    from ..overrides import parse_overrides
    from ..models.loading import load_model
    from ..tasks import arithmetic as A
    from ..tasks.evaluate import evaluate, length_note

    if args.threads:
        torch.set_num_threads(args.threads)
    overrides = {"gen_length": args.gen_length, **parse_overrides(args.set)}
    task = None
    if args.task != "arithmetic" or args.scorer is not None:  # any other set: the bench loaders and scorers
        from ..sandbox import allow_code_eval
        from ..tasks.sets import load_task

        if args.allow_code_eval:
            allow_code_eval()
        task = load_task(args.task, args.n, args.scorer)
    dtype = getattr(torch, args.dtype) if args.dtype else None
    batch = batch_size_for(getattr(args, "batch_size", 1), torch_device_type(args.device))
    if getattr(args, "batch_size", 1) == "auto":  # (say what auto chose: the run's speed depends on it)
        print(f"--batch-size auto: {batch} problems at once at most", file=sys.stderr)
    model = load_model(args.model, device=args.device, dtype=dtype, backend="dynamic" if batch > 1 else "auto")
    if task is None:
        res = evaluate(model, cfg, A.heldout(args.n), seed=args.seed, progress=True, batch_size=batch)
    else:
        from ..tasks.evaluate import evaluate_task

        res = evaluate_task(model, cfg, task, seed=args.seed, progress=True, batch_size=batch)
    summary = {k: v for k, v in res.items() if k != "texts"}
    print(json.dumps({"model": str(args.model), "preset": args.preset, "overrides": overrides, **summary}, indent=1))
    note = length_note(res, cfg.gen_length)
    if note:  # after the result, where a reader's eye ends (printed before it, the JSON would scroll it away)
        print(note, file=sys.stderr)
    if args.out:
        existed = os.path.exists(args.out)
        with open(args.out, "w", encoding="utf-8") as fh:
            json.dump({"model": str(args.model), "preset": args.preset, "config": cfg.to_dict(), **res}, fh, indent=1)
        print(c.written_line("result", args.out, existed), file=sys.stderr)  # (stdout is the JSON alone)
    return 0


def main(argv: list[str] | None = None) -> int:
    import sys

    p = add_train_tiny_args(argparse.ArgumentParser(prog="python -m s2d2.tiny.cli"))
    return run_train_tiny(p.parse_args(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    raise SystemExit(main())
