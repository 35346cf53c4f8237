"""The synthetic arithmetic task: determinism, held-out separation, answer extraction and scoring."""
from __future__ import annotations

import re

import pytest

from s2d2.tasks import arithmetic as A


def test_generation_is_deterministic_and_seed_dependent():
    a = A.train_examples(1, 200)
    assert a == A.train_examples(1, 200)
    assert a != A.train_examples(2, 200)
    assert A.heldout(50) == A.heldout(50)
    assert A.heldout(10) == A.heldout(50)[:10]


def test_heldout_questions_never_appear_in_training():
    held = A.heldout_questions()
    assert len(held) == A.HELDOUT_MAX  # distinct questions
    # the raw generator does produce held-out questions from other seeds, so the filter is doing real work
    raw = A.generate(1, 20_000)
    assert any(p.question in held for p in raw)
    for seed in (0, 1):
        train = A.train_examples(seed, 20_000)
        assert not any(p.question in held for p in train)
    with pytest.raises(ValueError):
        A.train_examples(A.HELDOUT_SEED, 5)


def test_solutions_are_correct_arithmetic():
    for p in A.train_examples(3, 500) + A.heldout(200):
        assert p.solution.endswith(f"#### {p.answer}")
        eqs = re.findall(r"(\d+) ([-+*]) (\d+) = (\d+)", p.solution)
        assert 1 <= len(eqs) <= 6
        for a, op, b, c in eqs:
            a, b, c = int(a), int(b), int(c)
            assert {"+": a + b, "-": a - b, "*": a * b}[op] == c
        assert int(eqs[-1][3]) == p.answer
        assert p.answer > 0
        n_steps = p.question.count(".")  # the first sentence states the start
        assert 1 <= n_steps - 1 <= 3


def test_extract_answer_and_score():
    assert A.extract_answer("blah\n#### 42") == 42
    assert A.extract_answer("#### 1,234") == 1234
    assert A.extract_answer("####-5") == -5
    assert A.extract_answer("#### 7 and later #### 8") == 7
    assert A.extract_answer("the answer is 42") is None
    assert A.extract_answer("") is None
    p = A.heldout(1)[0]
    assert A.score(p.solution, p)
    assert A.score(p.solution + "<|im_end|>", p.answer)
    assert not A.score(p.solution.replace(f"#### {p.answer}", f"#### {p.answer + 1}"), p)
    assert not A.score("no final line", p)


def test_prompt_format_matches_training_and_chat_template():
    p = A.heldout(1)[0]
    prompt = A.prompt_for(p)
    assert prompt == f"<|im_start|>user\n{p.question}<|im_end|>\n<|im_start|>assistant\n"
    assert A.training_text(p) == prompt + p.solution + "<|im_end|>"
    from s2d2.tiny.tokenizer import CHAT_TEMPLATE

    import jinja2

    rendered = jinja2.Template(CHAT_TEMPLATE).render(messages=A.messages_for(p), add_generation_prompt=True)
    assert rendered == prompt
