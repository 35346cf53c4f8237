"""Byte-level BPE tokenizer for the tiny model, trained with `tokenizers`.

Digits are isolated (every digit is one token), byte-level BPE never produces unknown tokens. Special tokens:
`<|endoftext|>` (eos = pad), `<|im_start|>`, `<|im_end|>`, `<|MASK|>` (registered as the tokenizer's
mask_token). ChatML chat template. `save_pretrained` output loads with `AutoTokenizer` offline.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|MASK|>")
EOT, IM_START, IM_END, MASK = SPECIAL_TOKENS

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def build_backend(texts: Iterable[str], vocab_size: int = 2048):
    """Train the raw `tokenizers.Tokenizer` (special tokens get ids 0..3 in SPECIAL_TOKENS order)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(r"\d"), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    return tok


def wrap(backend):
    """Wrap a trained backend as a transformers fast tokenizer with the special tokens and chat template."""
    from ..models.builders import fast_tokenizer

    t = fast_tokenizer(
        backend,
        eos_token=EOT,
        pad_token=EOT,
        bos_token=None,
        unk_token=None,
        mask_token=MASK,
        additional_special_tokens=[IM_START, IM_END],
        clean_up_tokenization_spaces=False,
    )
    t.chat_template = CHAT_TEMPLATE
    t.padding_side = "left"
    return t


def train_tokenizer(texts: Iterable[str], out_dir: str | Path, vocab_size: int = 2048):
    tok = wrap(build_backend(texts, vocab_size))
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    tok.save_pretrained(str(out_dir))
    return tok


def special_ids(tok) -> dict[str, int]:
    return {s: int(tok.convert_tokens_to_ids(s)) for s in SPECIAL_TOKENS}
