"""Options of `train-tiny` (one dataclass) and their command-line form. Shared by `train.py` and `cli.py`,
so neither imports the other."""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
from dataclasses import dataclass
from pathlib import Path

from .data import DEFAULT_DATA_DIR, REPO_ROOT
from .model import SIZES

STAGES = {
    "ar": "stage 1 causal pretraining (Qwen3)",
    "sdar": "stage 2 SDAR in-place block-diffusion adaptation (Qwen3)",
    "llada2": "LLaDA2-architecture MoE (Glm4Moe) upcycled from an in-place Qwen3 model, block diffusion + editing",
}
USER_SIZES = tuple(k for k in SIZES if k != "micro")  # micro: tests only
DEFAULT_LLADA2_INIT = REPO_ROOT / "assets" / "tiny"


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


DESCRIPTION = ("Train one stage of the tiny block-diffusion model: --stage ar first, then --stage sdar with the same "
               "--out (and --stage llada2 from an in-place model). A stage resumes from <out>/<stage>/state.pt.")
HELP = {  # one line per option; "(default: ...)" is added where the text does not say it
    "stage": "; ".join(f"{k}: {v}" for k, v in STAGES.items()),
    "out": "run folder: the tokenizer, the data cache and one subfolder per stage",
    "data_dir": "folder where the Austen novels are downloaded once and kept",
    "size": f"model size of stages ar and sdar, one of {', '.join(USER_SIZES)}; stage sdar must use stage ar's",
    "vocab": "tokenizer vocabulary size (used when <out> has no tokenizer yet)",
    "seed": "random seed, in [0, 2**31 - 1]",
    "steps": "optimizer steps of this stage (ignored with --minutes)",
    "minutes": "train for this many minutes of wall time instead of --steps (default: off)",
    "batch": "sequences per step",
    "seq_len": "tokens per sequence",
    "lr": "peak learning rate (AdamW, cosine schedule)",
    "min_lr_frac": "final learning rate, as a fraction of --lr",
    "warmup": "steps of linear learning-rate warm-up",
    "weight_decay": "AdamW weight decay (matrices only, not the embedding)",
    "grad_clip": "clip the gradient norm to this",
    "p_arith": "fraction of each batch from the arithmetic task (the rest is Austen prose)",
    "p_ar": "stages sdar, llada2: fraction of rows trained as plain next-token prediction",
    "blocks": "stages sdar, llada2: comma-separated block sizes drawn for the block-diffusion rows",
    "p_causal_clean": "stages sdar, llada2: fraction of block-diffusion rows with a causal clean context",
    "t_min": "stages sdar, llada2: lowest masking level of a block (drawn in [--t-min, --t-max])",
    "t_max": "stages sdar, llada2: highest masking level of a block",
    "init": "stage sdar: folder with the stage-1 model.safetensors (default: <out>/ar/latest); stage llada2: the "
            "in-place Qwen3 model folder to upcycle (default: assets/tiny)",
    "p_edit": "stage llada2: fraction of visible noisy-block tokens replaced by a wrong token to correct",
    "p_keep": "stage llada2: fraction of the untouched visible tokens also trained to predict themselves",
    "balance_rate": "stage llada2: per-step move of the expert routing biases towards equal load",
    "rope_fraction": "stage llada2: rotary fraction of each head (partial_rotary_factor; official LLaDA2: 0.5)",
    "n_arith": "arithmetic training problems (used when <out> has no data cache yet)",
    "log_every": "log the mean loss every this many steps",
    "ckpt_every": "save a resumable checkpoint (<stage>/latest, state.pt) every this many steps",
    "eval_every": "validation losses every this many steps",
    "acc_every": "greedy arithmetic accuracy every this many steps",
    "acc_n": "held-out problems of that accuracy",
    "snap_every": "keep a snapshot <stage>/snap_<step> every this many steps",
    "bf16": "bfloat16 autocast (the bundled models were trained with it; default: on); on a CPU without native "
            "bf16, --no-bf16 can be several times faster",
    "threads": "torch CPU threads",
    "export": "after training, also write a shippable model folder here (default: none)",
    "block_size": "block_size written into the exported config.json",
    "fresh": "delete <out>/<stage> and start the stage over instead of resuming (default: off)",
    "progress": "show a progress bar (default: on)",
    "max_tokens": argparse.SUPPRESS,  # test hook: stop after this many tokens
}


def add_train_tiny_args(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.description = parser.description or DESCRIPTION
    d = TrainOptions()
    for f in dataclasses.fields(TrainOptions):
        name = "--" + f.name.replace("_", "-")
        default = getattr(d, f.name)
        if f.type in ("bool", bool):
            action = parser.add_argument(name, action=argparse.BooleanOptionalAction, default=default)
        elif f.name == "stage":
            action = parser.add_argument(name, choices=tuple(STAGES), default=default)
        else:
            t = str(f.type)
            typ = float if "float" in t else int if "int" in t else str
            action = parser.add_argument(name, type=typ, default=default)
        text = HELP[f.name]
        action.help = text if text == argparse.SUPPRESS or "default:" in text else text + " (default: %(default)s)"
    return parser


def check_options(o: TrainOptions) -> TrainOptions:
    """Every option in range and every path usable, before any data, tokenizer or model work (ValueError, one line
    naming the option)."""
    from .. import cli_checks as c
    from ..limits import value_text

    c.writable_folder(o.out, "--out")
    if o.size not in SIZES:
        raise ValueError(f"--size: must be one of {', '.join(USER_SIZES)}, got {value_text(o.size)}")
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
    _check_stage_model(o)
    return o


def init_folder(o: TrainOptions) -> Path | None:
    """The model folder a stage starts from when it does not resume (None for stage ar); train.py loads this one."""
    if o.stage == "sdar":
        return Path(o.init) if o.init else Path(o.out) / "ar" / "latest"
    if o.stage == "llada2":
        return Path(o.init) if o.init else DEFAULT_LLADA2_INIT
    return None


def _check_stage_model(o: TrainOptions) -> None:
    """The model files the stage will load exist, and a Qwen3 one is of `--size`: before any data work."""
    from ..limits import value_text

    out = Path(o.out)
    init = init_folder(o)
    if o.stage == "llada2":  # always builds from its init; takes the tokenizer from there on a fresh --out
        need = ["config.json", "model.safetensors"]
        if not (out / "tokenizer" / "tokenizer.json").is_file():
            need.append("tokenizer.json")
        if any(not (init / n).is_file() for n in need):
            where = "--init: no" if o.init else "--stage llada2: no"
            raise ValueError(f"{where} in-place Qwen3 model ({', '.join(need)}) in {value_text(str(init), 200)}; "
                             "give --init the folder of one, e.g. <out>/sdar/latest after --stage sdar with this --out")
        return
    if not o.fresh and (out / o.stage / "state.pt").is_file():  # resumes from its own latest/
        init = out / o.stage / "latest"
    elif init is not None and not (init / "model.safetensors").is_file():
        if o.init:
            raise ValueError(f"--init: no model.safetensors in {value_text(o.init, 200)} (stage sdar starts from a "
                             "stage-1 model folder, e.g. <out>/ar/latest)")
        raise ValueError(f"--stage sdar: no stage-1 model at {value_text(str(init / 'model.safetensors'), 200)}; "
                         "run --stage ar with this --out first (or give --init FOLDER)")
    if init is not None:
        _check_size_matches(o.size, init, value_text(str(init), 200))


def _check_size_matches(size: str, folder: Path, shown: str) -> None:
    """A Qwen3 model folder's config.json against the `--size` the stage builds (a mismatch fails at load)."""
    keys = ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
            "intermediate_size")
    try:
        cfg = json.loads((folder / "config.json").read_text())
        found = tuple(cfg.get(k) for k in keys)
    except (OSError, ValueError, AttributeError):
        return  # no readable config: the weights are the judge
    if found != SIZES[size]:
        match = next((k for k, v in SIZES.items() if v == found), None)
        fix = f"give --size {match}" if match else f"a size not in {', '.join(USER_SIZES)}"
        raise ValueError(f"--size: {size} does not match the model in {shown} (hidden size {found[0]}, "
                         f"{found[1]} layers: {fix})")


def options_from_args(args: argparse.Namespace) -> TrainOptions:
    names = {f.name for f in dataclasses.fields(TrainOptions)}
    return TrainOptions(**{k: v for k, v in vars(args).items() if k in names})


def options_from_argv(argv: list[str]) -> TrainOptions:
    p = add_train_tiny_args(argparse.ArgumentParser(prog="train-tiny"))
    return options_from_args(p.parse_args(argv))
