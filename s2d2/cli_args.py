"""Arguments that several subcommands of `python -m s2d2` take, declared once so their choices and help agree."""
from __future__ import annotations

import argparse

DTYPES = ("float32", "bfloat16", "float16", "float64")


def add_dtype(parser: argparse.ArgumentParser) -> None:
    """`--dtype`: the weights' dtype by name; leaving it out picks the loader's default (listed, since a None among
    the choices would be a name no one can type)."""
    parser.add_argument("--dtype", default=None, choices=DTYPES,
                        help="the weights' dtype (default: bfloat16 on CUDA, float32 elsewhere)")
