"""Training loop for the tiny block-diffusion models: stage 1 causal AR, stage 2 SDAR in-place adaptation
(Qwen3), and stage `llada2`: a LLaDA2-architecture MoE upcycled from the stage-2 model (`s2d2/tiny/llada2.py`),
trained with block diffusion + the editing objective (`objectives.corrupt_visible`).

Everything lives in a run folder (default `runs/tiny/`, git-ignored):

    runs/tiny/tokenizer/           the trained tokenizer (shared by both stages)
    runs/tiny/data.npz             the tokenised training / validation streams (cache)
    runs/tiny/<stage>/             latest/ (model; stage llada2: in the official LLaDA2 layout), state.pt
                                   (optimizer, step, RNG),
                                   log.jsonl (one line per logged step), snap_<step>/ (snapshots)

A run resumes from `<stage>/state.pt` when it exists. With `minutes`, the cosine learning-rate schedule follows
wall time (progress = elapsed / budget) and the stage stops when the budget is spent; otherwise it follows steps.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..models.builders import load_tokenizer, quiet_progress
from ..tasks import arithmetic as ar_task
from . import llada2 as tiny_llada2
from . import objectives as obj
from .data import DocStream, austen_split
from .export import export_llada2, export_model
from .log_line import log_line
from .model import build_model
from .options import STAGES, TrainOptions, init_folder, options_from_argv
from .tokenizer import special_ids, train_tokenizer

__all__ = ["train_tiny", "TrainOptions", "export_model", "export_llada2"]


# ----------------------------------------------------------------------------------------------- data

def _tokenizer_and_data(o: TrainOptions):
    out = Path(o.out)
    tok_dir = out / "tokenizer"
    cache = out / "data.npz"
    train_docs = val_docs = None
    if o.stage == "llada2" and not (tok_dir / "tokenizer.json").exists():  # reuse the upcycled model's tokenizer
        load_tokenizer(init_folder(o)).save_pretrained(str(tok_dir))
    if not (tok_dir / "tokenizer.json").exists() or not cache.exists():
        print(f"[train-tiny] preparing the tokenizer and data cache in {out} from the novels in {o.data_dir} "
              "(once per --out, about a minute) ...", flush=True)
        train_docs, val_docs = austen_split(o.data_dir)
    if not (tok_dir / "tokenizer.json").exists():
        sample = [ar_task.training_text(p) for p in ar_task.train_examples(o.seed + 1_000_003, 20_000)]
        train_tokenizer(train_docs + sample, tok_dir, o.vocab)
    tok = load_tokenizer(tok_dir)
    eot = tok.eos_token_id
    if not cache.exists():
        arith_train = [ar_task.training_text(p) for p in ar_task.train_examples(o.seed, o.n_arith)]
        arith_val = [ar_task.training_text(p) for p in ar_task.heldout(ar_task.HELDOUT_MAX)]
        streams = {
            "arith_train": DocStream.build(tok, arith_train, eot),
            "arith_val": DocStream.build(tok, arith_val, eot),
            "text_train": DocStream.build(tok, train_docs, eot),
            "text_val": DocStream.build(tok, val_docs, eot),
        }
        out.mkdir(parents=True, exist_ok=True)
        np.savez(cache, **{f"{k}_ids": v.ids for k, v in streams.items()},
                 **{f"{k}_starts": v.starts for k, v in streams.items()})
    z = np.load(cache)
    names = ("arith_train", "arith_val", "text_train", "text_val")
    streams = {k: DocStream(z[f"{k}_ids"], z[f"{k}_starts"]) for k in names}
    return tok, streams


def _sample_rows(streams, rng: np.random.Generator, n: int, L: int, p_arith: float, split: str = "train"):
    n_ar = int(rng.binomial(n, p_arith))
    parts = []
    if n_ar:
        parts.append(streams[f"arith_{split}"].rows(rng, n_ar, L))
    if n - n_ar:
        parts.append(streams[f"text_{split}"].rows(rng, n - n_ar, L))
    rows = np.concatenate(parts)
    rng.shuffle(rows)
    return torch.from_numpy(rows)


# ----------------------------------------------------------------------------------------------- helpers

def _lr_at(o: TrainOptions, step: int, progress: float) -> float:
    if step < o.warmup:
        return o.lr * (step + 1) / o.warmup
    p = min(max(progress, 0.0), 1.0)
    return o.lr * (o.min_lr_frac + (1 - o.min_lr_frac) * 0.5 * (1 + math.cos(math.pi * p)))


def _make_optimizer(model, o: TrainOptions):
    decay, no_decay = [], []
    for n, p in model.named_parameters():
        (decay if p.ndim >= 2 and "embed" not in n else no_decay).append(p)
    return torch.optim.AdamW([
        {"params": decay, "weight_decay": o.weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ], lr=o.lr, betas=(0.9, 0.95), eps=1e-8)


def _save_model(model, folder: Path) -> None:
    """Qwen3: save_pretrained. Glm4Moe: the official LLaDA2 layout (so every checkpoint exercises the map)."""
    tmp = folder.with_name(folder.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    if model.config.model_type == "glm4_moe":
        from ..models.llada2 import write_official

        write_official(model, tmp)
    else:
        model.save_pretrained(str(tmp), safe_serialization=True)
    if folder.exists():
        shutil.rmtree(folder)
    os.replace(tmp, folder)


def _load_weights(model, folder: Path) -> None:
    from safetensors.torch import load_file

    sd = load_file(str(folder / "model.safetensors"))
    if model.config.model_type == "glm4_moe":
        from ..models.llada2 import to_native

        sd = to_native(sd, json.loads((folder / "config.json").read_text()))
    missing, unexpected = model.load_state_dict(sd, strict=False)
    bad = [k for k in missing if "lm_head" not in k]
    if bad or unexpected:
        raise RuntimeError(f"weights mismatch: missing {bad}, unexpected {unexpected}")
    model.tie_weights()


@torch.no_grad()
def _evaluate(model, o: TrainOptions, val_batches: dict, mask_id: int, edit: dict | None = None) -> dict:
    model.eval()
    res = {}
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=o.bf16):
        for name, ids in val_batches.items():
            if o.stage == "ar":
                res[f"val_{name}"] = float(obj.ar_loss(model, ids))
            else:
                g = torch.Generator().manual_seed(123)
                b = obj.make_sdar_batch(ids, g, mask_id, p_ar=1.0)
                res[f"val_{name}_armode"] = float(obj.sdar_loss(model, *b))
                if name == "arith":
                    b = obj.make_sdar_batch(ids, g, mask_id, p_ar=0.0, blocks=(4,), p_causal_clean=0.0,
                                            complementary=False, t_min=0.5, t_max=0.5)
                    res["val_arith_bd4"] = float(obj.sdar_loss(model, *b))
                if name == "arith" and edit is not None:
                    res.update(_evaluate_llada2(model, ids, mask_id, edit))
    model.train()
    return res


def _evaluate_llada2(model, ids: torch.Tensor, mask_id: int, edit: dict) -> dict:
    """Block 32 at 50 % masking: loss on the masked positions, and on 15 % corrupted visible ones (editing)."""
    g = torch.Generator().manual_seed(321)
    inp, pos, attn, tg = obj.make_sdar_batch(ids, g, mask_id, p_ar=0.0, blocks=(32,), p_causal_clean=0.0,
                                             complementary=False, t_min=0.5, t_max=0.5)
    out = {"val_arith_bd32": float(obj.sdar_loss(model, inp, pos, attn, tg))}
    inp, tg2, corrupt = obj.corrupt_visible(inp, tg, g, mask_id, 0.15, 0.0, **edit)
    only_edits = torch.where(corrupt, tg2, torch.full_like(tg2, -100))
    if bool(corrupt.any()):
        out["val_arith_edit"] = float(obj.sdar_loss(model, inp, pos, attn, only_edits))
    return out


def _build(o: TrainOptions, tok, eot: int, resume: bool):
    """The model to train: a fresh Qwen3 (stage ar), Qwen3 to be initialised (sdar), or the upcycled MoE."""
    if o.stage != "llada2":
        return build_model(o.size, len(tok), seed=o.seed, eos_id=eot)
    init = init_folder(o)
    model = tiny_llada2.build_from_qwen3(init, seed=o.seed, rope_fraction=o.rope_fraction)
    if not resume:
        print(f"[train-tiny] llada2 upcycled from {init}")
    return model


def _edit_args(tok) -> dict:
    digits = torch.tensor(tok.convert_tokens_to_ids([str(d) for d in range(10)]), dtype=torch.long)
    return {"vocab": len(tok), "first_regular": len(special_ids(tok)), "digit_ids": digits}


# ----------------------------------------------------------------------------------------------- main loop

@dataclass
class TrainRun:
    """One stage's live state: what a checkpoint (`<stage>/state.pt` + `latest/`) saves and a resume restores."""

    o: TrainOptions
    stage_dir: Path
    model: Any
    opt: torch.optim.Optimizer
    rng: np.random.Generator  # batch sampling
    gen: torch.Generator  # masking and corruption draws
    step: int = 0
    tokens: int = 0
    elapsed: float = 0.0  # training seconds (evaluation excluded)

    @property
    def state_path(self) -> Path:
        return self.stage_dir / "state.pt"

    def progress(self) -> float:
        """Fraction of the budget spent: wall time with `minutes`, else steps."""
        if self.o.minutes:
            return self.elapsed / (60.0 * self.o.minutes)
        return self.step / max(1, self.o.steps)

    def done(self) -> bool:
        return self.progress() >= 1.0 or bool(self.o.max_tokens and self.tokens >= self.o.max_tokens)

    def stamp(self) -> dict:
        return {"step": self.step, "tokens": self.tokens, "elapsed_s": round(self.elapsed, 1)}

    def save(self) -> None:
        _save_model(self.model, self.stage_dir / "latest")
        tmp = str(self.state_path) + ".tmp"
        torch.save({"opt": self.opt.state_dict(), "step": self.step, "tokens": self.tokens, "elapsed": self.elapsed,
                    "np_rng": self.rng.bit_generator.state, "torch_gen": self.gen.get_state()}, tmp)
        os.replace(tmp, self.state_path)

    def resume(self) -> None:
        st = torch.load(self.state_path, map_location="cpu", weights_only=True)  # plain tensors, numbers, strings
        _load_weights(self.model, self.stage_dir / "latest")
        self.opt.load_state_dict(st["opt"])
        self.step, self.tokens, self.elapsed = st["step"], st["tokens"], st["elapsed"]
        self.rng.bit_generator.state = st["np_rng"]
        self.gen.set_state(st["torch_gen"])


def _options(options: TrainOptions | dict | list[str] | None) -> TrainOptions:
    if isinstance(options, list) or options is None:
        o = options_from_argv(options or [])
    elif isinstance(options, dict):
        o = TrainOptions(**options)
    else:
        o = options
    if o.stage not in STAGES:
        raise ValueError(f"stage: must be one of {', '.join(STAGES)}, got {o.stage!r}")
    return o


def _start_run(o: TrainOptions, tok, stage_dir: Path) -> TrainRun:
    """A fresh, initialised or resumed run of stage `o.stage`."""
    resume = (stage_dir / "state.pt").exists()
    model = _build(o, tok, special_ids(tok)["<|endoftext|>"], resume=resume)
    run = TrainRun(o, stage_dir, model, _make_optimizer(model, o),
                   np.random.default_rng(o.seed + (0 if o.stage == "ar" else 17)),
                   torch.Generator().manual_seed(o.seed + 99))
    if resume:
        run.resume()
        print(f"[train-tiny] resumed {o.stage} at step {run.step} ({run.tokens} tokens, {run.elapsed / 60:.1f} min)")
    elif o.stage == "sdar":
        init = init_folder(o)
        _load_weights(model, init)
        print(f"[train-tiny] stage 2 initialised from {init}")
    return run


def _train_batch(run: TrainRun, streams: dict, mask_id: int, blocks: tuple[int, ...],
                 edit: dict | None) -> tuple[float, float, float]:
    """One optimiser step on a fresh batch; returns (learning rate, loss, gradient norm)."""
    o = run.o
    lr = _lr_at(o, run.step, run.progress())
    for group in run.opt.param_groups:
        group["lr"] = lr
    ids = _sample_rows(streams, run.rng, o.batch, o.seq_len, o.p_arith)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=o.bf16):
        if o.stage == "ar":
            loss = obj.ar_loss(run.model, ids)
        else:
            inp, pos, attn, tg = obj.make_sdar_batch(ids, run.gen, mask_id, p_ar=o.p_ar, blocks=blocks,
                                                     p_causal_clean=o.p_causal_clean, t_min=o.t_min, t_max=o.t_max)
            if edit is not None:
                inp, tg, _ = obj.corrupt_visible(inp, tg, run.gen, mask_id, o.p_edit, o.p_keep, **edit)
            loss = obj.sdar_loss(run.model, inp, pos, attn, tg)
    loss.backward()
    grad_norm = torch.nn.utils.clip_grad_norm_(run.model.parameters(), o.grad_clip)
    run.opt.step()
    run.opt.zero_grad(set_to_none=True)
    run.step += 1
    run.tokens += int(ids.numel())
    return lr, float(loss.detach()), float(grad_norm)


def _progress_bar(run: TrainRun):
    if not run.o.progress:
        return None
    from tqdm import tqdm

    o = run.o
    total = round(60 * o.minutes) if o.minutes else o.steps
    return tqdm(total=total, initial=round(run.elapsed, 1) if o.minutes else run.step,
                unit="s" if o.minutes else "step", desc=f"train-tiny {o.stage}", mininterval=5)


def _accuracy(run: TrainRun, tok) -> float:
    from .evalquick import arithmetic_accuracy

    run.model.eval()
    acc = arithmetic_accuracy(run.model, tok, run.o.acc_n, mode="causal" if run.o.stage == "ar" else "aligned")
    run.model.train()
    return acc


def _export(run: TrainRun, tok) -> None:
    o = run.o
    if o.export and o.stage == "llada2":
        export_llada2(run.model, tok, o.export, block_size=o.block_size)
    elif o.export:
        export_model(run.stage_dir / "latest", tok, o.export, block_size=o.block_size,
                     alignment="aligned" if o.stage == "sdar" else "causal")


def train_tiny(options: TrainOptions | dict | list[str] | None = None) -> Path:
    """Train one stage. Accepts TrainOptions, a dict of its fields, or a CLI argv list. Returns the stage folder."""
    o = _options(options)
    torch.set_num_threads(o.threads)
    quiet_progress()
    stage_dir = Path(o.out) / o.stage
    if o.fresh and stage_dir.exists():
        shutil.rmtree(stage_dir)
    stage_dir.mkdir(parents=True, exist_ok=True)
    tok, streams = _tokenizer_and_data(o)
    mask_id = special_ids(tok)["<|MASK|>"]
    run = _start_run(o, tok, stage_dir)
    edit = _edit_args(tok) if o.stage == "llada2" else None
    balancer = tiny_llada2.ExpertBalancer(run.model, o.balance_rate) if o.stage == "llada2" else None
    (stage_dir / "options.json").write_text(json.dumps(dataclasses.asdict(o), indent=1))
    run.model.train()
    vrng = np.random.default_rng(4242)
    val_batches = {"arith": _sample_rows(streams, vrng, 16, o.seq_len, 1.0, "val"),
                   "text": _sample_rows(streams, vrng, 16, o.seq_len, 0.0, "val")}
    blocks = tuple(int(b) for b in o.blocks.split(","))
    bar = _progress_bar(run)
    with open(stage_dir / "log.jsonl", "a") as log_f:
        t_last, losses = time.time(), []
        while not run.done():
            lr, loss, grad_norm = _train_batch(run, streams, mask_id, blocks, edit)
            load = balancer.step() if balancer is not None else None
            now = time.time()
            run.elapsed += now - t_last
            if bar is not None:
                bar.update(now - t_last if o.minutes else 1)
            t_last = now
            losses.append(loss)
            rec = {}
            if run.step % o.log_every == 0:
                rec = {"lr": lr, "loss": round(sum(losses) / len(losses), 4), "grad_norm": round(grad_norm, 3)}
                if load is not None:
                    rec["expert_load_max"] = round(load, 3)
                if bar is not None:
                    bar.set_postfix(loss=f"{rec['loss']:.3f}", lr=f"{lr:.2e}")
                losses = []
            if run.step % o.eval_every == 0:
                rec.update(_evaluate(run.model, o, val_batches, mask_id, edit))
            if o.acc_every and run.step % o.acc_every == 0:
                rec["arith_acc_greedy"] = _accuracy(run, tok)
                t_last = time.time()  # evaluation time is not training time
            if rec:
                _log(log_f, {**run.stamp(), **rec})
            if run.step % o.ckpt_every == 0:
                run.save()
            if o.snap_every and run.step % o.snap_every == 0:
                _save_model(run.model, stage_dir / f"snap_{run.step:06d}")
        run.save()
        final = {**run.stamp(), "final": True, **_evaluate(run.model, o, val_batches, mask_id, edit)}
        log_f.write(json.dumps(final) + "\n")
    if bar is not None:
        bar.close()
    print(f"[train-tiny] done: {log_line(final)}", flush=True)
    _export(run, tok)
    return stage_dir


def _log(log_f, rec: dict) -> None:
    log_f.write(json.dumps(rec) + "\n")
    log_f.flush()
    if any(k.startswith("val") or k.startswith("arith") for k in rec):
        print(f"[train-tiny] {log_line(rec)}", flush=True)
