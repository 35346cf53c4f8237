"""Options of `train-tiny` (one dataclass) and their command-line form. Shared by `train.py` and `cli.py`,
so neither imports the other."""
from __future__ import annotations

import argparse
import dataclasses
import os
from dataclasses import dataclass

from .data import DEFAULT_DATA_DIR

STAGES = {
    "ar": "stage 1 causal pretraining (Qwen3)",
    "sdar": "stage 2 SDAR in-place block-diffusion adaptation (Qwen3)",
    "llada2": "LLaDA2-architecture MoE (Glm4Moe) upcycled from an in-place Qwen3 model, block diffusion + editing",
}


@dataclass
class TrainOptions:
    stage: str = "ar"  # one of STAGES
    out: str = "runs/tiny"
    data_dir: str = str(DEFAULT_DATA_DIR)
    size: str = "h192"
    vocab: int = 2048
    seed: int = 0
    steps: int = 3000
    minutes: float | None = None
    batch: int = 16
    seq_len: int = 256
    lr: float = 2e-3
    min_lr_frac: float = 0.1
    warmup: int = 50
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    p_arith: float = 0.7
    p_ar: float = 0.4
    blocks: str = "4,8,16"
    p_causal_clean: float = 0.05
    t_min: float = 0.0
    t_max: float = 1.0
    # stage sdar: folder with the stage-1 model.safetensors (default <out>/ar/latest);
    # stage llada2: the in-place Qwen3 folder to upcycle (default assets/tiny), whose tokenizer is reused
    init: str | None = None
    # stage llada2: editing objective (fraction of visible noisy-block tokens corrupted; fraction of the
    # untouched visible ones also trained to predict themselves) and the expert-bias balancing rate
    p_edit: float = 0.1
    p_keep: float = 0.25
    balance_rate: float = 1e-3
    rope_fraction: float = 1.0  # stage llada2: partial_rotary_factor (official LLaDA2: 0.5; see tiny/llada2.py)
    n_arith: int = 200_000
    log_every: int = 10
    ckpt_every: int = 100
    eval_every: int = 200
    acc_every: int = 1000
    acc_n: int = 50
    snap_every: int = 500
    bf16: bool = True
    threads: int = 2
    export: str | None = None
    block_size: int = 4
    fresh: bool = False
    progress: bool = True
    max_tokens: int | None = None  # test hook: stop after this many tokens


def add_train_tiny_args(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    d = TrainOptions()
    for f in dataclasses.fields(TrainOptions):
        name = "--" + f.name.replace("_", "-")
        default = getattr(d, f.name)
        if f.type in ("bool", bool):
            parser.add_argument(name, action=argparse.BooleanOptionalAction, default=default)
        elif f.name == "stage":
            parser.add_argument(name, choices=tuple(STAGES), default=default,
                                help="; ".join(f"{k}: {v}" for k, v in STAGES.items()))
        else:
            t = str(f.type)
            typ = float if "float" in t else int if "int" in t else str
            parser.add_argument(name, type=typ, default=default)
    return parser


def check_options(o: TrainOptions) -> TrainOptions:
    """Every option in range and every path usable, before any data, tokenizer or model work (ValueError, one line
    naming the option)."""
    from .. import cli_checks as c

    c.writable_folder(o.out, "--out")
    if o.init:
        c.readable_folder(o.init, "--init")
    if o.export:
        c.writable_folder(o.export, "--export")
    if os.path.exists(o.data_dir) and not os.path.isdir(o.data_dir):
        raise ValueError(f"--data-dir: {o.data_dir[:200]!r} is a file, not a folder")
    c.seed(o.seed)
    for name, lo, hi in (("steps", 1, 10**8), ("vocab", 300, 262_144), ("batch", 1, 4096), ("seq_len", 8, 16_384),
                         ("warmup", 0, 10**8), ("n_arith", 1, 10**8), ("log_every", 1, 10**8),
                         ("ckpt_every", 1, 10**8), ("eval_every", 1, 10**8), ("acc_every", 1, 10**8),
                         ("acc_n", 1, 10**6), ("snap_every", 1, 10**8), ("threads", 1, 1024), ("block_size", 1, 1024)):
        c.whole(getattr(o, name), "--" + name.replace("_", "-"), lo, hi)
    if o.max_tokens is not None:
        c.whole(o.max_tokens, "--max-tokens", 1, 10**12)
    for name in ("min_lr_frac", "p_arith", "p_ar", "p_causal_clean", "t_min", "t_max", "p_edit", "p_keep"):
        c.real(getattr(o, name), "--" + name.replace("_", "-"), 0.0, 1.0)
    c.real(o.lr, "--lr", 0.0, 10.0, lo_open=True)
    c.real(o.weight_decay, "--weight-decay", 0.0, 10.0)
    c.real(o.grad_clip, "--grad-clip", 0.0, 1e6, lo_open=True)
    c.real(o.balance_rate, "--balance-rate", 0.0, 1.0)
    c.real(o.rope_fraction, "--rope-fraction", 0.0, 1.0, lo_open=True)
    if o.minutes is not None:
        c.real(o.minutes, "--minutes", 0.0, 10**6, lo_open=True)
    if o.t_min > o.t_max:
        raise ValueError(f"--t-min: must be <= --t-max ({o.t_max:g}), got {o.t_min:g}")
    try:
        blocks = [int(b) for b in o.blocks.split(",")]
    except ValueError:
        blocks = []
    if not blocks or any(not 1 <= b <= 1024 for b in blocks):
        raise ValueError(f"--blocks: expected comma-separated block sizes in [1, 1024], got {o.blocks[:60]!r}")
    return o


def options_from_args(args: argparse.Namespace) -> TrainOptions:
    names = {f.name for f in dataclasses.fields(TrainOptions)}
    return TrainOptions(**{k: v for k, v in vars(args).items() if k in names})


def options_from_argv(argv: list[str]) -> TrainOptions:
    p = add_train_tiny_args(argparse.ArgumentParser(prog="train-tiny"))
    return options_from_args(p.parse_args(argv))
