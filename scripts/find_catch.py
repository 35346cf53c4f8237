"""Find held-out arithmetic questions where S2D2's verifier catches a token the diffusion baseline gets wrong.

    python -m scripts.find_catch                       # bundled "tiny" model, B = 16, first 3 hits
    python -m scripts.find_catch --n 200 --hits 3 --block 16

For each held-out question i (seed = i, as `python -m s2d2 bench` seeds them) it decodes the question with the
dynamic-threshold baseline at block size B and, when the baseline's `#### N` answer is wrong, with S2D2 at the same
B on the same seed. A *hit* is a question where

* the baseline answers wrong and S2D2 answers right, and
* S2D2 rejected a draft and resampled the first position where the two outputs differ
  (a **strong** hit when the rejected draft is the very token the baseline committed there and the S2D2 run also
  skips verification somewhere, so one trace shows both routing outcomes).

The search is bounded (the first `--n` questions, stops after `--hits` strong hits) and deterministic. Each hit
is printed as one line to paste into scripts/precompute_traces.py (its EXAMPLE_PAIRS table).
"""
from __future__ import annotations

import argparse
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

ROOT = Path(__file__).resolve().parent.parent
os.environ.setdefault("HF_HUB_OFFLINE", "1")

BASELINE = ("dynamic-baseline", {"confidence_threshold": 0.9})  # the sweep's B = 16 baseline cell (88.5 %)
S2D2 = ("sdar-config-a", {"score_threshold": 1.5})  # verify iff K̂ − 1 ≥ 1.5 (the sweep's B = 16 cell: 96.5 %)


@dataclass
class Hit:
    index: int
    question: str
    baseline_answer: Optional[int]
    s2d2_answer: Optional[int]
    gold: int
    position: int  # output index of the first difference
    rejected: str  # S2D2's rejected draft there
    baseline_token: str  # what the baseline committed there
    resampled: str
    step: int  # 1-based S2D2 step of the rejection
    skips: int  # S2D2 steps whose policy skipped verification

    @property
    def strong(self) -> bool:
        """The rejected draft is the baseline's wrong token, and the run also shows a skipped verification."""
        return self.rejected == self.baseline_token and self.skips > 0


def catching_step(trace: Any, position: int) -> Optional[Any]:
    """The S2D2 step whose verifier rejected a draft at `position` (absolute) and resampled it."""
    for s in trace.steps:
        v = s.verification
        if v is None or v.first_reject is None or v.resampled is None:
            continue
        if v.positions[v.first_reject].position == position:
            return s
    return None


def check(index: int, problem: Any, model: Any, block: int, gen_length: int) -> Optional[Hit]:
    """A hit for held-out question `index`, or None."""
    import s2d2
    from s2d2.compare import first_difference
    from s2d2.tasks.arithmetic import extract_answer

    base_cfg = s2d2.preset(BASELINE[0], block_length=block, gen_length=gen_length, **BASELINE[1])
    base = s2d2.generate(model, problem.question, base_cfg, seed=index)
    if extract_answer(base.text) == problem.answer:
        return None
    s2d2_cfg = s2d2.preset(S2D2[0], block_length=block, gen_length=gen_length, **S2D2[1])
    ours = s2d2.generate(model, problem.question, s2d2_cfg, seed=index)
    if extract_answer(ours.text) != problem.answer:
        return None
    i = first_difference(base.token_ids, ours.token_ids)
    if i is None or i >= min(len(base.token_ids), len(ours.token_ids)):  # a catch needs a token both runs wrote
        return None
    prompt_len = len(ours.trace.header.prompt_ids)
    step = catching_step(ours.trace, prompt_len + i)
    if step is None:
        return None
    v = step.verification
    return Hit(index, problem.question, extract_answer(base.text), extract_answer(ours.text), problem.answer, i,
               v.positions[v.first_reject].draft_text, base.trace.footer.output_tokens[i], v.resampled_text,
               step.index + 1, sum(1 for s in ours.trace.steps if s.decision and not s.decision.verify))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="tiny")
    ap.add_argument("--n", type=int, default=200, help="search the first N held-out questions")
    ap.add_argument("--hits", type=int, default=3, help="stop after this many strong hits")
    ap.add_argument("--block", type=int, default=16)
    ap.add_argument("--gen-length", type=int, default=96)
    args = ap.parse_args(argv)
    import torch

    import s2d2
    from s2d2.tasks.arithmetic import heldout

    torch.set_num_threads(1)
    model = s2d2.load_model(args.model)
    t0 = time.perf_counter()
    strong = 0
    for index, problem in enumerate(heldout(args.n)):
        hit = check(index, problem, model, args.block, args.gen_length)
        if hit is None:
            continue
        strong += hit.strong
        print(f"{'STRONG' if hit.strong else 'weak  '} held-out #{hit.index} (seed {hit.index}): baseline "
              f"{hit.baseline_answer} ✗, S2D2 {hit.s2d2_answer} ✓ (gold {hit.gold}); output token {hit.position}: "
              f"baseline {hit.baseline_token!r}, S2D2 rejected {hit.rejected!r} at step {hit.step} and resampled "
              f"{hit.resampled!r}; {hit.skips} skipped verification(s)\n    {hit.question}", flush=True)
        if strong >= args.hits:
            break
    print(f"searched up to held-out #{index} in {time.perf_counter() - t0:.0f} s; {strong} strong hit(s)")
    return 0 if strong else 1


if __name__ == "__main__":
    raise SystemExit(main())
