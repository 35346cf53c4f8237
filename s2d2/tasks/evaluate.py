"""Task accuracy and decoding speed of one decode configuration over a list of problems.

    from s2d2.tasks.evaluate import evaluate
    from s2d2.tasks.arithmetic import heldout
    res = evaluate(s2d2.load_model("tiny"), s2d2.preset("sdar-config-a"), heldout(100))

NFE accounting is the decoder's (every forward counts, prefill included); tokens per forward is aggregated over
the whole set (total generated tokens / total forwards), not averaged per problem.
"""
from __future__ import annotations

import time
from typing import Any, Iterator, Sequence

from . import arithmetic as A


def evaluate(model: Any, cfg: Any, problems: Sequence[A.Problem], seed: int = 0, progress: bool = False,
             keep_texts: bool = True, batch_size: int = 1) -> dict[str, Any]:
    """Accuracy (strict `#### N`) and speed of `cfg` on the arithmetic problems; problem i decodes with seed + i
    (with `batch_size` > 1, `batch_size` at a time through s2d2.generate_batch: the same answers). With `progress`,
    a bar on stderr counts finished problems to n/n; `hit_length_limit` counts the answers the length limit cut
    off (`length_note` says so in words)."""
    tally = _Tally()
    prompts = [A.messages_for(p)[0]["content"] for p in problems]
    with _progress(len(prompts), progress) as bar:
        for p, r in zip(problems, _decodes(model, cfg, prompts, [None] * len(prompts), seed, bar, batch_size)):
            tally.add(r, A.score(r.text, p))
    return tally.summary(keep_texts)


def _decodes(model: Any, cfg: Any, prompts: list[Any], chats: list[Any], seed: int, bar: Any,
             batch_size: int) -> Iterator[Any]:
    """The lean decode of prompt i with seed + i, in order: one at a time, or batched. `bar` (a tqdm) counts each
    decode as it finishes, before it is yielded: the last one is counted even if the reader stops there."""
    from ..api import generate
    from ..batched import generate_batch

    if batch_size == 1:
        for i in range(len(prompts)):
            r = generate(model, prompts[i], cfg, seed=seed + i, detailed=False, chat=chats[i])
            bar.update(1)
            yield r
        return
    yield from generate_batch(model, prompts, cfg, [seed + i for i in range(len(prompts))], detailed=False,
                              batch_size=batch_size, chat=chats, on_result=lambda i, r: bar.update(1))


def evaluate_task(model: Any, cfg: Any, task: Any, seed: int = 0, progress: bool = False,
                  keep_texts: bool = True, batch_size: int = 1) -> dict[str, Any]:
    """`evaluate` over any task set (tasks/sets.py): item i decodes with seed + i, scored by the task's scorer. For
    code scorers (pass@1 in the sandbox) each failed problem's reason is listed under "failures"."""
    from .code import check_code
    from .scoring import CODE_SCORERS

    tally = _Tally()
    failures = []
    items = list(task.items)
    with _progress(len(items), progress) as bar:
        decodes = _decodes(model, cfg, [it.prompt for it in items], [it.chat for it in items], seed, bar, batch_size)
        for item, r in zip(items, decodes):
            if task.scorer in CODE_SCORERS:
                run = check_code(r.text, item.gold, task.scorer)
                ok = run.passed
                if not ok:
                    failures.append({"id": item.id, "reason": run.reason})
            else:
                ok = task.score(r.text, item)
            tally.add(r, ok)
    out = {"task": task.name, "scorer": task.scorer, **tally.summary(keep_texts)}
    if task.scorer in CODE_SCORERS:
        out["pass@1"] = out["accuracy"]
        out["failures"] = failures
    return out


def _progress(n: int, progress: bool) -> Any:
    """A tqdm bar over n problems on stderr (a disabled one without `progress`); use it as a context manager, so
    it closes, showing its final count, however the run ends."""
    from tqdm import tqdm

    return tqdm(total=n, desc="eval", unit="problem", mininterval=5, disable=not progress)


def length_note(res: dict[str, Any], gen_length: Any) -> str | None:
    """The line that says how many answers a run's length limit cut off, or None when it cut none."""
    hit = res.get("hit_length_limit") or 0
    if not hit:
        return None
    return f"{hit} of {res['n']} answers hit the length limit (gen_length {gen_length}): raise --gen-length"


class _Tally:
    """Correct answers, forwards, tokens, drafts and acceptance summed over a run of problems."""

    def __init__(self) -> None:
        self.n = self.correct = self.nfe = self.gen = self.drafts = self.accepted = self.edits = self.cut = 0
        self.texts: list[str] = []
        self.t0 = time.perf_counter()

    def add(self, r: Any, correct: bool) -> None:
        m = r.metrics
        self.n += 1
        self.correct += bool(correct)
        self.nfe += m["nfe"]
        self.gen += m["generated_tokens"]
        self.drafts += m.get("num_drafts") or 0
        self.accepted += m.get("num_accepted_tokens") or 0
        self.edits += m.get("edits") or 0
        self.cut += m.get("finish_reason") == "length"
        self.texts.append(r.text)

    def summary(self, keep_texts: bool) -> dict[str, Any]:
        n, nfe, gen, drafts = self.n, self.nfe, self.gen, self.drafts
        out: dict[str, Any] = {
            "n": n,
            "correct": self.correct,
            "accuracy": self.correct / n if n else 0.0,
            "hit_length_limit": self.cut,  # answers that ran to gen_length without a stop token: cut off
            "nfe": nfe,
            "generated_tokens": gen,
            "tokens_per_forward": gen / nfe if nfe else 0.0,
            "nfe_per_token": nfe / gen if gen else None,
            "mean_nfe": nfe / n if n else 0.0,
            "num_drafts": drafts,
            "mean_acceptance_length": (1 + self.accepted / drafts) if drafts else None,
            "edits": self.edits,
            "edits_per_token": self.edits / gen if gen else 0.0,
            "wall_seconds": time.perf_counter() - self.t0,
        }
        if keep_texts:
            out["texts"] = self.texts
        return out


def agreement(texts_a: Sequence[str], texts_b: Sequence[str]) -> float:
    """Fraction of identical outputs (e.g. S2D2 greedy_exact vs AR greedy)."""
    if not texts_a:
        return 0.0
    return sum(a == b for a, b in zip(texts_a, texts_b)) / len(texts_a)
