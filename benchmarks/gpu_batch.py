"""Batched decoding on the static backend, on the GPU (issue 24 item 5): the rows benchmarks/gpu_check.py prints
for it, each the moment it is measured and each only when the budget allows it.

1. Capture: one CUDA graph per (batch bucket, row bucket) up to the largest batch size, and the seconds it took.
2. Agreement: each of n sequences decoded in one batch against its own batch-1 decode on the same model (tokens and
   NFE). On a GPU a padded batch sums in another order, so in bf16 a few sequences may differ (a near-tie flipped);
   in float32 on the bundled model they should all agree.
3. Throughput: decodes/s and tokens/s at batch 1 / 8 / 32 (each batch size decodes as many prompts as it holds,
   batch 1 a few), and the ratio to batch 1; the graphs replayed against eager forwards run, so a run that fell back
   to eager or to dynamic caches says so.
4. Syncs: every synchronizing CUDA call of one batched decode (torch's sync debug mode) per batch step (the longest
   sequence's steps) and per sequence-step, against the same counts at batch 1, with the ledger's shared reads (one
   packed transfer serves every waiting sequence's read: ~2 per batch step for the whole batch) against the reads
   the sequences asked for.
"""
from __future__ import annotations

import time
import warnings
from typing import Any, Callable

import torch

import s2d2
from s2d2.api import check_fits, encode_prompt
from s2d2.decoding.layout import block_lengths

SIZES = (1, 8, 32)


def _sync(model: Any) -> None:
    if model.device.type == "cuda":
        torch.cuda.synchronize(model.device)


def _decode(model: Any, prompts: list[Any], cfg: Any, batch: int) -> tuple[float, list[Any]]:
    _sync(model)
    t0 = time.perf_counter()
    out = s2d2.generate_batch(model, prompts, cfg, list(range(len(prompts))), batch_size=batch, detailed=False)
    _sync(model)
    return time.perf_counter() - t0, out


def batch_rows(tag: str, model: Any, prompts: list[Any], cfg: Any, allows: Callable[[str, float], bool],
               row: Callable[[str, str], None], sizes: tuple[int, ...] = SIZES, per_decode_s: float = 2.0) -> None:
    """Rows 1-4 of the module docstring for `model` (an HFModel on the static backend) and `cfg`."""
    top = min(max(sizes), len(prompts))
    if model.static is None or not allows(f"{tag} batched-static capture", 30):
        return
    model.reserve_slots(top)  # first: growing the slots later would drop the graphs
    total = max(check_fits(model, cfg, len(encode_prompt(model, p)[0])) for p in prompts[:top])
    seconds = model.warmup(block_lengths=block_lengths(cfg), max_length=total, batch_size=top)
    stats = model.static.stats
    row(f"{tag} batched-static capture", f"{seconds:.1f} s, slots {model.static.slots}, graphs "
        f"{stats.graphs_captured}, capture failures {len(stats.capture_failures)}")
    n = min(8, top)
    if allows(f"{tag} batch {n} vs batch 1 agreement", 2.5 * n * per_decode_s):
        alone = [s2d2.generate(model, p, cfg, seed=i, detailed=False) for i, p in enumerate(prompts[:n])]
        _, together = _decode(model, prompts[:n], cfg, n)
        tokens = sum(a.token_ids == b.token_ids for a, b in zip(alone, together))
        nfe = sum(a.metrics["nfe"] == b.metrics["nfe"] for a, b in zip(alone, together))
        row(f"{tag} batch {n} vs batch 1", f"identical tokens {tokens}/{n}, equal NFE {nfe}/{n}")
    base = None
    for size in sizes:
        k = min(len(prompts), size if size > 1 else 4)
        need = k * per_decode_s / (1 if base is None else max(1.0, base * size / 8))
        if not allows(f"{tag} decodes/s batch {size}", 1.5 * need + 2):
            continue
        replays, eager, fallbacks = stats.graph_replays, stats.eager_forwards, stats.dynamic_fallbacks
        wall, out = _decode(model, prompts[:k], cfg, size)
        rate = k / wall
        tokens = sum(r.metrics["generated_tokens"] for r in out)
        base = rate if size == 1 else base
        ratio = f", x{rate / base:.2f} vs batch 1" if base and size > 1 else ""
        per_decode_s = wall / k if size == 1 else per_decode_s
        row(f"{tag} decodes/s batch {size}", f"{rate:.2f} decodes/s, {tokens / wall:.1f} tokens/s{ratio}; graph "
            f"replays {stats.graph_replays - replays}, eager {stats.eager_forwards - eager}, dynamic fallbacks "
            f"{stats.dynamic_fallbacks - fallbacks}")
    if model.device.type == "cuda" and allows(f"{tag} CUDA syncs per batch step", 3 * per_decode_s + 5):
        for size in (1, n):
            row(f"{tag} CUDA syncs per step, batch {size}", sync_row(model, prompts[:size], cfg, size))


def sync_row(model: Any, prompts: list[Any], cfg: Any, batch: int) -> str:
    """Row 4 for one batch size (on the CPU, where nothing synchronizes, the sync counts are 0)."""
    syncs, out = _counted(model, prompts, cfg, batch)
    steps = sum(len(r.trace.steps) for r in out)
    longest = max(len(r.trace.steps) for r in out)
    ledger = out[0].batch.summary()
    return (f"{syncs / max(1, longest):.2f} per batch step ({longest} steps), {syncs / max(1, steps):.2f} per "
            f"sequence-step; shared reads {ledger['reads']} for {ledger['sequence_reads']} sequence reads")


def _counted(model: Any, prompts: list[Any], cfg: Any, batch: int) -> tuple[int, list[Any]]:
    """(synchronizing CUDA calls of one batched decode, its results)."""
    cuda = model.device.type == "cuda"
    if cuda:
        torch.cuda.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings(record=True) as caught:  # the warnings module is global: every thread's count
            warnings.simplefilter("always")
            out = s2d2.generate_batch(model, prompts, cfg, list(range(len(prompts))), batch_size=batch,
                                      detailed=False)
    finally:
        if cuda:
            torch.cuda.set_sync_debug_mode("default")
    return sum("synchroniz" in str(w.message) for w in caught), out
