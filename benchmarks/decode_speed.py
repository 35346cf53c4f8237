"""Decode speed, side by side in one run: S2D2 vs AR (wall and NFE), trace on vs off, the share of decode time
outside model forwards, and the dynamic vs the static forward backend (s2d2/models/static_backend.py).

    python -m benchmarks.decode_speed                 # bundled tiny model (random tiny Qwen3 if absent)
    python -m benchmarks.decode_speed --model PATH --gen-length 128 --repeats 3 --backends dynamic

Runs are interleaved (every arm on every backend, prompt by prompt, repeat by repeat), so machine noise hits every
arm alike; figures are totals over all runs. Every arm is lean (`detailed=False`) except `s2d2_traced`, which
records the full trace (its ratio to `s2d2` is the cost of tracing). "outside forwards" is wall time; "(CPU)" is the
same share in this thread's CPU time (the decode loop's, against its model forwards'), which other jobs' time
slices on a shared machine do not inflate. `reads/step` is the device-to-host reads per
decode step outside model forwards, counted in one extra untimed run per arm (s2d2/host_syncs.py): on a GPU each
is a sync. Nothing is asserted.
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path


import torch  # noqa: E402

import s2d2  # noqa: E402
from benchmarks.cpu_clock import CpuClock
from s2d2.host_syncs import HostSyncCounter  # noqa: E402
from s2d2.models import HFModel  # noqa: E402


def task_prompts(n: int = 4) -> list[str]:
    """Held-out arithmetic questions: the bundled model's task, so acceptance is realistic."""
    from s2d2.tasks.arithmetic import heldout

    return [p.question for p in heldout(n)]


def load(name: str):
    if name == "random" or (name == "tiny" and not (Path(__file__).resolve().parents[1] / "assets/tiny").exists()):
        from transformers import Qwen3Config, Qwen3ForCausalLM

        torch.manual_seed(0)
        cfg = Qwen3Config(vocab_size=4096, hidden_size=256, intermediate_size=768, num_hidden_layers=6,
                          num_attention_heads=4, num_key_value_heads=2, head_dim=64, tie_word_embeddings=True)
        m = Qwen3ForCausalLM(cfg).eval()
        return s2d2.from_transformers(m, None, mask_token_id=4095, stop_token_ids=[], logits="aligned"), True
    return s2d2.load_model(name), False


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="tiny")
    ap.add_argument("--preset", default="sdar-config-b", help="the S2D2 arm (default: always verify, B=16)")
    ap.add_argument("--gen-length", type=int, default=96)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--backends", default="dynamic,static", help="comma-separated: dynamic, static")
    ap.add_argument("--threads", type=int, default=int(os.environ.get("S2D2_THREADS", "2")))
    return ap


def measure(models: dict[str, HFModel], arms: dict[str, tuple], prompts: list,
            repeats: int) -> tuple[dict, dict, dict]:
    """(metrics of every timed run, CPU clock, host reads per step), each by (arm, backend): the timed runs
    interleaved, then one untimed run per arm that counts the reads."""
    for model in models.values():
        s2d2.generate(model, prompts[0], arms["ar"][0])  # warm-up
    runs: dict[tuple[str, str], list[dict]] = {(a, b): [] for a in arms for b in models}
    cpu = {key: CpuClock() for key in runs}
    for _ in range(repeats):
        for prompt in prompts:
            for name, (cfg, detailed) in arms.items():
                for backend, model in models.items():
                    with cpu[(name, backend)].watching(model):
                        res = s2d2.generate(model, prompt, cfg, seed=0, detailed=detailed)
                    runs[(name, backend)].append(res.metrics)

    reads: dict[tuple[str, str], float] = {}
    for name, (cfg, detailed) in arms.items():
        for backend, model in models.items():
            with HostSyncCounter(model) as counter:
                res = s2d2.generate(model, prompts[0], cfg, seed=0, detailed=detailed)
            reads[(name, backend)] = counter.reads / max(1, len(res.trace.steps))
    return runs, cpu, reads


def main() -> None:
    args = _parser().parse_args()
    torch.set_num_threads(args.threads)
    base, random_weights = load(args.model)
    models = {b: HFModel(base.model, base.tokenizer, base.spec, backend=b) for b in args.backends.split(",")}
    prompts = [[5 + i for i in range(12)], [40 + i for i in range(20)]] if random_weights else task_prompts()
    arms = {
        "ar": (s2d2.preset("ar", gen_length=args.gen_length), False),
        "dynamic_baseline": (s2d2.preset("dynamic-baseline", gen_length=args.gen_length), False),
        "s2d2": (s2d2.preset(args.preset, gen_length=args.gen_length), False),
        "s2d2_traced": (s2d2.preset(args.preset, gen_length=args.gen_length), True),
    }
    runs, cpu, reads = measure(models, arms, prompts, args.repeats)

    def total(key: tuple[str, str], field: str) -> float:
        return sum(m[field] for m in runs[key])

    def per_token(key: tuple[str, str], field: str) -> float:
        return total(key, field) / max(1, total(key, "generated_tokens"))

    print(f"model: {base.spec.name} ({'random weights' if random_weights else 'trained'}), device {base.device}, "
          f"dtype {base.dtype}, threads {args.threads}, gen_length {args.gen_length}, "
          f"{len(prompts)} prompts x {args.repeats} repeats")
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (other jobs share the machine)")
    print(f"{'arm':18s} {'backend':8s} {'tokens':>7s} {'NFE/token':>10s} {'wall ms/token':>14s} "
          f"{'outside forwards':>17s} {'(CPU)':>7s} {'reads/step':>11s}")
    for key in runs:
        outside = 1 - total(key, "forward_seconds") / total(key, "wall_seconds")
        outside_cpu = cpu[key].outside
        print(f"{key[0]:18s} {key[1]:8s} {total(key, 'generated_tokens'):7.0f} {per_token(key, 'nfe'):10.3f} "
              f"{per_token(key, 'wall_seconds') * 1000:14.2f} {outside:17.1%} {outside_cpu:7.1%} {reads[key]:11.2f}")
    def cpu_per_token(key: tuple[str, str]) -> float:
        return cpu[key].loop / max(1, total(key, "generated_tokens"))

    for backend in models:
        ar, sp = ("ar", backend), ("s2d2", backend)
        nfe_x = per_token(ar, 'nfe') / per_token(sp, 'nfe')
        wall_x = per_token(ar, 'wall_seconds') / per_token(sp, 'wall_seconds')
        cpu_x = cpu_per_token(ar) / cpu_per_token(sp)
        print(f"\n[{backend}] S2D2 vs AR  NFE speedup:  {nfe_x:.2f}x  (AR accounting: 1 forward per token)")
        print(f"[{backend}] S2D2 vs AR  wall speedup: {wall_x:.2f}x (wall/NFE {wall_x / nfe_x:.2f}); CPU-time speedup "
              f"{cpu_x:.2f}x (CPU/NFE {cpu_x / nfe_x:.2f})")
        print(f"[{backend}] S2D2 vs dynamic baseline wall speedup: "
              f"{per_token(('dynamic_baseline', backend), 'wall_seconds') / per_token(sp, 'wall_seconds'):.2f}x")
        print(f"[{backend}] trace on / off wall ratio: "
              f"{per_token(('s2d2_traced', backend), 'wall_seconds') / per_token(sp, 'wall_seconds'):.3f}")
    if "dynamic" in models and "static" in models:
        print()
        for name in arms:
            ratio = per_token((name, "dynamic"), "wall_seconds") / per_token((name, "static"), "wall_seconds")
            print(f"{name}: static backend wall speedup over dynamic: {ratio:.2f}x")


if __name__ == "__main__":
    main()
