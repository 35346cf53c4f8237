"""Lossless S2D2 against greedy AR on held-out questions: identical outputs, and how many forwards each needed.

    python benchmarks/exactness.py                          # bundled tiny model, 40 questions, B = 16 + reuse + fused
    python benchmarks/exactness.py --n 40 --out assets/results/exactness.json
    python benchmarks/exactness.py --block 8 --no-reuse --no-fused

The S2D2 arm is the AR-exactness setting of docs/algorithm.md, 'Acceptance modes and AR-exactness': `greedy_exact`
acceptance, the `always` policy, `cache_ver`, k_s = 1 and no extras, here with the forward-saving options (`kv_reuse`,
`fused_commit`) on. It should emit exactly the tokens of greedy AR (method `ar`, one forward per token); every question
is checked token for token, up to the first stop id or `gen_length` tokens. NFE is exact and deterministic (no timing
here). The result file is what the app's tour quotes in its exactness stop (components/exactness.py); each question's
row says whether it matched.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

COMMAND = "python benchmarks/exactness.py"


def lossless_config(block: int, gen_length: int, reuse: bool = True, fused: bool = True) -> Any:
    """The S2D2 configuration whose output equals greedy AR (docs/algorithm.md, 'Acceptance modes and AR-exactness')."""
    import s2d2

    return s2d2.preset("sdar-config-b", block_length=block, gen_length=gen_length, acceptance="greedy_exact",
                       policy="always", kv_reuse=reuse, fused_commit=fused)


def measure(model: Any, questions: list[str], s2d2_cfg: Any, gen_length: int) -> list[dict[str, Any]]:
    """One row per question: both outputs' lengths, forwards, and whether they are identical token for token."""
    import s2d2

    ar_cfg = s2d2.preset("ar", gen_length=gen_length)
    rows = []
    for i, q in enumerate(questions):
        ar = s2d2.generate(model, q, ar_cfg, seed=i, detailed=False)
        ours = s2d2.generate(model, q, s2d2_cfg, seed=i, detailed=False)
        rows.append({"index": i, "identical": list(ar.token_ids) == list(ours.token_ids),
                     "tokens": len(ar.token_ids), "ar_nfe": ar.metrics["nfe"], "s2d2_nfe": ours.metrics["nfe"]})
    return rows


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    ar, ours = sum(r["ar_nfe"] for r in rows), sum(r["s2d2_nfe"] for r in rows)
    return {"n": len(rows), "identical": sum(r["identical"] for r in rows), "ar_nfe": ar, "s2d2_nfe": ours,
            "forward_ratio": ar / ours if ours else None}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="tiny")
    ap.add_argument("--n", type=int, default=40, help="held-out questions (the first n)")
    ap.add_argument("--block", type=int, default=16)
    ap.add_argument("--gen-length", type=int, default=96)
    ap.add_argument("--no-reuse", action="store_true", help="kv_reuse off")
    ap.add_argument("--no-fused", action="store_true", help="fused_commit off")
    ap.add_argument("--out", type=Path, default=None, help="write the result as JSON (the app reads "
                                                            "assets/results/exactness.json)")
    args = ap.parse_args(argv)
    import s2d2
    from s2d2.tasks.arithmetic import heldout

    cfg = lossless_config(args.block, args.gen_length, not args.no_reuse, not args.no_fused)
    model = s2d2.load_model(args.model)
    t0 = time.perf_counter()
    rows = measure(model, [p.question for p in heldout(args.n)], cfg, args.gen_length)
    total = summary(rows)
    flags = [f"--n {args.n}", f"--block {args.block}", f"--gen-length {args.gen_length}"]
    flags += ["--no-reuse"] if args.no_reuse else []
    flags += ["--no-fused"] if args.no_fused else []
    result = {"meta": {"command": " ".join([COMMAND, f"--model {args.model}", *flags]), "model": args.model,
                       "task": "arithmetic (held-out)", "gen_length": args.gen_length, "block_length": args.block,
                       "kv_reuse": not args.no_reuse, "fused_commit": not args.no_fused,
                       "s2d2": "sdar-config-b, acceptance greedy_exact, policy always",
                       "ar": "ar (one forward per token)", "seconds": round(time.perf_counter() - t0, 1)},
              **total, "questions": rows}
    print(f"{total['identical']}/{total['n']} identical to AR; forwards AR {total['ar_nfe']} vs S2D2 "
          f"{total['s2d2_nfe']}: {total['forward_ratio']:.2f}x fewer ({result['meta']['seconds']} s)")
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {args.out}")
    return 0 if total["identical"] == total["n"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
