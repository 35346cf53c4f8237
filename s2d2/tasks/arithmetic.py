"""Synthetic GSM8K-style arithmetic word problems: a checkable task for the bundled tiny model.

Each problem has 1-3 steps (buy more, give away, bags of equal size, doubling) on small numbers, a solution
with one chain-of-thought sentence per step, and a final ``#### N`` line, exactly like GSM8K. Generation is
deterministic in the seed (``random.Random``). The held-out set comes from its own seed and its questions are
excluded from every training stream, so an accuracy on ``heldout(n)`` is never measured on training questions.

The prompt format is ChatML (the tiny model's chat template)::

    <|im_start|>user\\n{question}<|im_end|>\\n<|im_start|>assistant\\n

and the training target that follows it is ``{solution}<|im_end|>``.
"""
from __future__ import annotations

import random
import re
from dataclasses import dataclass
from functools import lru_cache

HELDOUT_SEED = 20260331
HELDOUT_MAX = 2000  # the fixed held-out pool; heldout(n) takes its first n problems

NAMES = (
    "Anna", "Ben", "Clara", "David", "Emma", "Frank", "Grace", "Henry", "Ivy", "Jack", "Kate", "Leo", "Mia",
    "Noah", "Olivia", "Paul", "Rose", "Sam", "Tom", "Uma", "Victor", "Wendy", "Zoe", "Lucy", "Max",
)
PRONOUN = {n: ("she" if n in {"Anna", "Clara", "Emma", "Grace", "Ivy", "Kate", "Mia", "Olivia", "Rose", "Uma",
                                "Wendy", "Zoe", "Lucy"} else "he") for n in NAMES}
ITEMS = (
    "apples", "books", "coins", "pencils", "stickers", "marbles", "cookies", "stamps", "shells", "cards",
    "eggs", "flowers", "toys", "candles", "ribbons",
)

_ANSWER_RE = re.compile(r"####\s*(-?\d[\d,]*)")
_LAST_INT_RE = re.compile(r"-?\d+")


@dataclass(frozen=True)
class Problem:
    question: str
    solution: str  # chain of thought + final "#### N" line
    answer: int


def _make(rng: random.Random) -> Problem:
    name = rng.choice(NAMES)
    other = rng.choice([n for n in NAMES if n != name])
    item = rng.choice(ITEMS)
    he = PRONOUN[name]
    He = he.capitalize()
    cur = rng.randint(2, 40)
    q = [f"{name} has {cur} {item}."]
    cot: list[str] = []
    n_steps = rng.choice((1, 2, 3))
    for _ in range(n_steps):
        kinds = ["buy", "give", "bags"]
        if cur <= 50:
            kinds.append("double")
        if cur < 4:
            kinds.remove("give")
        kind = rng.choice(kinds)
        if kind == "buy":
            k = rng.randint(2, 30)
            new = cur + k
            q.append(f"{He} buys {k} more.")
            cot.append(f"After buying, {name} has {cur} + {k} = {new} {item}.")
        elif kind == "give":
            k = rng.randint(1, min(cur - 1, 30))
            new = cur - k
            q.append(f"{He} gives {k} to {other}.")
            cot.append(f"After giving, {name} has {cur} - {k} = {new} {item}.")
        elif kind == "bags":
            a = rng.randint(2, 5)
            b = rng.randint(2, 9)
            p = a * b
            new = cur + p
            q.append(f"{He} gets {a} bags with {b} {item} in each bag.")
            cot.append(f"The bags hold {a} * {b} = {p} {item}, so {name} has {cur} + {p} = {new} {item}.")
        else:  # double
            new = cur * 2
            q.append(f"{He} doubles the {item}.")
            cot.append(f"After doubling, {name} has {cur} * 2 = {new} {item}.")
        cur = new
    q.append(f"How many {item} does {name} have now?")
    solution = " ".join(cot) + f"\n#### {cur}"
    return Problem(question=" ".join(q), solution=solution, answer=cur)


def generate(seed: int, n: int) -> list[Problem]:
    """`n` problems from `seed`, no filtering (duplicates possible)."""
    rng = random.Random(seed)
    return [_make(rng) for _ in range(n)]


@lru_cache(maxsize=1)
def _heldout_pool() -> tuple[Problem, ...]:
    rng = random.Random(HELDOUT_SEED)
    seen: set[str] = set()
    out: list[Problem] = []
    while len(out) < HELDOUT_MAX:
        p = _make(rng)
        if p.question not in seen:  # held-out questions are distinct from each other
            seen.add(p.question)
            out.append(p)
    return tuple(out)


@lru_cache(maxsize=1)
def heldout_questions() -> frozenset[str]:
    return frozenset(p.question for p in _heldout_pool())


def heldout(n: int = 200) -> list[Problem]:
    """The fixed held-out set (first `n` of a pool of HELDOUT_MAX distinct problems from HELDOUT_SEED)."""
    if not 0 <= n <= HELDOUT_MAX:
        raise ValueError(f"n: must be in [0, {HELDOUT_MAX}], got {n}")
    return list(_heldout_pool()[:n])


def train_examples(seed: int, n: int) -> list[Problem]:
    """`n` training problems from `seed`; any question of the held-out pool is skipped."""
    if seed == HELDOUT_SEED:
        raise ValueError("seed: the held-out seed cannot be used for training")
    rng = random.Random(seed)
    banned = heldout_questions()
    out: list[Problem] = []
    while len(out) < n:
        p = _make(rng)
        if p.question not in banned:
            out.append(p)
    return out


def prompt_for(problem: Problem | str) -> str:
    """The exact ChatML prompt used in training (equals the tiny tokenizer's chat template with
    add_generation_prompt=True)."""
    q = problem.question if isinstance(problem, Problem) else problem
    return f"<|im_start|>user\n{q}<|im_end|>\n<|im_start|>assistant\n"


def messages_for(problem: Problem | str) -> list[dict[str, str]]:
    q = problem.question if isinstance(problem, Problem) else problem
    return [{"role": "user", "content": q}]


def training_text(problem: Problem) -> str:
    """Prompt + target exactly as the model sees it in training (the target ends with <|im_end|>)."""
    return prompt_for(problem) + problem.solution + "<|im_end|>"


def extract_answer(text: str) -> int | None:
    """The integer after the first ``####`` (commas allowed); None if there is none."""
    if text is None:
        return None
    m = _ANSWER_RE.search(text)
    if not m:
        return None
    try:
        return int(m.group(1).replace(",", ""))
    except ValueError:
        return None


_START_RE = re.compile(r"^[A-Z][a-z]+ has (\d+) \w+\.")
_STEP_RES = (
    (re.compile(r"^(?:He|She) buys (\d+) more\.$"), lambda cur, m: cur + int(m[1])),
    (re.compile(r"^(?:He|She) gives (\d+) to [A-Z][a-z]+\.$"), lambda cur, m: cur - int(m[1])),
    (re.compile(r"^(?:He|She) gets (\d+) bags with (\d+) \w+ in each bag\.$"),
     lambda cur, m: cur + int(m[1]) * int(m[2])),
    (re.compile(r"^(?:He|She) doubles the \w+\.$"), lambda cur, m: cur * 2),
)


def solve(question: str) -> int | None:
    """The exact answer of a question in this generator's grammar (None for any other text), so a viewer can mark
    a recorded answer right or wrong from the prompt alone."""
    m = _START_RE.match(question or "")
    if not m:
        return None
    cur = int(m[1])
    sentences = re.findall(r"[^.?]+[.?]", question[m.end():])
    for sentence in (s.strip() for s in sentences[:-1]):
        for pattern, apply in _STEP_RES:
            hit = pattern.match(sentence)
            if hit:
                cur = apply(cur, hit)
                break
        else:
            return None
    if not sentences or not re.match(r"^How many \w+ does [A-Z][a-z]+ have now\?$", sentences[-1].strip()):
        return None
    return cur


def score(text: str, gold: int | Problem) -> bool:
    """Exact-answer match of the ``#### N`` line (GSM8K strict match)."""
    g = gold.answer if isinstance(gold, Problem) else int(gold)
    return extract_answer(text) == g
