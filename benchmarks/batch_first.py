"""The batch engine's own host work (issue 37), ratios in one run.

    python -m benchmarks.batch_first                         # both parts
    python -m benchmarks.batch_first --part host --batch 128 --n 128
    python -m benchmarks.batch_first --part models --n 32 --gen-length 64

Part `host`: `generate_batch` on a stand-in model whose forward returns fixed logits at (almost) no cost
(benchmarks/stand_in.py), so the wall is the engine's host work; printed per arm and engine as host time per
sequence-forward (wall / the sequence-forwards the ledger served) at the given batch, and the thread engine's time
over the batch-first engine's. Engines: `threads` (every sequence runs the batch-1 loop on its own thread; only the
forwards are shared) and `batch-first` (s2d2/decoding/lockstep.py: one step for every live sequence; only the
loops it covers, see `covers`; the other arms are measured on threads alone). `--fixed-tokens 4096` has the
batch-first engine group its shared forwards as on an accelerator (one forward per step carrying every live row,
s2d2/decoding/batch.py `fixed_tokens_for`; the thread engine keeps its own grouping). Part `models`: the bundled
models on
one CPU thread, decodes/s at batch 1 and at the batch given, per preset and engine (`x b1`: batch N over batch 1
of the same engine, in wall time; `cpu x b1` in this process's CPU time, the figure to read on a loaded machine).
Engines and batch sizes of an arm run back to back over the same prompts and seeds, so machine noise hits them
alike. Nothing is asserted.
"""
from __future__ import annotations

import argparse
import gc
import json
import time
from pathlib import Path
from typing import Any

import torch

import s2d2
from benchmarks.stand_in import StandInModel, stand_in_prompts

HOST_ARMS = [("aligned", "ar"), ("aligned", "dynamic-baseline"), ("aligned", "sdar-config-b"),
             ("aligned", "fastdllm-config-a"), ("shifted", "fastdllm-config-a")]
MODEL_ARMS = {
    "tiny": ["ar", "dynamic-baseline", "sdar-config-a", "sdar-config-b", "fastdllm-config-a", "fastdllm-config-b",
             "fastdllm-config-c"],
    "tiny-llada2": ["ar", "llada2-dynamic"],
}


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


def decode(model: Any, prompts: list[Any], cfg: Any, batch: int, engine: str, gc_paused: bool = False) -> dict[str, Any]:
    kwargs = {} if engine == "threads" and engines(cfg, model) == ["threads"] else {"engine": engine}
    gc.collect()
    if gc_paused:
        gc.disable()
    try:
        t0, c0 = time.perf_counter(), time.process_time()
        results = s2d2.generate_batch(model, prompts, cfg, list(range(len(prompts))), batch_size=batch,
                                      detailed=False, **kwargs)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    finally:
        gc.enable()
    summary = results[0].batch.summary()
    return {"wall_s": wall, "cpu_s": cpu, "seq_forwards": summary["sequence_forwards"],
            "forwards": summary["forwards"], "sharing": summary["mean_sharing"],
            "outputs": [r.token_ids for r in results]}


def host_part(batch: int, n: int, gen: int, repeats: int, out: list[dict[str, Any]],
              fixed_tokens: int | None = None) -> None:
    """Per arm and engine, the best of `repeats` runs (engines interleaved), as wall and as this process's CPU
    time per sequence-forward (every thread's: the figure that holds on a shared machine), then the CPU time with
    Python's cyclic garbage collector paused (`gc off`: the engine's own work; with it on, full collections over a
    batch's growing records add a cost that grows with the heap). `x`: the thread engine's time over this one's."""
    torch.set_num_threads(1)  # the stand-in's forward is trivial; intra-op threads would only add noise
    print(f"host time per sequence-forward, stand-in model (fixed logits), batch {batch}, n {n}, gen {gen}, "
          f"best of {repeats}" + (f", a forward's fixed cost {fixed_tokens} query tokens" if fixed_tokens else ""))
    print(f"{'family':<8} {'arm':<20} {'engine':<12} {'seq-fwd':>8} {'fwd':>6} {'seq/fwd':>7} {'wall us':>8} "
          f"{'cpu us':>8} {'x':>6} {'gc off us':>9} {'x':>6} {'same':>5}")
    for alignment, preset in HOST_ARMS:
        model = StandInModel(alignment)
        if fixed_tokens is not None:  # group the shared forwards as on an accelerator (batch.py fixed_tokens_for)
            model.batch_fixed_tokens = fixed_tokens  # type: ignore[attr-defined]
        prompts = stand_in_prompts(n)
        cfg = s2d2.preset(preset, gen_length=gen)
        best: dict[tuple[str, bool], dict[str, Any]] = {}
        for _ in range(repeats):
            for paused in (False, True):
                for engine in engines(cfg, model):
                    r = decode(model, prompts, cfg, batch, engine, paused)
                    if (engine, paused) not in best or r["cpu_s"] < best[engine, paused]["cpu_s"]:
                        best[engine, paused] = r
        per = {key: {k: r[k] / r["seq_forwards"] * 1e6 for k in ("wall_s", "cpu_s")} for key, r in best.items()}
        for engine in engines(cfg, model):
            r, on, off = best[engine, False], per[engine, False], per[engine, True]
            x_on = per["threads", False]["cpu_s"] / on["cpu_s"]
            x_off = per["threads", True]["cpu_s"] / off["cpu_s"]
            same = sum(a == b for a, b in zip(r["outputs"], best["threads", False]["outputs"]))
            print(f"{alignment:<8} {preset:<20} {engine:<12} {r['seq_forwards']:>8} {r['forwards']:>6} "
                  f"{r['sharing']:>7.1f} {on['wall_s']:>8.1f} {on['cpu_s']:>8.1f} {x_on:>6.2f} "
                  f"{off['cpu_s']:>9.1f} {x_off:>6.2f} {same:>5}", flush=True)
            out.append({"part": "host", "alignment": alignment, "arm": preset, "engine": engine, "batch": batch,
                        "n": n, "wall_us_per_seq_forward": on["wall_s"], "cpu_us_per_seq_forward": on["cpu_s"],
                        "x_threads": x_on, "cpu_us_gc_paused": off["cpu_s"], "x_threads_gc_paused": x_off,
                        "same_outputs": same, **{k: v for k, v in r.items() if k != "outputs"}})


def models_part(batch: int, n: int, gen: int, out: list[dict[str, Any]]) -> None:
    from s2d2.tasks.arithmetic import heldout

    torch.set_num_threads(1)
    prompts = [p.question for p in heldout(n)]
    print(f"bundled models, one thread, n {n} held-out problems, gen {gen}: decodes/s at batch 1 and {batch}")
    print(f"{'model':<12} {'arm':<20} {'engine':<12} {'b1 dec/s':>8} {'bN dec/s':>8} {'x b1':>6} {'cpu x b1':>8} "
          f"{'same':>5}")
    for name, arms in MODEL_ARMS.items():
        model = s2d2.load_model(name, backend="dynamic", device="cpu", dtype=torch.float32)
        for preset in arms:
            cfg = s2d2.preset(preset, gen_length=gen)
            for engine in engines(cfg, model):
                one = decode(model, prompts, cfg, 1, engine)
                many = decode(model, prompts, cfg, batch, engine)
                x, x_cpu = one["wall_s"] / many["wall_s"], one["cpu_s"] / many["cpu_s"]
                same = sum(a == b for a, b in zip(one["outputs"], many["outputs"]))
                print(f"{name:<12} {preset:<20} {engine:<12} {n / one['wall_s']:>8.2f} {n / many['wall_s']:>8.2f} "
                      f"{x:>6.2f} {x_cpu:>8.2f} {same:>5}", flush=True)
                out.append({"part": "models", "model": name, "arm": preset, "engine": engine, "batch": batch,
                            "n": n, "b1_wall_s": one["wall_s"], "bN_wall_s": many["wall_s"], "speedup": x,
                            "b1_cpu_s": one["cpu_s"], "bN_cpu_s": many["cpu_s"], "cpu_speedup": x_cpu,
                            "same_outputs": same})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=["host", "models", "both"], default="both")
    ap.add_argument("--batch", type=int, default=None, help="batch size (default: 128 host, 32 models)")
    ap.add_argument("--n", type=int, default=None, help="prompts per run (default: 256 host, 32 models)")
    ap.add_argument("--gen-length", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3, help="host part: runs per engine, the best kept")
    ap.add_argument("--fixed-tokens", type=int, default=None,
                    help="host part: a forward's fixed cost in query tokens for the grouping (default: the CPU's; "
                         "4096 groups as on an accelerator)")
    ap.add_argument("--out", default=None, help="also write the rows to this JSON file")
    args = ap.parse_args()
    rows: list[dict[str, Any]] = []
    if args.part in ("host", "both"):
        host_part(args.batch or 128, args.n or 256, args.gen_length, args.repeats, rows, args.fixed_tokens)
    if args.part in ("models", "both"):
        models_part(args.batch or 32, args.n or 32, args.gen_length, rows)
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
