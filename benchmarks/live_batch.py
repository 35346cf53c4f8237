"""The app's shared batch before and after the batch-first step (issue 37), ratios in one run.

    python -m benchmarks.live_batch                              # N = 1, 4, 8, 16; three presets
    python -m benchmarks.live_batch --visitors 8 16 --presets sdar-config-b --gen-length 64 --threads 1
    python -m benchmarks.live_batch --stand-in --visitors 64 --gen-length 128   # the host's work alone

N visitors press Run with the same preset at once on the bundled model: each visitor's decode goes through the
Run tab's own path (components/run/shared_batch.py `shared_generate`: the prompt prepared in the visitor's
thread, the decode submitted to the model's one LiveBatch), from N threads. The batch holds its first arrival
until all N are in (S2D2_BATCH_WAIT_MS, S2D2_BATCH_MAX = N), so every arm starts the N decodes in one admission.
Arms, back to back over the same prompts and seeds, so machine noise hits them alike:

* `threads` (before): every decode a thread job of the LiveBatch (its batch-1 loop in its own thread, only the
  forwards shared): what the shared batch ran before the move;
* `batch-first` (after): every decode a row of the batch-first step on the batch's own thread.

`--stand-in`: the same N decodes submitted straight to a LiveBatch over benchmarks/stand_in.py's model (a forward
that costs nothing) grouped at an accelerator's fixed cost (one forward per step for every live decode), so the
wall is the batch's own host work: printed as host time per sequence-forward (wall and CPU over the
sequence-forwards the decodes took part in), thread jobs against batch-first rows.

Printed per preset and N: wall per decode (the arm's wall from the first submission to the last result, over N),
before over after in wall and in this process's CPU time (the figure to read on a loaded machine), and each arm's
mean visitor wall (submission to result). Each visitor's output must be the
same in both arms (checked: a mismatch is printed and the exit status is 1). One run each; nothing is asserted
about speed.
"""
from __future__ import annotations

import argparse
import functools
import os
import sys
import threading
import time
from typing import Any

import torch

from components.run import shared_batch
from components.run.knobs import EXAMPLE_PROMPTS
from s2d2 import load_model
from s2d2.config import preset
from s2d2.decoding.live_batch import LiveBatch

MODEL = "tiny"
PRESETS = ["sdar-config-a", "sdar-config-b", "fastdllm-config-a"]
ARMS = {"threads": False, "batch-first": True}


def prompts(n: int) -> list[str]:
    """N visitors' prompts: the Run tab's examples, in turn, each visitor with its own seed."""
    return [EXAMPLE_PROMPTS[i % len(EXAMPLE_PROMPTS)] for i in range(n)]


def run_arm(model: Any, cfg: Any, n: int, batch_first: bool) -> dict[str, Any]:
    """N visitors' shared Runs at once on one arm's engine: the arm's wall and CPU time (this process, every
    thread), each visitor's wall and output."""
    os.environ["S2D2_BATCH_MAX"] = str(max(2, n))
    os.environ["S2D2_BATCH_WAIT_MS"] = "5000" if n > 1 else "0"  # the batch starts once all N are in
    shared_batch.close_all()
    shared_batch.LiveBatch = functools.partial(LiveBatch, batch_first=batch_first)  # type: ignore[misc]
    generate = shared_batch.shared_generate(MODEL)
    walls, outputs = [0.0] * n, [None] * n
    go = threading.Barrier(n + 1)

    def visitor(i: int, prompt: str) -> None:
        go.wait()
        t0 = time.perf_counter()
        result = generate(model, prompt, cfg, seed=i)
        walls[i], outputs[i] = time.perf_counter() - t0, result.token_ids

    threads = [threading.Thread(target=visitor, args=(i, p), daemon=True) for i, p in enumerate(prompts(n))]
    for t in threads:
        t.start()
    go.wait()
    t0, c0 = time.perf_counter(), time.process_time()
    for t in threads:
        t.join()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    shared_batch.close_all()
    return {"wall": wall, "cpu": cpu, "walls": walls, "outputs": outputs}


def host_arm(cfg: Any, n: int, batch_first: bool) -> dict[str, Any]:
    """N decodes of the stand-in model in one LiveBatch (admitted together): wall, CPU, sequence-forwards,
    outputs."""
    from benchmarks.stand_in import StandInModel, stand_in_prompts
    from s2d2.api import prepare
    from s2d2.decoding.decoder import make_check
    from s2d2.decoding.live_jobs import Decode

    model = StandInModel()
    preps = [prepare(model, ids, cfg, None, None) for ids in stand_in_prompts(n)]
    batch = LiveBatch(model, n, wait_s=30.0 if n > 1 else 0.0, fixed_tokens=4096, batch_first=batch_first)
    t0, c0 = time.perf_counter(), time.process_time()
    tickets = [batch.submit(Decode(p, i, lambda: make_check(None, None, None), detailed=False))
               for i, p in enumerate(preps)]
    results = [t.outcome(600) for t in tickets]
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    batch.close()
    return {"wall": wall, "cpu": cpu, "forwards": sum(r.metrics["nfe"] for r in results),
            "outputs": [r.token_ids for r in results]}


def host_table(presets: list[str], visitors: list[int], gen_length: int) -> bool:
    """The stand-in's table (module docstring); whether every output was the same on both engines."""
    same = True
    print("| preset | N | threads: µs per sequence-forward | batch-first | threads / batch-first | CPU ratio |")
    print("|---|---:|---:|---:|---:|---:|")
    for name in presets:
        cfg = preset(name, gen_length=gen_length)
        for n in visitors:
            before, after = host_arm(cfg, n, False), host_arm(cfg, n, True)
            if before["outputs"] != after["outputs"]:
                same = False
                print(f"MISMATCH: {name} at N = {n}: the two arms' outputs differ", file=sys.stderr)
            per = [1e6 * a["wall"] / a["forwards"] for a in (before, after)]
            print(f"| {name} | {n} | {per[0]:.0f} | {per[1]:.0f} | {per[0] / per[1]:.2f}x | "
                  f"{before['cpu'] / after['cpu']:.2f}x |", flush=True)
    return same


def app_table(presets: list[str], visitors: list[int], gen_length: int) -> bool:
    """The app path's table (module docstring); whether every visitor's output was the same on both engines."""
    model = load_model(MODEL, backend="dynamic")
    same = True
    print("| preset | N | before: s/decode | after: s/decode | before / after | CPU before / after | "
          "before: visitor wall | after: visitor wall |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    run_arm(model, preset(presets[0], gen_length=gen_length), 1, True)  # warm-up, not timed
    for name in presets:
        cfg = preset(name, gen_length=gen_length)
        for n in visitors:
            got = {arm: run_arm(model, cfg, n, flag) for arm, flag in ARMS.items()}
            before, after = got["threads"], got["batch-first"]
            if before["outputs"] != after["outputs"]:
                same = False
                print(f"MISMATCH: {name} at N = {n}: the two arms' outputs differ", file=sys.stderr)
            print(f"| {name} | {n} | {before['wall'] / n:.3f} | {after['wall'] / n:.3f} | "
                  f"{before['wall'] / after['wall']:.2f}x | {before['cpu'] / after['cpu']:.2f}x | "
                  f"{sum(before['walls']) / n:.2f} s | {sum(after['walls']) / n:.2f} s |", flush=True)
    return same


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--visitors", type=int, nargs="+", default=[1, 4, 8, 16])
    p.add_argument("--presets", nargs="+", default=PRESETS)
    p.add_argument("--gen-length", type=int, default=64)
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default 1: one CPU core)")
    p.add_argument("--stand-in", action="store_true", help="the host's work alone: a forward that costs nothing")
    args = p.parse_args(argv)
    if not all(1 <= n <= 64 for n in args.visitors):
        p.error("--visitors: each in [1, 64] (S2D2_BATCH_MAX's bound)")
    if not 1 <= args.gen_length <= 512:
        p.error("--gen-length: in [1, 512]")
    saved = ({k: os.environ.get(k) for k in ("S2D2_BATCH_MAX", "S2D2_BATCH_WAIT_MS")}, shared_batch.LiveBatch,
             torch.get_num_threads())
    torch.set_num_threads(args.threads)
    print(f"{'stand-in' if args.stand_in else MODEL}, gen_length {args.gen_length}, torch threads {args.threads}, "
          f"load {os.getloadavg()[0]:.1f}")
    try:
        table = host_table if args.stand_in else app_table
        same = table(args.presets, args.visitors, args.gen_length)
    finally:  # the process as it was (a test calls main in its own)
        shared_batch.close_all()
        for k, v in saved[0].items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        shared_batch.LiveBatch = saved[1]  # type: ignore[misc]
        torch.set_num_threads(saved[2])
    print("outputs equal in both arms for every visitor" if same else "OUTPUTS DIFFER (see above)")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
