"""The batch-first engine's own tensor calls, Python calls and host time per sequence-forward, on the stand-in model
(issue 37).

Per arm, one batch decode on the stand-in (benchmarks/stand_in.py: a forward that costs almost nothing) counted under
a `TorchFunctionMode`: torch calls per sequence-forward (functions and tensor methods; the stand-in's own gather,
one per request, included) and, with `--sites`, the lines of the decoder that make the most. Then the least CPU µs
per sequence-forward over `--decodes` decodes (after one untimed; each after a full collection): interference only
adds CPU time, so the least is the least disturbed. Last, one more decode counted by `sys.setprofile`: Python
function calls per sequence-forward (every Python-level call the decode makes, the records' `__init__`s included;
calls into C not). Both counts are exact and the same on every run, so they compare two trees where this machine's
timing spread (10-40 % between runs) cannot.

It runs in any tree that has `generate_batch(..., engine="batch-first")`, so two trees compare side by side by
running it in each, alternately:

    cd /tmp/before && PYTHONPATH=$PWD python /path/to/main/benchmarks/torch_calls.py
    cd /path/to/main && python -m benchmarks.torch_calls
"""
from __future__ import annotations

import argparse
import gc
import sys
import time
from collections import Counter
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

import s2d2
from benchmarks.stand_in import StandInModel, stand_in_prompts

ARMS = ["dynamic-baseline", "sdar-config-b", "fastdllm-config-a", "shifted:fastdllm-config-a"]
# attribute reads that __torch_function__ also sees: not calls into the library
NOT_CALLS = {"__get__", "__len__", "shape", "dtype", "device", "dim", "size", "numel", "is_floating_point"}


class CallCounter(TorchFunctionMode):
    """Counts torch calls, each at the first frame outside torch that made it (file:line)."""

    def __init__(self) -> None:
        super().__init__()
        self.sites: Counter[str] = Counter()

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if getattr(func, "__name__", "") not in NOT_CALLS:
            frame = sys._getframe(1)
            while frame is not None and "/torch/" in frame.f_code.co_filename:
                frame = frame.f_back
            where = "?" if frame is None else f"{frame.f_code.co_filename.rsplit('/', 1)[-1]}:{frame.f_lineno}"
            self.sites[where] += 1
        return func(*args, **(kwargs or {}))


def python_calls_of(run: Any) -> int:
    """How many Python-level function calls `run()` makes (`sys.setprofile`'s "call" events: functions, methods,
    comprehensions and generators resumed; calls into C are "c_call" and not counted)."""
    calls = 0

    def count(frame: Any, event: str, arg: Any) -> None:
        nonlocal calls
        if event == "call":
            calls += 1

    sys.setprofile(count)
    try:
        run()
    finally:
        sys.setprofile(None)
    return calls


def arm_figures(arm: str, batch: int, n: int, gen: int, decodes: int) -> dict[str, Any]:
    """One arm's torch calls per sequence-forward, its top sites and its least CPU µs per sequence-forward. An arm
    is a preset on the position-aligned stand-in, or `shifted:PRESET` on the right-shifted one (Fast-dLLM v2's
    loop: AR seeds, the stop rule, the causal verifier)."""
    alignment, _, preset = arm.rpartition(":")
    model, cfg = StandInModel(alignment or "aligned"), s2d2.preset(preset, gen_length=gen)
    prompts = stand_in_prompts(n)

    def run() -> Any:
        return s2d2.generate_batch(model, prompts, cfg, list(range(n)), batch_size=batch, detailed=False,
                                   engine="batch-first")

    seq_forwards = run()[0].batch.summary()["sequence_forwards"]  # also the untimed first decode
    counter = CallCounter()
    with counter:
        run()
    cpu = []
    for _ in range(decodes):
        gc.collect()
        c0 = time.process_time()
        run()
        cpu.append((time.process_time() - c0) / seq_forwards * 1e6)
    python_calls = python_calls_of(run)  # after the timed decodes: a profile hook never runs beside them
    return {"arm": arm, "seq_forwards": seq_forwards, "calls": sum(counter.sites.values()) / seq_forwards,
            "python_calls": python_calls / seq_forwards,
            "sites": [(where, k / seq_forwards) for where, k in counter.sites.most_common()], "cpu_us": min(cpu)}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arms", nargs="+", default=ARMS)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--n", type=int, default=128, help="prompts per decode")
    ap.add_argument("--gen-length", type=int, default=64)
    ap.add_argument("--decodes", type=int, default=4, help="timed decodes per arm (the least is printed)")
    ap.add_argument("--sites", type=int, default=0, help="also the N lines that make the most calls")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)  # the stand-in's forward is trivial; intra-op threads would only add noise
    print(f"batch-first engine on the stand-in, batch {args.batch}, n {args.n}, gen {args.gen_length}; torch calls "
          f"and Python calls per sequence-forward, least CPU us per sequence-forward of {args.decodes} decodes")
    for arm in args.arms:
        f = arm_figures(arm, args.batch, args.n, args.gen_length, args.decodes)
        print(f"{arm:<26} seq-fwd {f['seq_forwards']:>6}  torch calls {f['calls']:6.2f}  "
              f"python calls {f['python_calls']:6.1f}  cpu us {f['cpu_us']:7.1f}", flush=True)
        for where, per in f["sites"][: args.sites]:
            print(f"    {per:6.2f}  {where}")


if __name__ == "__main__":
    main()
