"""`python -m benchmarks.shared_agreement`: does a Run decoded in the shared batch give the lone Run's trace?

Issue 25: --visitors Runs (the default preset, each its own question and seed) are queued behind a held shared batch
(components/run/shared_batch.py) and released together, so they decode in one batch from their first forward, in
this process, through the Run tab's own `shared_generate`. Each visitor's trace is then compared with the lone
`s2d2.generate` of its question and seed, wall times and the creation stamp left out:

* `exact`: the two traces are equal in every field, floats bit for bit;
* `discrete`: every int, string and bool is equal (tokens, NFE, every decision), floats left out;
* `max |d|`: the largest difference of a float field (scores, probabilities), and where it is.

In float32 a shared forward sums in another order than a lone one, so scores may differ in their last bits and a
near-tie may flip (the decode after it then differs: `discrete` fails); in float64 the tests hold every trace equal
to 1e-9 (tests/app/test_shared_batch.py). Ends with one line
`shared float32: E/N traces exact, D/N discrete-equal (tokens, NFE, decisions), max |d| = X`. Nothing is asserted.

    python -m benchmarks.shared_agreement                       # tiny, float32, 8 visitors, 64 tokens
    python -m benchmarks.shared_agreement --visitors 16 --dtype float64
"""
from __future__ import annotations

import argparse
import math
import threading
from typing import Any, Optional

VOLATILE = ("wall_s", "forward_wall_s", "created")
WAIT_S = 600.0  # a bound on waiting for one event (a broken engine ends the run instead of hanging it)


def plain(data: Any) -> Any:
    """A trace dict without wall times and the creation stamp."""
    if isinstance(data, dict):
        return {k: plain(v) for k, v in data.items() if k not in VOLATILE}
    if isinstance(data, list):
        return [plain(v) for v in data]
    return data


def compare(a: Any, b: Any, path: str = "trace") -> tuple[Optional[str], float, str]:
    """(first discrete difference or None, largest float difference, where it is) of two plain traces."""
    if isinstance(a, float) and isinstance(b, float):
        same = a == b or (math.isnan(a) and math.isnan(b))
        return None, 0.0 if same else (math.inf if math.isnan(a) or math.isnan(b) else abs(a - b)), path
    if type(a) is not type(b):
        return f"{path}: {a!r:.60} != {b!r:.60}", 0.0, ""
    if isinstance(a, (dict, list)):
        if isinstance(a, dict):
            keys = sorted(set(a) | set(b))
            pairs = [(a.get(k, "<missing>"), b.get(k, "<missing>"), f"{path}.{k}") for k in keys]
        else:
            if len(a) != len(b):
                return f"{path}: length {len(a)} != {len(b)}", 0.0, ""
            pairs = [(x, y, f"{path}[{i}]") for i, (x, y) in enumerate(zip(a, b))]
        first, worst, where = None, 0.0, ""
        for x, y, p in pairs:
            miss, d, at = compare(x, y, p)
            first = first or miss
            if d > worst:
                worst, where = d, at
        return first, worst, where
    return (None if a == b else f"{path}: {a!r:.60} != {b!r:.60}"), 0.0, ""


def shared_runs(model: Any, name: str, prompts: list[str], cfg: Any) -> list[Any]:
    """Each prompt's result (seed = its index + 1), all decoded in one shared batch from their first forward."""
    from components.run import shared_batch

    release, holding = threading.Event(), threading.Event()
    batch = shared_batch.batch_for(name, model)
    batch.submit(lambda m: (holding.set(), release.wait(WAIT_S))[1])  # holds the batch: the Runs queue behind it
    assert holding.wait(WAIT_S), "the shared batch did not start"
    results: list[Any] = [None] * len(prompts)
    waiting = [threading.Event() for _ in prompts]

    def visitor(i: int) -> None:
        def on_block(steps: list[Any], together: Optional[int] = None, queued: Optional[int] = None) -> None:
            if queued:
                waiting[i].set()

        try:
            results[i] = shared_batch.shared_generate(name)(model, prompts[i], cfg, seed=i + 1, on_block=on_block)
        except Exception as exc:  # reported, never hidden
            results[i] = exc

    threads = [threading.Thread(target=visitor, args=(i,), daemon=True) for i in range(len(prompts))]
    for th in threads:
        th.start()
    for ev in waiting:
        assert ev.wait(WAIT_S), "a visitor never reached the shared batch's queue"
    release.set()
    for th in threads:
        th.join(WAIT_S)
    shared_batch.close_all()
    return results


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="tiny")
    ap.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    ap.add_argument("--visitors", type=int, default=8, help="Runs in the shared batch (2-64)")
    ap.add_argument("--gen-length", type=int, default=64)
    args = ap.parse_args(argv)
    if not 2 <= args.visitors <= 64 or not 4 <= args.gen_length <= 512:
        ap.error("--visitors must be in [2, 64] and --gen-length in [4, 512]")
    import os

    os.environ["S2D2_BATCH_MAX"] = str(args.visitors + 1)  # the holder and every visitor at once
    import torch

    import s2d2
    from benchmarks.classroom import questions
    from components.run.knobs import DEFAULT_PRESET
    from s2d2.config import preset

    torch.set_num_threads(1)
    model = s2d2.load_model(args.model, dtype=getattr(torch, args.dtype), backend="dynamic")
    cfg = preset(DEFAULT_PRESET).replace(gen_length=args.gen_length)
    prompts = questions(args.visitors)
    shared = shared_runs(model, f"{args.model}-{args.dtype}-agreement", prompts, cfg)
    exact = discrete = 0
    worst = 0.0
    print(f"{args.visitors} Runs in one shared batch vs alone: {args.model} {args.dtype}, {DEFAULT_PRESET}, "
          f"{args.gen_length} tokens", flush=True)
    for i, (prompt, got) in enumerate(zip(prompts, shared)):
        alone = s2d2.generate(model, prompt, cfg, seed=i + 1)
        if isinstance(got, Exception):
            print(f"visitor {i + 1:2d}: failed: {type(got).__name__}: {got}")
            continue
        a, b = plain(got.trace.to_dict()), plain(alone.trace.to_dict())
        miss, d, where = compare(a, b)
        exact += a == b
        discrete += miss is None
        worst = max(worst, d)
        print(f"visitor {i + 1:2d}: exact {'yes' if a == b else 'no ':3s}  discrete {'yes' if miss is None else 'no '}"
              f"  nfe {got.metrics['nfe']}/{alone.metrics['nfe']}  same tokens {got.token_ids == alone.token_ids}"
              f"  max |d| {d:.3g}" + (f" at {where}" if d else "") + (f"  first difference: {miss}" if miss else ""),
              flush=True)
    n = len(prompts)
    print(f"shared {args.dtype}: {exact}/{n} traces exact, {discrete}/{n} discrete-equal (tokens, NFE, decisions), "
          f"max |d| = {worst:.3g}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
