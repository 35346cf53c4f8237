"""Issue 37's GPU figures in one prepared, budgeted run: the batch-first step at batch 128 against batch 1.

Every row is printed (flushed) the moment it is measured, and the run stays inside `--budget-s`, saying what it
skipped. In order, each with the issue's target where it has one:

1. SDAR-1.7B shapes (random bf16 weights, static backend with CUDA graphs), `sdar-config-b`, 128 tokens: the graph
   capture for `--batch` slots; batch 1 (`s2d2.generate`, one prompt at a time): decodes/s and its forwards' share
   of the wall (forwards timed with a device sync on both sides, a second decode); then `--batch` prompts through
   `generate_batch` on the batch-first engine: decodes/s and the ratio to batch 1 (target >= 25x), the forwards'
   share of its wall (the ledger's forwards, each synchronized; target >= 85 %), sequences per forward against the
   sequences live when it ran (the ledger's `live_share`; target >= 0.9) and the host's seconds per
   sequence-forward outside the forwards; and whether every sequence's tokens equal its batch-1 decode's where
   both ran.
2. The same batch on the thread engine (the issue's "before" table: ~2 decodes/s, 37 % in forwards).
3. The bundled model alone (float32, static backend with graphs, `sdar-config-b`): the share of its wall outside
   forwards (target <= 15 %).
4. With `--compile`: the batch-first row again with torch.compile's fused kernels under the graphs (tens of seconds
   of compilation per captured shape, so last and only within the budget).

Dry run on the CPU (tiny shapes, no graphs; what the tests run): `python -m benchmarks.gpu_batch_first --small`.
On a lent GPU (docs/benchmarks.md says what to carry), one device call, `timeout_s` 600:

    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit; PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 timeout 560 python3 -m benchmarks.gpu_batch_first --budget-s 520 2>&1 | tee $OUT/gpu_batch_first.txt
"""
from __future__ import annotations

import time

T0 = time.perf_counter()  # the budget counts from here: imports included

import argparse  # noqa: E402
from typing import Any  # noqa: E402

import torch  # noqa: E402

import s2d2  # noqa: E402
from s2d2.api import check_fits, encode_prompt  # noqa: E402
from s2d2.decoding.layout import block_lengths  # noqa: E402

from benchmarks.gpu_check import SDAR_1_7B, SDAR_MASK, SMALL, Budget, SyncedForwards, build, row, sync, wrap  # noqa: E402

PRESET = "sdar-config-b"


def prompts_for(n: int) -> list[list[int]]:
    """`n` prompts of 48 to 141 token ids (as benchmarks/gpu_batch.py's), cycling through 32 lengths."""
    return [list(range(100 + i % 32, 148 + 3 * (i % 32))) for i in range(n)]


def capture(model: Any, prompts: list[list[int]], cfg: Any, batch: int) -> float:
    """Slots for `batch` sequences and the graphs of every (batch bucket, row bucket) the batch can run, as
    `generate_batch` would warm them (so no capture lands inside a timed decode); seconds spent."""
    model.reserve_slots(batch)
    total = max(check_fits(model, cfg, len(encode_prompt(model, p)[0])) for p in prompts)
    return model.warmup(block_lengths=block_lengths(cfg), max_length=total, batch_size=batch)


def batch_one(model: Any, prompts: list[list[int]], cfg: Any) -> tuple[float, float, list[list[int]]]:
    """(decodes/s, forwards' share of the wall, tokens) of `s2d2.generate` over `prompts` one at a time; the share
    from a second decode of the first prompt whose forwards are synchronized on both sides."""
    sync(model.device)
    t0 = time.perf_counter()
    out = [s2d2.generate(model, p, cfg, seed=i, detailed=False) for i, p in enumerate(prompts)]
    sync(model.device)
    rate = len(prompts) / (time.perf_counter() - t0)
    synced = SyncedForwards(model)
    again = s2d2.generate(synced, prompts[0], cfg, seed=0, detailed=False)
    return rate, synced.seconds / again.metrics["wall_seconds"], [r.token_ids for r in out]


def batch_row(label: str, model: Any, prompts: list[list[int]], cfg: Any, batch: int, engine: str,
              base: float | None, alone: list[list[int]]) -> None:
    """One `generate_batch` of `prompts` at `batch` on `engine`, printed as a row."""
    sync(model.device)
    t0 = time.perf_counter()
    out = s2d2.generate_batch(model, prompts, cfg, list(range(len(prompts))), batch_size=batch, detailed=False,
                              engine=engine)
    sync(model.device)
    wall = time.perf_counter() - t0
    s = out[0].batch.summary()
    rate, tokens = len(prompts) / wall, sum(r.metrics["generated_tokens"] for r in out)
    host_us = (s["wall_s"] - s["forward_wall_s"]) / max(1, s["sequence_forwards"]) * 1e6
    ratio = f", x{rate / base:.2f} vs batch 1 (target >= 25)" if base else ""
    same = sum(a == r.token_ids for a, r in zip(alone, out))
    row(label, f"{rate:.2f} decodes/s, {tokens / wall:.0f} tokens/s{ratio}; forwards "
        f"{s['forward_wall_s'] / s['wall_s']:.1%} of wall (target >= 85 %); {s['mean_sharing']:.1f} sequences per "
        f"forward of {s['mean_live']:.1f} live, x{s['live_share']:.2f} (target >= 0.9); host "
        f"{host_us:.0f} us per sequence-forward ({s['sequence_forwards']} over {s['forwards']} forwards); "
        f"tokens = batch 1 {same}/{len(alone)}")


def static_model(args: Any, cuda: bool, prompts: list[list[int]], cfg: Any,
                 compile: bool = False) -> tuple[Any, float]:
    """The random model (SDAR-1.7B shapes in bf16, tiny shapes in float32 with --small) on the static backend
    (with CUDA graphs on CUDA) holding `args.batch` slots, its graphs captured; and the capture's seconds."""
    shape, mask_id, dtype = (SMALL, SMALL["vocab_size"] - 1, torch.float32) if args.small else \
        (SDAR_1_7B, SDAR_MASK, torch.bfloat16)
    hf = wrap(build(shape, dtype, "cuda" if cuda else "cpu"), "static+graphs" if cuda else "static", mask_id,
              max_slots=args.batch, compile=compile)
    return hf, capture(hf, prompts, cfg, args.batch)


def synthetic(args: Any, budget: Budget, cuda: bool) -> None:
    """Rows 1, 2 and 4 at SDAR-1.7B shapes (tiny shapes with --small)."""
    tag, n = ("tiny-shape" if args.small else "SDAR-1.7B bf16"), args.batch
    cfg = s2d2.preset(PRESET, gen_length=args.gen_length)
    prompts = prompts_for(n)
    if not budget.allows(f"{tag} build", 2 if args.small else 40):
        return
    hf, seconds = static_model(args, cuda, prompts, cfg)
    row(f"{tag} capture, batch {n}", f"{seconds:.1f} s, graphs {hf.static.stats.graphs_captured}, "
        f"capture failures {len(hf.static.stats.capture_failures)}")
    k = min(n, args.alone)
    base, alone, decode_s = None, [], 0.2 if args.small else 3.0  # a batch-1 decode's guess until one is measured
    if budget.allows(f"{tag} batch 1", 2 * k * decode_s + 2):
        base, share, alone = batch_one(hf, prompts[:k], cfg)
        decode_s = 1 / base
        row(f"{tag} batch 1", f"{base:.3f} decodes/s ({k} prompts); forwards {share:.1%} of wall")
    need = n * decode_s / 4 + 5  # a batch run at 4x batch 1 (the thread engine)
    for engine in ("batch-first", "threads"):
        if budget.allows(f"{tag} batch {n} {engine}", need):
            batch_row(f"{tag} batch {n} {engine}", hf, prompts, cfg, n, engine, base, alone)
    if args.compile and budget.allows(f"{tag} batch {n} batch-first, compiled", 240 if cuda else 10):
        del hf
        if cuda:
            torch.cuda.empty_cache()
        hf, seconds = static_model(args, cuda, prompts, cfg, compile=True)
        row(f"{tag} compiled capture, batch {n}", f"{seconds:.1f} s")
        batch_row(f"{tag} batch {n} batch-first, compiled", hf, prompts, cfg, n, "batch-first", base, alone)


def bundled(args: Any, budget: Budget, cuda: bool) -> None:
    """Row 3: the bundled model alone, its wall outside forwards."""
    if not budget.allows("bundled alone", 15):
        return
    from s2d2.tasks.arithmetic import heldout

    tiny = s2d2.load_model("tiny", device="cuda" if cuda else "cpu", backend="dynamic")
    tiny.set_backend("static", graphs=cuda)
    cfg = s2d2.preset(PRESET, gen_length=args.gen_length)
    prompt = heldout(1)[0].question
    s2d2.generate(tiny, prompt, cfg, seed=0, detailed=False)  # capture and first-call costs
    synced = SyncedForwards(tiny)
    walls, inside = [], []
    for _ in range(3):
        before = synced.seconds
        res = s2d2.generate(synced, prompt, cfg, seed=0, detailed=False)
        walls.append(res.metrics["wall_seconds"])
        inside.append(synced.seconds - before)
    share = 1 - sum(inside) / sum(walls)
    row("bundled alone, static" + ("+graphs" if cuda else ""), f"{share:.1%} of wall outside forwards (target "
        f"<= 15 %), {res.metrics['nfe']} forwards, {sum(walls) / 3 * 1e3:.0f} ms per decode")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", action="store_true", help="tiny shapes (automatic without CUDA)")
    ap.add_argument("--budget-s", type=float, default=520.0, help="stay inside this many seconds (default 520)")
    ap.add_argument("--batch", type=int, default=None, help="batch size (default 128; 16 with --small)")
    ap.add_argument("--gen-length", type=int, default=None, help="decode length (default 128; 16 with --small)")
    ap.add_argument("--alone", type=int, default=4, help="prompts decoded at batch 1 (default 4)")
    ap.add_argument("--compile", action="store_true", help="also the batch-first row with torch.compile")
    args = ap.parse_args(argv)
    budget = Budget(args.budget_s, T0 if argv is None else time.perf_counter())
    cuda = torch.cuda.is_available()
    args.small = args.small or not cuda
    args.batch = args.batch or (16 if args.small else 128)
    args.gen_length = args.gen_length or (16 if args.small else 128)
    import transformers

    row("device", torch.cuda.get_device_name(0) if cuda else "cpu (no CUDA: --small shapes, no graphs)")
    row("versions", f"torch {torch.__version__}, transformers {transformers.__version__}, s2d2 {s2d2.__version__}")
    row("budget", f"{args.budget_s:.0f} s; {PRESET}, {args.gen_length} tokens, batch {args.batch}")
    synthetic(args, budget, cuda)
    if cuda:
        torch.cuda.empty_cache()
    bundled(args, budget, cuda)
    row("done", f"{budget.seconds - budget.left():.1f} s of {budget.seconds:.0f} s")


if __name__ == "__main__":
    main()
