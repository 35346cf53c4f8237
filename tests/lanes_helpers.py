"""Shared builders for the compare / what-if / bench / Compare-tab tests: a tiny random model with a tokenizer."""
from __future__ import annotations

from conftest import MASK_ID, STOP_IDS, tiny_qwen3_model, tiny_tokenizer

PROMPT = "t5 t6 t7 t8 t9"


def tiny_with_tokenizer(seed: int = 0):
    """tiny_qwen3 (position-aligned) plus the word-level test tokenizer, so prompts can be text.

    float32, not the conftest default float64: the first float64 matmuls on these CPUs cost ~10 s of warm-up,
    and float32 is exact enough for the greedy AR-equality check (docs/algorithm.md,
    'Acceptance modes and AR-exactness').
    """
    import torch

    from s2d2.models.loading import from_transformers

    return from_transformers(tiny_qwen3_model(seed, torch.float32), tiny_tokenizer(), mask_token_id=MASK_ID,
                             stop_token_ids=STOP_IDS, logits="aligned", block_size=4, name="tiny-qwen3-tok",
                             use_chat_template=False)
