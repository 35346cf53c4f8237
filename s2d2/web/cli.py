"""`python -m s2d2 export-web --model NAME [--out DIR] [--check]`: arguments, checks, and the printed summary.

Every argument is checked before any model loads; a checkpoint over the size limit is refused before its weights are
read (limits.py). `--check` runs the round trip (roundtrip.py) on the written files and prints the differences.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from .. import cli_checks as c
from .limits import MAX_PARAMS

WEB_REQUIREMENTS = ("onnx", "onnxruntime")  # requirements-web.txt beyond the base install


def add_export_web_args(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("--model", default="tiny",
                        help=f"tiny, tiny-llada2, or a checkpoint folder of at most {MAX_PARAMS // 1_000_000} M "
                             "parameters (default: tiny)")
    parser.add_argument("--out", default=None,
                        help="folder to write (default for a bundled model: assets/web/NAME, which the app serves)")
    parser.add_argument("--check", action="store_true",
                        help="then run every forward kind through onnxruntime and torch and print the differences")
    return parser


def run_export_web(args: argparse.Namespace) -> int:
    if args.out is not None:
        c.writable_folder(args.out, "--out")
    if not str(args.model).strip():
        raise ValueError("--model: empty; give tiny, tiny-llada2 or a checkpoint folder")
    c.requirements("export-web", WEB_REQUIREMENTS, "requirements-web.txt")
    from .export import export_web

    done = export_web(args.model, Path(args.out) if args.out is not None else None)
    for name, facts in done.manifest["files"].items():
        print(f"{done.folder / name}  {facts['bytes']:,} bytes")
    s = done.storage
    print(f"weights: {s.bfloat16} tensors as bfloat16 (exact), {s.float32} as float32, {s.tied} tied head; "
          f"{s.bytes_before:,} -> {s.bytes_after:,} bytes")
    if args.check:
        from .roundtrip import check_export, format_rows

        print(format_rows(check_export(args.model, done.folder)))
    return 0
