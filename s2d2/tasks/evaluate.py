"""Task accuracy and decoding speed of one decode configuration over a list of problems.

    from s2d2.tasks.evaluate import evaluate
    from s2d2.tasks.arithmetic import heldout
    res = evaluate(s2d2.load_model("tiny"), s2d2.preset("sdar-config-a"), heldout(100))

NFE accounting is the decoder's (every forward counts, prefill included); tokens per forward is aggregated over
the whole set (total generated tokens / total forwards), not averaged per problem.
"""
from __future__ import annotations

import time
from typing import Any, Sequence

from . import arithmetic as A


def evaluate(model: Any, cfg: Any, problems: Sequence[A.Problem], seed: int = 0, progress: bool = False,
             keep_texts: bool = True) -> dict[str, Any]:
    from ..api import generate

    n = len(problems)
    correct = 0
    nfe = gen = 0
    drafts = accepted = edits = 0
    mal = []
    texts: list[str] = []
    t0 = time.perf_counter()
    it = problems
    if progress:
        from tqdm import tqdm

        it = tqdm(problems, desc="eval", unit="problem", mininterval=5)
    for i, p in enumerate(it):
        r = generate(model, A.messages_for(p)[0]["content"], cfg, seed=seed + i, detailed=False)
        m = r.metrics
        correct += A.score(r.text, p)
        nfe += m["nfe"]
        gen += m["generated_tokens"]
        drafts += m.get("num_drafts") or 0
        accepted += m.get("num_accepted_tokens") or 0
        edits += m.get("edits") or 0
        if m.get("mean_acceptance_length") is not None:
            mal.append(m["mean_acceptance_length"])
        texts.append(r.text)
    wall = time.perf_counter() - t0
    out: dict[str, Any] = {
        "n": n,
        "correct": correct,
        "accuracy": correct / n if n else 0.0,
        "nfe": nfe,
        "generated_tokens": gen,
        "tokens_per_forward": gen / nfe if nfe else 0.0,
        "nfe_per_token": nfe / gen if gen else None,
        "mean_nfe": nfe / n if n else 0.0,
        "num_drafts": drafts,
        "mean_acceptance_length": (1 + accepted / drafts) if drafts else None,
        "edits": edits,
        "edits_per_token": edits / gen if gen else 0.0,
        "wall_seconds": wall,
    }
    if keep_texts:
        out["texts"] = texts
    return out


def agreement(texts_a: Sequence[str], texts_b: Sequence[str]) -> float:
    """Fraction of identical outputs (e.g. S2D2 greedy_exact vs AR greedy)."""
    if not texts_a:
        return 0.0
    return sum(a == b for a, b in zip(texts_a, texts_b)) / len(texts_a)
