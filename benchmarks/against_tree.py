"""Issue 37's host figure as the issue words it: "today's engine against the new one". This tree's engines against
the thread engine of another checkout (the tree the issue was filed against: 72ae723, the commit that added the
stand-in benchmark, in a `git worktree`), on the stand-in model (benchmarks/stand_in.py: a forward that costs almost
nothing), batch 128, one thread.

    git worktree add /tmp/issue37 72ae723
    python -m benchmarks.against_tree --tree /tmp/issue37

Two trees cannot share one process (both are the package `s2d2`), so every measurement is a subprocess: this very
file run as a script with the tree's own code on PYTHONPATH (`--worker`), timing `--decodes` decodes after an untimed
one, each after a full collection, and reporting the least CPU µs per sequence-forward (interference only adds CPU
time) and the decoded tokens. A round runs the other tree's thread engine, this tree's thread engine and this tree's
batch-first engine in turn, so a change in the machine's load hits all three; the ratios printed are the medians of
the rounds' own ratios (with their min-max), each against this tree's batch-first engine. `same` counts the
sequences whose tokens the other tree's decode and this tree's batch-first decode agree on. The stand-in itself is
each tree's own (older trees gather per request), so its small cost is charged as that tree charged it.
"""
from __future__ import annotations

import argparse
import gc
import inspect
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ARMS = ["aligned:ar", "aligned:dynamic-baseline", "aligned:sdar-config-b", "aligned:fastdllm-config-a",
        "shifted:fastdllm-config-a", "aligned:sdar-config-b+reuse+fused+trim", "aligned:llada2-dynamic",
        "aligned:llada2-quality", "aligned:d2f", "aligned:d2f-s2d2", "shifted:d2f-s2d2"]
THIS_TREE = Path(__file__).resolve().parents[1]
SIDES = [("other threads", "other", "threads"), ("threads", "this", "threads"), ("batch-first", "this", "batch-first")]


def worker(alignment: str, preset: str, engine: str, gen: int, batch: int, n: int, decodes: int) -> dict[str, Any]:
    """In whichever tree PYTHONPATH names: the least CPU µs per sequence-forward of `decodes` decodes, and the
    tokens of the last."""
    import torch

    import s2d2
    from benchmarks.stand_in import StandInModel, stand_in_prompts

    torch.set_num_threads(1)  # the stand-in's forward is trivial; intra-op threads would only add noise
    model, cfg = StandInModel(alignment), s2d2.preset(preset, gen_length=gen)
    prompts = stand_in_prompts(n)
    # a tree older than the batch-first engine has no `engine` argument: its generate_batch is the thread engine
    takes_engine = "engine" in inspect.signature(s2d2.generate_batch).parameters
    if not takes_engine and engine != "threads":
        raise SystemExit(f"this tree has no engine {engine!r}: its generate_batch takes no `engine`")
    kwargs = {"engine": engine} if takes_engine else {}

    def one() -> tuple[float, list[list[int]]]:
        gc.collect()
        c0 = time.process_time()
        results = s2d2.generate_batch(model, prompts, cfg, list(range(n)), batch_size=batch, detailed=False,
                                      **kwargs)
        cpu = time.process_time() - c0
        return cpu / results[0].batch.summary()["sequence_forwards"] * 1e6, [r.token_ids for r in results]

    one()  # untimed: first-call costs stay out
    runs = [one() for _ in range(decodes)]
    return {"us": min(us for us, _ in runs), "outputs": runs[-1][1]}


def measure(tree: Path, arm: str, engine: str, args: argparse.Namespace, decodes: int) -> dict[str, Any]:
    """One worker subprocess in `tree` (its code first on PYTHONPATH, run from its root)."""
    alignment, preset = arm.split(":")
    env = dict(os.environ, PYTHONPATH=str(tree), HF_HUB_OFFLINE="1")
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", alignment, preset, engine, str(args.gen_length),
           str(args.batch), str(args.n), str(decodes)]
    done = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{arm} on {engine} in {tree} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def summarize(rounds: list[dict[str, dict[str, Any]]]) -> dict[str, Any]:
    """Per side, each round's µs and their median; per slower side, the median (min-max) of the rounds' own ratios
    over this tree's batch-first engine; `same`: the sequences whose tokens the other tree and batch-first agree on
    (the worst round)."""
    from benchmarks.percentiles import pct

    us = {side: [r[side]["us"] for r in rounds] for side in rounds[0]}
    out: dict[str, Any] = {"us": us, "us_median": {side: pct(v, 0.5) for side, v in us.items()}}
    for side in ("other threads", "threads"):
        ratios = [a / b for a, b in zip(us[side], us["batch-first"])]
        out[f"x {side}"] = {"median": pct(ratios, 0.5), "min": min(ratios), "max": max(ratios)}
    out["same"] = min(sum(a == b for a, b in zip(r["other threads"]["outputs"], r["batch-first"]["outputs"]))
                      for r in rounds)
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", type=Path, help="the other checkout (its thread engine is the baseline)")
    ap.add_argument("--arms", nargs="+", default=ARMS, help="alignment:preset, as `aligned:sdar-config-b`")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--n", type=int, default=128, help="prompts per decode")
    ap.add_argument("--gen-length", type=int, default=64)
    ap.add_argument("--decodes", type=int, default=2, help="timed decodes per subprocess (the least is kept; the "
                                                            "batch-first engine's three times as many)")
    ap.add_argument("--out", type=Path, default=None, help="also write the rows to this JSON file")
    ap.add_argument("--worker", nargs=7, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        alignment, preset, engine, gen, batch, n, decodes = args.worker
        print(json.dumps(worker(alignment, preset, engine, int(gen), int(batch), int(n), int(decodes))))
        return
    if args.tree is None:
        ap.error("--tree is required: the checkout whose thread engine is the baseline")
    trees = {"other": args.tree.resolve(), "this": THIS_TREE}
    print(f"stand-in model, batch {args.batch}, n {args.n}, gen {args.gen_length}, {args.rounds} rounds; CPU µs per "
          f"sequence-forward (median of rounds); other tree: {trees['other']}")
    rows = []
    for arm in args.arms:
        rounds = [{label: measure(trees[tree], arm, engine, args,
                                  args.decodes * (3 if engine == "batch-first" else 1))
                   for label, tree, engine in SIDES} for _ in range(args.rounds)]
        s = summarize(rounds)
        med, xo, xt = s["us_median"], s["x other threads"], s["x threads"]
        print(f"{arm:<40} other threads {med['other threads']:7.1f}  threads {med['threads']:7.1f}  "
              f"batch-first {med['batch-first']:6.1f}  x other {xo['median']:5.2f} ({xo['min']:.2f}-{xo['max']:.2f})"
              f"  x threads {xt['median']:5.2f} ({xt['min']:.2f}-{xt['max']:.2f})  same {s['same']}/{args.n}",
              flush=True)
        rows.append({"arm": arm, **{k: v for k, v in s.items()}})
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
