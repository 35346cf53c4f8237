"""Batched decoding speed (issue 24): decodes/s and tokens/s of `s2d2.generate_batch` at batch 1 / 8 / 32 / 64,
one CPU thread then two, for AR, the dynamic baseline and the S2D2 presets on both bundled models, with the float32
agreement rate (a decode's output identical to its batch-1 output).

    python -m benchmarks.batch_speed                          # n = 64 held-out problems per run, gen length 64
    python -m benchmarks.batch_speed --n 128 --batch-sizes 1,8,32,64 --threads 1,2 --out batch_speed.json
    python -m benchmarks.batch_speed --random sdar-1.7b --device cuda --dtype bfloat16 --batch-sizes 1,8,32,64,128
    python -m benchmarks.batch_speed --random small --threads 1 --n 8 --batch-sizes 1,4   # that path, on a CPU

`--random` decodes random token-id prompts (lengths 24-87) on a random Qwen3 of SDAR-1.7B's geometry (or a small
one), no stop ids, so every decode runs to its length: throughput only (random weights accept little; agreement
there is between random-weight outputs).

One interleaved run: for each thread count, model and arm, every batch size runs back to back over the same
prompts and seeds (problem i: seed i), so machine noise hits every batch size of an arm alike. Batch 1 is the same
engine with one live sequence (its forwards are exactly `generate`'s). `cpu/s` is decodes per second of this
process's CPU time (every thread: the noise-robust figure on a shared machine; with two threads it counts both);
`x b1` is the wall-time speed-up over batch 1 and `cpu x b1` the CPU-time one; `fwd/seq-fwd` is how many
sequence-forwards one batch forward served on average; `pad` the share of padded query rows. `agree` counts decodes
whose token ids equal batch 1's: in float32 a shared forward sums in another order than a single one, and a near-tie
between two tokens can then fall the other way (the whole decode after it may differ); in float64 the tests hold
every trace equal (tests/lib/test_batch_decode.py).
Nothing is asserted.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any


import torch  # noqa: E402

import s2d2  # noqa: E402
from s2d2.tasks.arithmetic import heldout  # noqa: E402

ARMS = {
    "tiny": ["ar", "dynamic-baseline", "sdar-config-a", "sdar-config-b", "sdar-config-b+reuse+fused+trim"],
    "tiny-llada2": ["ar", "llada2-dynamic", "llada2-quality", "llada2-conservative"],
}


def random_model(shape: str, device: str, dtype: torch.dtype) -> Any:
    """A random Qwen3 (gpu_check.py's geometries) wrapped on the dynamic backend."""
    from benchmarks.gpu_check import SDAR_1_7B, SDAR_MASK, SMALL, build, wrap

    geometry, mask_id = (SDAR_1_7B, SDAR_MASK) if shape == "sdar-1.7b" else (SMALL, SMALL["vocab_size"] - 1)
    return wrap(build(geometry, dtype, device), "dynamic", mask_id)


def random_prompts(n: int, vocab: int, mask_id: int) -> list[list[int]]:
    g = torch.Generator().manual_seed(0)
    out = []
    for i in range(n):
        ids = torch.randint(0, vocab - 1, (24 + (i * 37) % 64,), generator=g).tolist()
        out.append([t if t != mask_id else t - 1 for t in ids])
    return out


def run(model: Any, prompts: list[Any], cfg: Any, batch: int) -> dict[str, Any]:
    t0, c0 = time.perf_counter(), time.process_time()
    results = s2d2.generate_batch(model, prompts, cfg, list(range(len(prompts))), batch_size=batch, detailed=False)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    summary = results[0].batch.summary()
    tokens = sum(r.metrics["generated_tokens"] for r in results)
    return {"batch": batch, "wall_s": wall, "cpu_s": cpu, "decodes_per_s": len(prompts) / wall,
            "decodes_per_cpu_s": len(prompts) / cpu, "tokens_per_s": tokens / wall,
            "sharing": summary["mean_sharing"], "padding": summary["padding_share"],
            "outputs": [r.token_ids for r in results]}


def arm_rows(model: Any, prompts: list[str], preset: str, batches: list[int], gen: int) -> Any:
    """Each batch size's row in turn (batch 1 first: the others are measured against it)."""
    cfg = s2d2.preset(preset, gen_length=gen)
    base = None
    for b in sorted(batches):
        r = run(model, prompts, cfg, b)
        base = base or r
        r["speedup"] = r["decodes_per_s"] / base["decodes_per_s"]
        r["cpu_speedup"] = r["decodes_per_cpu_s"] / base["decodes_per_cpu_s"]
        r["agree"] = sum(a == o for a, o in zip(r["outputs"], base["outputs"]))
        r["n"] = len(prompts)
        yield r


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=64, help="held-out problems per run (default 64)")
    ap.add_argument("--gen-length", type=int, default=64)
    ap.add_argument("--batch-sizes", default="1,8,32,64")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--models", default="tiny,tiny-llada2")
    ap.add_argument("--arms", default=None, help="comma-separated presets (default: per model, see ARMS)")
    ap.add_argument("--out", default=None, help="also write the rows (without outputs) to this JSON file")
    ap.add_argument("--random", choices=["sdar-1.7b", "small"], default=None,
                    help="a random Qwen3 of this geometry instead of the bundled models (throughput only)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16", "float64"])
    args = ap.parse_args(argv)
    batches = [int(b) for b in args.batch_sizes.split(",")]
    dtype = getattr(torch, args.dtype)
    table: list[dict[str, Any]] = []
    what = f"random {args.random} prompts" if args.random else "held-out problems"
    print(f"n = {args.n} {what} per run, gen length {args.gen_length}, {args.dtype} on {args.device}, dynamic backend")
    print(f"{'thr':>3} {'model':<11} {'arm':<31} {'batch':>5} {'dec/s':>7} {'tok/s':>7} {'x b1':>5} {'cpu/s':>7} "
          f"{'cpu x b1':>8} {'fwd/seq-fwd':>11} {'pad':>5} {'agree':>7}")
    for threads in [int(t) for t in args.threads.split(",")]:
        torch.set_num_threads(threads)
        for name in ([args.random] if args.random else args.models.split(",")):
            if args.random:
                model = random_model(name, args.device, dtype)
                prompts: list[Any] = random_prompts(args.n, model.spec.vocab_size, model.spec.mask_id)
            else:
                model = s2d2.load_model(name, dtype=dtype, backend="dynamic", device=args.device)
                prompts = [p.question for p in heldout(args.n)]
            for preset in (args.arms.split(",") if args.arms else ARMS.get(name, ARMS["tiny"])):
                for r in arm_rows(model, prompts, preset, batches, args.gen_length):
                    print(f"{threads:>3} {name:<11} {preset:<31} {r['batch']:>5} {r['decodes_per_s']:>7.2f} "
                          f"{r['tokens_per_s']:>7.0f} {r['speedup']:>5.2f} {r['decodes_per_cpu_s']:>7.2f} "
                          f"{r['cpu_speedup']:>8.2f} {r['sharing']:>11.1f} {r['padding']:>5.2f} "
                          f"{r['agree']:>3}/{r['n']:<3}", flush=True)
                    table.append({"threads": threads, "model": name, "arm": preset,
                                  **{k: v for k, v in r.items() if k != "outputs"}})
                    if args.out:  # after every row: a killed run keeps what it measured
                        Path(args.out).write_text(json.dumps(table, indent=1))


if __name__ == "__main__":
    main()
