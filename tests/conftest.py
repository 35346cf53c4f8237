"""Shared test builders: tiny random Qwen3 / Qwen2 models (docs/model-families.md, 'Tiny models for offline tests'),
offline only.

Import the builders directly (`from conftest import tiny_qwen3`) or use the fixtures of the same name.
"""
from __future__ import annotations

import os

# Before transformers / huggingface_hub are imported anywhere: tests never touch the network.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("S2D2_MAX_LOADED_MODELS", "8")  # tests register several small models side by side

import pytest
import torch
from hypothesis import settings

# No per-example deadline: CI and shared machines are noisy, and speed is measured in benchmarks/, not tests.
settings.register_profile("s2d2", deadline=None)
settings.load_profile("s2d2")

# Tiny models: one intra-op thread is faster than two and keeps parallel jobs from starving each other.
torch.set_num_threads(1)

VOCAB = 300
MASK_ID = VOCAB - 1  # 299
STOP_IDS = (297, 298)
TINY_SIZES = dict(
    vocab_size=VOCAB,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,  # GQA
    tie_word_embeddings=True,
    max_position_embeddings=512,
)


def _seeded(cls, config, seed: int, dtype: torch.dtype):
    torch.manual_seed(seed)
    return cls(config).to(dtype).eval()


def tiny_qwen3_model(seed: int = 0, dtype: torch.dtype = torch.float64, attn: str = "sdpa"):
    """The raw `Qwen3ForCausalLM` (seeded random weights)."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    config = Qwen3Config(**TINY_SIZES, head_dim=16, attn_implementation=attn)
    return _seeded(Qwen3ForCausalLM, config, seed, dtype)


def tiny_qwen2_model(seed: int = 0, dtype: torch.dtype = torch.float64, attn: str = "sdpa"):
    """The raw `Qwen2ForCausalLM` (seeded random weights; head_dim = 64 / 4 = 16)."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(**TINY_SIZES, attn_implementation=attn)
    return _seeded(Qwen2ForCausalLM, config, seed, dtype)


def tiny_qwen3_moe_model(seed: int = 0, dtype: torch.dtype = torch.float32, attn: str = "sdpa"):
    """The raw `Qwen3MoeForCausalLM`: 4 experts, top-2. float32 by default: the packed-experts kernel
    (grouped_mm) rejects float64."""
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

    config = Qwen3MoeConfig(
        **TINY_SIZES, head_dim=16, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
        attn_implementation=attn,
    )
    return _seeded(Qwen3MoeForCausalLM, config, seed, dtype)


def tiny_qwen3(seed: int = 0, dtype: torch.dtype = torch.float64, attn: str = "sdpa", block_size: int = 4):
    """A tiny position-aligned (SDAR-like) `HFModel`: mask 299, stops (297, 298), no tokenizer."""
    from s2d2.models.loading import from_transformers

    return from_transformers(
        tiny_qwen3_model(seed, dtype, attn), mask_token_id=MASK_ID, stop_token_ids=STOP_IDS,
        logits="aligned", block_size=block_size, name="tiny-qwen3",
    )


def tiny_qwen2(seed: int = 0, dtype: torch.dtype = torch.float64, attn: str = "sdpa", block_size: int = 32):
    """A tiny right-shifted (Fast-dLLM-like) `HFModel`: mask 299, stops (297, 298), no tokenizer."""
    from s2d2.models.loading import from_transformers

    return from_transformers(
        tiny_qwen2_model(seed, dtype, attn), mask_token_id=MASK_ID, stop_token_ids=STOP_IDS,
        logits="shifted", block_size=block_size, name="tiny-qwen2",
    )


def tiny_tokenizer():
    """A `PreTrainedTokenizerFast` over exactly VOCAB whitespace-split words: t0..t295, <unk>,
    <|im_end|> (297), <|endoftext|> (298), <|MASK|> (299, the mask token)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {f"t{i}": i for i in range(VOCAB - 4)}
    vocab.update({"<unk>": VOCAB - 4, "<|im_end|>": 297, "<|endoftext|>": 298, "<|MASK|>": MASK_ID})
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, unk_token="<unk>", eos_token="<|im_end|>", mask_token="<|MASK|>"
    )


@pytest.fixture(name="tiny_qwen3")
def tiny_qwen3_fixture():
    """Factory fixture: `tiny_qwen3(seed=0, dtype=torch.float64, attn="sdpa")` -> HFModel."""
    return tiny_qwen3


@pytest.fixture(name="tiny_qwen2")
def tiny_qwen2_fixture():
    """Factory fixture: `tiny_qwen2(seed=0, dtype=torch.float64, attn="sdpa")` -> HFModel."""
    return tiny_qwen2


class StopAt:
    """The model, except that forward number `n` (from 0) raises StopDecoding, as the app's per-forward stop check
    does when Stop is pressed."""

    def __init__(self, model, n):
        self._model, self.n, self.calls = model, n, 0

    def __getattr__(self, name):
        return getattr(self._model, name)

    def forward(self, *args, **kwargs):
        from s2d2 import StopDecoding

        if self.calls == self.n:
            raise StopDecoding()
        self.calls += 1
        return self._model.forward(*args, **kwargs)
