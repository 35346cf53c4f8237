"""The batch engine's own host work (issue 37), ratios in one run.

    python -m benchmarks.batch_first                         # both parts
    python -m benchmarks.batch_first --part host --batch 128 --n 128
    python -m benchmarks.batch_first --part host --arms dynamic-baseline dynamic-baseline+extras
    python -m benchmarks.batch_first --part models --n 32 --gen-length 64

Part `host`: `generate_batch` on a stand-in model whose forward returns fixed logits at (almost) no cost
(benchmarks/stand_in.py), so the decode's time is the engine's host work. Engines: `threads` (every sequence runs
the batch-1 loop on its own thread; only the forwards are shared) and `batch-first` (s2d2/decoding/lockstep.py:
one step for every live sequence; only the loops it covers, see `covers`; the other arms are measured on threads
alone). Per arm, one untimed warm-up round, then `--rounds` rounds, each decoding the same prompts and seeds once
per engine in turn (threads, batch-first, threads, batch-first, ...); a round's figure per engine is this process's
CPU time (every thread's, not wall: the figure that holds on a shared machine) over the sequence-forwards the
ledger served, and its ratio is the thread engine's over the batch-first engine's of that round. Printed per arm:
each engine's median, the median of the rounds' ratios and their min-max (`--out` keeps every round), `x best`
(each engine's least round over the other's: the least disturbed figure), and `reps`:
each engine's decodes per round (threads/batch-first), repeated back to back until about `--min-cpu` seconds of
CPU (so a short arm's figure does not rest on a tenth of a second). Pairing the engines within a round keeps a
load change from landing on one engine only; the median keeps one bad round out.
`--fixed-tokens 4096` has the batch-first engine group its shared forwards as on an accelerator (one forward per
step carrying every live row, s2d2/decoding/batch.py `fixed_tokens_for`; the thread engine keeps its own grouping).

Part `models`: the bundled models on one CPU thread, decodes/s at batch 1 and at the batch given, per preset and
engine (`x b1`: batch N over batch 1 of the same engine, in wall time; `cpu x b1` in this process's CPU time, the
figure to read on a loaded machine). For the batch-first engine, one more batch-N decode under torch.profiler gives
its `floor`: the seconds inside matmul and attention kernels (benchmarks/kernel_floor.py), and `ceil x`, batch 1's CPU
time over that floor, the most batch N could reach if everything around those kernels cost nothing.
Engines and batch sizes of an arm run back to back over the same prompts and seeds, so machine noise hits them
alike. Nothing is asserted.
"""
from __future__ import annotations

import argparse
import gc
import json
import math
import time
from pathlib import Path
from typing import Any

import torch

import s2d2
from benchmarks.kernel_floor import ceiling, kernel_seconds
from benchmarks.percentiles import pct
from benchmarks.stand_in import StandInModel, stand_in_prompts

MAX_REPEATS = 20  # decodes of one engine per round at most (`--min-cpu`)
HOST_ARMS = [("aligned", "ar"), ("aligned", "dynamic-baseline"), ("aligned", "sdar-config-b"),
             ("aligned", "fastdllm-config-a"), ("shifted", "fastdllm-config-a"),
             ("aligned", "sdar-config-b+reuse+fused+trim"),  # (the options beyond the paper: KV reuse, fused commits)
             ("aligned", "llada2-dynamic"), ("aligned", "llada2-quality"),  # the LLaDA2 editing loop
             ("aligned", "d2f"), ("aligned", "d2f-s2d2"), ("shifted", "d2f-s2d2"),  # the D2F pipeline
             # the baselines' rules without a batch form, and sub-blocks (`VARIANTS`)
             ("shifted", "dynamic-baseline+sub-blocks"), ("aligned", "dynamic-baseline+entropy-bounded"),
             ("aligned", "dynamic-baseline+extras")]
# arms that are a preset with changes: (preset, changes)
VARIANTS = {"dynamic-baseline+sub-blocks": ("dynamic-baseline", {"sub_block_length": 2}),
            "dynamic-baseline+entropy-bounded": ("dynamic-baseline", {"remasking": "entropy_bounded"}),
            "dynamic-baseline+extras": ("dynamic-baseline", {"always_check_high_conf": True})}
MODEL_ARMS = {
    "tiny": ["ar", "dynamic-baseline", "sdar-config-a", "sdar-config-b", "fastdllm-config-a", "fastdllm-config-b",
             "fastdllm-config-c"],
    "tiny-llada2": ["ar", "llada2-dynamic"],
}


def arm_config(arm: str, gen: int) -> Any:
    """The config of a host arm: a preset by name, or a preset with changes (`VARIANTS`)."""
    preset, changes = VARIANTS.get(arm, (arm, {}))
    return s2d2.preset(preset, gen_length=gen, **changes)


def engines(cfg: Any, model: Any) -> list[str]:
    """The engines that decode `cfg` in this tree: the thread engine always; the batch-first one where it exists
    and covers the config."""
    try:
        from s2d2.decoding.lockstep import covers
    except ImportError:
        return ["threads"]
    try:
        covered = covers(cfg, model)
    except TypeError:  # the first batch-first tree: AR only, no model argument
        covered = covers(cfg)  # type: ignore[call-arg]
    return ["threads", "batch-first"] if covered else ["threads"]


def decode(model: Any, prompts: list[Any], cfg: Any, batch: int, engine: str) -> dict[str, Any]:
    """One `generate_batch` on `engine` (seeds 0..n-1), timed in wall and in this process's CPU time (every
    thread's), after a full collection so no earlier garbage is charged to it."""
    kwargs = {} if engine == "threads" and engines(cfg, model) == ["threads"] else {"engine": engine}
    gc.collect()
    t0, c0 = time.perf_counter(), time.process_time()
    results = s2d2.generate_batch(model, prompts, cfg, list(range(len(prompts))), batch_size=batch,
                                  detailed=False, **kwargs)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    summary = results[0].batch.summary()
    return {"wall_s": wall, "cpu_s": cpu, "seq_forwards": summary["sequence_forwards"],
            "forwards": summary["forwards"], "sharing": summary["mean_sharing"],
            "outputs": [r.token_ids for r in results]}


def host_rounds(model: Any, prompts: list[Any], cfg: Any, batch: int, rounds: int, min_cpu: float = 0.0,
                fixed_tokens: int | None = None) -> tuple[list[dict[str, dict[str, Any]]], dict[str, int]]:
    """An untimed warm-up round, then `rounds` timed ones; in each round every engine decodes the same prompts
    and seeds in turn (threads, batch-first, threads, batch-first, ...), so a change in the machine's load hits
    both engines of a round alike. An engine whose warm-up decode took less than `min_cpu` CPU seconds decodes
    that many more times back to back in each round (`repeated`: its count, fixed after the warm-up), so no round's
    figure rests on a tenth of a second of CPU time. Returns each timed round's results by engine, and the counts."""
    if fixed_tokens is not None:  # group the shared forwards as on an accelerator (batch.py fixed_tokens_for)
        model.batch_fixed_tokens = fixed_tokens
    names = engines(cfg, model)
    # warm-up: first-call costs (lazy imports, thread start-up, caches) stay out of the rounds
    warm = {engine: decode(model, prompts, cfg, batch, engine)["cpu_s"] for engine in names}
    times = {e: max(1, min(MAX_REPEATS, math.ceil(min_cpu / max(warm[e], 1e-9)))) for e in names}
    return [{e: repeated(model, prompts, cfg, batch, e, times[e]) for e in names} for _ in range(rounds)], times


def repeated(model: Any, prompts: list[Any], cfg: Any, batch: int, engine: str, times: int) -> dict[str, Any]:
    """`decode` `times` times; wall, CPU and sequence-forwards summed over them (so their ratio stays per
    sequence-forward), everything else the first decode's."""
    runs = [decode(model, prompts, cfg, batch, engine) for _ in range(times)]
    return {**runs[0], **{k: sum(r[k] for r in runs) for k in ("wall_s", "cpu_s", "seq_forwards")}}


def summarize(rounds: list[dict[str, dict[str, Any]]]) -> dict[str, Any]:
    """Per engine, each round's CPU µs per sequence-forward (the process's CPU time, every thread's) and their
    median; with both engines, each round's ratio (threads over batch-first, both of that round) and the median,
    min and max of those ratios. The ratio is the median of the per-round ratios, not a ratio of medians, so its
    spread is that of the very rounds it summarizes. Medians by benchmarks/percentiles.py's rule. `x_best`: each
    engine's least round over the other's (a machine's interference only adds CPU time, so the least round is the
    least disturbed one: on the shared machine this moved less between runs than the median)."""
    us = {engine: [r[engine]["cpu_s"] / r[engine]["seq_forwards"] * 1e6 for r in rounds] for engine in rounds[0]}
    out: dict[str, Any] = {"cpu_us": us, "cpu_us_median": {e: pct(v, 0.5) for e, v in us.items()}}
    if "batch-first" in us:
        ratios = [t / b for t, b in zip(us["threads"], us["batch-first"])]
        out.update(ratios=ratios, x_median=pct(ratios, 0.5), x_min=min(ratios), x_max=max(ratios),
                   x_best=min(us["threads"]) / min(us["batch-first"]),
                   same=min(sum(a == b for a, b in zip(r["threads"]["outputs"], r["batch-first"]["outputs"]))
                            for r in rounds))
    return out


def host_part(batch: int, n: int, gen: int, rounds: int, out: list[dict[str, Any]], min_cpu: float = 0.0,
              fixed_tokens: int | None = None, arms: list[str] | None = None) -> None:
    """Per arm, `rounds` interleaved rounds of both engines (host_rounds), printed as one line: each engine's
    median CPU µs per sequence-forward, its sequences per forward, and the thread engine's time over the
    batch-first engine's (median of the rounds' ratios, then their min-max)."""
    torch.set_num_threads(1)  # the stand-in's forward is trivial; intra-op threads would only add noise
    print(f"host CPU time per sequence-forward, stand-in model (fixed logits), batch {batch}, n {n}, gen {gen}, "
          f"{rounds} rounds after a warm-up round (threads, batch-first, threads, ...), each engine's decodes "
          f"repeated in a round to >= {min_cpu:g} s CPU"
          + (f", a forward's fixed cost {fixed_tokens} query tokens" if fixed_tokens else ""))
    print(f"{'family':<8} {'arm':<33} {'seq-fwd':>8} {'seq/fwd thr':>11} {'seq/fwd bf':>10} {'threads us':>10} "
          f"{'batch-first us':>14} {'x median':>8} {'x min-max':>11} {'x best':>6} {'same':>9} {'reps':>6}")
    for alignment, preset in [a for a in HOST_ARMS if arms is None or a[1] in arms]:
        model, cfg = StandInModel(alignment), arm_config(preset, gen)
        got, times = host_rounds(model, stand_in_prompts(n), cfg, batch, rounds, min_cpu, fixed_tokens)
        s, first = summarize(got), got[0]
        med, seq_forwards = s["cpu_us_median"], first["threads"]["seq_forwards"] // times["threads"]
        bf = first.get("batch-first")
        bf_sharing = f"{bf['sharing']:.1f}" if bf else "-"
        line = (f"{alignment:<8} {preset:<33} {seq_forwards:>8} "
                f"{first['threads']['sharing']:>11.1f} {bf_sharing:>10} {med['threads']:>10.1f} ")
        if bf:
            line += (f"{med['batch-first']:>14.1f} {s['x_median']:>8.2f} {s['x_min']:>5.2f}-{s['x_max']:<5.2f} "
                     f"{s['x_best']:>6.2f} "
                     f"{str(s['same']) + '/' + str(n):>9}")
        else:
            line += f"{'(threads)':>14} {'-':>8} {'-':>11} {'-':>6} {'-':>9}"
        line += f" {'/'.join(str(times[e]) for e in times):>6}"
        print(line, flush=True)
        out.append({"part": "host", "alignment": alignment, "arm": preset, "batch": batch, "n": n, "gen": gen,
                    "rounds": rounds, "fixed_tokens": fixed_tokens, **s,
                    "decodes_per_round": times, "seq_forwards": seq_forwards,
                    "sharing": {e: r["sharing"] for e, r in first.items()},
                    "forwards": {e: r["forwards"] for e, r in first.items()}})


def models_part(batch: int, n: int, gen: int, out: list[dict[str, Any]]) -> None:
    from s2d2.tasks.arithmetic import heldout

    torch.set_num_threads(1)
    prompts = [p.question for p in heldout(n)]
    print(f"bundled models, one thread, n {n} held-out problems, gen {gen}: decodes/s at batch 1 and {batch}")
    print(f"{'model':<12} {'arm':<20} {'engine':<12} {'b1 dec/s':>8} {'bN dec/s':>8} {'x b1':>6} {'cpu x b1':>8} "
          f"{'same':>5} {'floor s':>7} {'ceil x':>6}")
    for name, arms in MODEL_ARMS.items():
        model = s2d2.load_model(name, backend="dynamic", device="cpu", dtype=torch.float32)
        for preset in arms:
            cfg = s2d2.preset(preset, gen_length=gen)
            for engine in engines(cfg, model):
                one = decode(model, prompts, cfg, 1, engine)
                many = decode(model, prompts, cfg, batch, engine)
                x, x_cpu = one["wall_s"] / many["wall_s"], one["cpu_s"] / many["cpu_s"]
                same = sum(a == b for a, b in zip(one["outputs"], many["outputs"]))
                floor = None  # the profiler sees this thread's ops only, and the thread engine runs a lone forward on
                # its sequence's own thread
                if engine == "batch-first":
                    floor = kernel_seconds(lambda: decode(model, prompts, cfg, batch, engine))[0]
                ceil = None if floor is None else ceiling(one["cpu_s"], floor)
                bound = "" if floor is None else f"{floor:>7.3f} {ceil:>6.2f}"
                print(f"{name:<12} {preset:<20} {engine:<12} {n / one['wall_s']:>8.2f} {n / many['wall_s']:>8.2f} "
                      f"{x:>6.2f} {x_cpu:>8.2f} {same:>5} {bound}".rstrip(), flush=True)
                out.append({"part": "models", "model": name, "arm": preset, "engine": engine, "batch": batch,
                            "n": n, "b1_wall_s": one["wall_s"], "bN_wall_s": many["wall_s"], "speedup": x,
                            "b1_cpu_s": one["cpu_s"], "bN_cpu_s": many["cpu_s"], "cpu_speedup": x_cpu,
                            "same_outputs": same, "kernel_floor_s": floor,
                            "ceiling": ceil})


def main(argv: list[str] | None = None) -> None:
    """Parse the options, run the parts asked for, write the rows as JSON if --out names a file."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=["host", "models", "both"], default="both")
    ap.add_argument("--batch", type=int, default=None, help="batch size (default: 128 host, 32 models)")
    ap.add_argument("--n", type=int, default=None, help="prompts per run (default: 256 host, 32 models)")
    ap.add_argument("--gen-length", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=11,
                    help="host part: timed rounds, each decoding with every engine in turn (after one warm-up round)")
    ap.add_argument("--min-cpu", type=float, default=0.5,
                    help="host part: an engine's decodes per round are repeated to about this many CPU seconds "
                         f"(judged from its warm-up decode; at most {MAX_REPEATS})")
    ap.add_argument("--fixed-tokens", type=int, default=None,
                    help="host part: a forward's fixed cost in query tokens for the grouping (default: the CPU's; "
                         "4096 groups as on an accelerator)")
    ap.add_argument("--arms", nargs="+", default=None, metavar="ARM",
                    help="host part: only these arms (by name, as printed; default: all)")
    ap.add_argument("--out", default=None, help="also write the rows to this JSON file")
    args = ap.parse_args(argv)
    unknown = sorted(set(args.arms or ()) - {arm for _, arm in HOST_ARMS})
    if unknown:
        ap.error(f"--arms: unknown {', '.join(unknown)}; one of {', '.join(sorted({a for _, a in HOST_ARMS}))}")
    rows: list[dict[str, Any]] = []
    if args.part in ("host", "both"):
        host_part(args.batch or 128, args.n or 256, args.gen_length, args.rounds, rows, args.min_cpu,
                  args.fixed_tokens, args.arms)
    if args.part in ("models", "both"):
        models_part(args.batch or 32, args.n or 32, args.gen_length, rows)
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
