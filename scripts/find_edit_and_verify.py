"""Find held-out questions where the bundled LLaDA2 model both edits (self-correction) and verifies in one run.

    python -m scripts.find_edit_and_verify                  # tiny-llada2, llada2-quality, first 40 questions
    python -m scripts.find_edit_and_verify --n 40 --thresholds 2 4 6 8 12 --blocks 32 16

S2D2 on this model rarely edits: once verification has made a block AR-consistent there is little left to fix. A
high score threshold lets some steps skip verification (threshold picks, which can be wrong); a later step may then
edit one of them. A *hit* is a run (question i, seed i, `llada2-quality` with `max_post_steps` 4 and the given
score threshold and block size) that edits at least once, verifies at least once, and answers right. A hit is
**strong** when an edit lands in a block that was also verified (the two mechanisms meet in one block).

The search is bounded (`--n` questions × thresholds × blocks) and deterministic; each hit is printed as one line.
scripts/precompute_traces.py records the shipped one (EDIT_AND_VERIFY).
"""
from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

ROOT = Path(__file__).resolve().parent.parent
os.environ.setdefault("HF_HUB_OFFLINE", "1")


@dataclass
class Hit:
    index: int
    threshold: float
    block: int
    edits: list[tuple[int, str, str]]  # (step index, old text, new text)
    verify_steps: int
    rejections: int
    strong: bool


def check(index: int, problem: Any, model: Any, threshold: float, block: int, gen_length: int) -> Optional[Hit]:
    """A hit for held-out question `index` under one (threshold, block) setting, or None."""
    import s2d2
    from s2d2.tasks.arithmetic import extract_answer

    cfg = s2d2.preset("llada2-quality", gen_length=gen_length, max_post_steps=4, score_threshold=threshold,
                      block_length=block)
    res = s2d2.generate(model, problem.question, cfg, seed=index)
    steps = res.trace.steps
    edits = [(s.index, e.old_text, e.new_text) for s in steps for e in s.edits]
    verified = [s for s in steps if s.verification is not None]
    if not edits or not verified or extract_answer(res.text) != problem.answer:
        return None
    blocks = {s.block for s in verified}
    rejections = sum(s.verification.first_reject is not None for s in verified)  # type: ignore[union-attr]
    strong = any(s.block in blocks for s in steps if s.edits)
    return Hit(index, threshold, block, edits, len(verified), rejections, strong)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="tiny-llada2")
    ap.add_argument("--n", type=int, default=40)
    ap.add_argument("--thresholds", type=float, nargs="+", default=[2.0, 4.0, 6.0, 8.0, 12.0])
    ap.add_argument("--blocks", type=int, nargs="+", default=[32, 16])
    ap.add_argument("--gen-length", type=int, default=64)
    args = ap.parse_args(argv)
    import s2d2
    from s2d2.tasks.arithmetic import heldout

    model = s2d2.load_model(args.model)
    hits = 0
    for i, problem in enumerate(heldout(args.n)):
        for threshold in args.thresholds:
            for block in args.blocks:
                hit = check(i, problem, model, threshold, block, args.gen_length)
                if hit is not None:
                    hits += 1
                    print(f"{'STRONG ' if hit.strong else ''}question {i} (seed {i}), score_threshold {threshold:g}, "
                          f"B = {block}: edits {hit.edits}, {hit.verify_steps} verify steps, "
                          f"{hit.rejections} with a rejection", flush=True)
    print(f"{hits} hit(s)")
    return 0 if hits else 1


if __name__ == "__main__":
    raise SystemExit(main())
