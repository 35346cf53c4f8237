"""Options of `train-tiny` (one dataclass) and their command-line form. Shared by `train.py` and `cli.py`,
so neither imports the other."""
from __future__ import annotations

import argparse
import dataclasses
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


def options_from_args(args: argparse.Namespace) -> TrainOptions:
    names = {f.name for f in dataclasses.fields(TrainOptions)}
    return TrainOptions(**{k: v for k, v in vars(args).items() if k in names})


def options_from_argv(argv: list[str]) -> TrainOptions:
    p = add_train_tiny_args(argparse.ArgumentParser(prog="train-tiny"))
    return options_from_args(p.parse_args(argv))
