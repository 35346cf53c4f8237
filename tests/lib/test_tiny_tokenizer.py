"""The tiny model's tokenizer: special ids, digit isolation, round trip, chat template, offline reload."""
from __future__ import annotations

import pytest

from s2d2.tasks import arithmetic
from s2d2.tiny.tokenizer import CHAT_TEMPLATE, SPECIAL_TOKENS, special_ids, train_tokenizer

PROSE = [
    "It is a truth universally acknowledged, that a single man in possession of a good fortune, must be in "
    "want of a wife.",
    "Emma Woodhouse, handsome, clever, and rich, with a comfortable home and happy disposition, seemed to unite "
    "some of the best blessings of existence; and had lived nearly twenty-one years in the world.",
]


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    texts = PROSE * 20 + [arithmetic.training_text(p) for p in arithmetic.train_examples(5, 400)]
    folder = tmp_path_factory.mktemp("tok")
    train_tokenizer(texts, folder, vocab_size=400)
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(folder))  # conftest sets HF_HUB_OFFLINE=1


def test_special_ids(tok):
    ids = special_ids(tok)
    assert ids == {"<|endoftext|>": 0, "<|im_start|>": 1, "<|im_end|>": 2, "<|MASK|>": 3}
    assert tok.mask_token == "<|MASK|>" and tok.mask_token_id == 3
    assert tok.eos_token_id == 0 and tok.pad_token_id == 0
    for s in SPECIAL_TOKENS:  # each special token is one id inside running text
        assert tok.encode(f"a{s}b", add_special_tokens=False).count(tok.convert_tokens_to_ids(s)) == 1


def test_round_trip_and_digits(tok):
    samples = PROSE + [arithmetic.training_text(p) for p in arithmetic.heldout(20)] + ["Ünïcode — “quotes” 12345 tabs\tand\nlines"]
    for s in samples:
        ids = tok.encode(s, add_special_tokens=False)
        assert tok.decode(ids) == s
    ids = tok.encode("x 9876543210 y", add_special_tokens=False)
    pieces = [tok.decode([i]) for i in ids]
    assert [p for p in pieces if any(c.isdigit() for c in p)] == list("9876543210")  # one token per digit


def test_chat_template(tok):
    p = arithmetic.heldout(1)[0]
    text = tok.apply_chat_template(arithmetic.messages_for(p), add_generation_prompt=True, tokenize=False)
    assert text == arithmetic.prompt_for(p)
    assert tok.chat_template == CHAT_TEMPLATE
