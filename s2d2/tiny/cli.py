"""Command-line hooks for `python -m s2d2 train-tiny ...` and `python -m s2d2 eval-task ...`.

`s2d2/__main__.py` wires `add_train_tiny_args` / `run_train_tiny` (and the eval pair) into its subcommands.
"""
from __future__ import annotations

import argparse
import dataclasses

from .train import TrainOptions


def add_train_tiny_args(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    d = TrainOptions()
    for f in dataclasses.fields(TrainOptions):
        name = "--" + f.name.replace("_", "-")
        default = getattr(d, f.name)
        if f.type in ("bool", bool):
            parser.add_argument(name, action=argparse.BooleanOptionalAction, default=default)
        elif f.name == "stage":
            parser.add_argument(name, choices=("ar", "sdar"), default=default,
                                help="ar: stage 1 causal pretraining; sdar: stage 2 block-diffusion adaptation")
        else:
            typ = {"int": int, "float": float, "str": str}.get(str(f.type).split(" ")[0].replace("|", "").strip(),
                                                               None)
            if typ is None:
                t = str(f.type)
                typ = float if "float" in t else int if "int" in t else str
            parser.add_argument(name, type=typ, default=default)
    return parser


def options_from_argv(argv: list[str]) -> TrainOptions:
    p = add_train_tiny_args(argparse.ArgumentParser(prog="train-tiny"))
    return options_from_args(p.parse_args(argv))


def options_from_args(args: argparse.Namespace) -> TrainOptions:
    names = {f.name for f in dataclasses.fields(TrainOptions)}
    return TrainOptions(**{k: v for k, v in vars(args).items() if k in names})


def run_train_tiny(args: argparse.Namespace) -> int:
    from .train import train_tiny

    train_tiny(options_from_args(args))
    return 0


def main(argv: list[str] | None = None) -> int:
    import sys

    p = add_train_tiny_args(argparse.ArgumentParser(prog="python -m s2d2.tiny.cli"))
    return run_train_tiny(p.parse_args(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    raise SystemExit(main())
