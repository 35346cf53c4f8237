"""Model configurations for the tiny block-diffusion LM (plain Qwen3ForCausalLM, tied embeddings)."""
from __future__ import annotations

from typing import Any

SIZES = {
    # name: (hidden, layers, heads, kv_heads, head_dim, ffn)
    "h128": (128, 4, 4, 2, 32, 384),
    "h192": (192, 6, 6, 2, 32, 576),
    "h256": (256, 6, 4, 2, 64, 768),
    "micro": (32, 2, 2, 1, 16, 64),  # tests only
}


def build_config(size: str, vocab_size: int, max_positions: int = 1024, eos_id: int = 0) -> dict[str, Any]:
    """Qwen3Config keyword arguments for a named size."""
    h, n_layers, heads, kv, hd, ffn = SIZES[size]
    return dict(
        vocab_size=vocab_size,
        hidden_size=h,
        intermediate_size=ffn,
        num_hidden_layers=n_layers,
        num_attention_heads=heads,
        num_key_value_heads=kv,
        head_dim=hd,
        max_position_embeddings=max_positions,
        rope_theta=10000.0,
        tie_word_embeddings=True,
        bos_token_id=eos_id,
        eos_token_id=eos_id,
        pad_token_id=eos_id,
        attention_dropout=0.0,
        use_cache=True,
    )


def build_model(size: str, vocab_size: int, seed: int = 0, max_positions: int = 1024, eos_id: int = 0):
    from ..models.builders import qwen3

    return qwen3(build_config(size, vocab_size, max_positions, eos_id), seed=seed)
