"""Tiny random D2F-family checkpoints written in the official layouts (LLaDA v1, Dream) and D2F-style LoRA
adapters, deterministic from a seed: the loading tests, the pipeline tests and the reference comparison
(benchmarks/d2f_reference.py) all build exactly these.

The weights come from a CPU torch.Generator, so the same seed gives the same bytes on every machine; `fingerprint`
hashes them, and the recorded reference logits (tests/data/d2f_reference_logits.json) carry the fingerprint they
were computed on. `head_scale` widens the output projection so that a random model is sometimes confident
(p > 0.9), which the pipeline's threshold rules need to be exercised at all.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

import torch

VOCAB = 128
MASK_ID = 127
EOS_ID = 126
SIZES = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, max_position_embeddings=512)


def _fill(model: torch.nn.Module, seed: int, head_scale: float) -> torch.nn.Module:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.3 * torch.randn(p.shape, generator=g, dtype=torch.float64))
            elif name.endswith(".bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=g, dtype=torch.float64))
            else:
                std = head_scale if name == "lm_head.weight" else 0.2
                p.copy_(std * torch.randn(p.shape, generator=g, dtype=torch.float64))
    return model.eval()


def llama_model(seed: int = 0, head_scale: float = 0.6) -> torch.nn.Module:
    """The function a tiny official LLaDA checkpoint computes, as a float64 LlamaForCausalLM."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=VOCAB, head_dim=8, tie_word_embeddings=False, rms_norm_eps=1e-5,
                         rope_parameters={"rope_type": "default", "rope_theta": 500000.0}, attention_bias=False,
                         attn_implementation="sdpa", **SIZES)
    return _fill(LlamaForCausalLM(config).to(torch.float64), seed, head_scale)


def qwen2_model(seed: int = 0, head_scale: float = 0.6) -> torch.nn.Module:
    """The function a tiny official Dream checkpoint computes, as a float64 Qwen2ForCausalLM."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(vocab_size=VOCAB, tie_word_embeddings=False, rms_norm_eps=1e-6,
                         rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
                         attn_implementation="sdpa", **SIZES)
    return _fill(Qwen2ForCausalLM(config).to(torch.float64), seed, head_scale)


def write_llada(folder: Path, seed: int = 0, head_scale: float = 0.6) -> Path:
    """A tiny official-layout LLaDA folder (float64; rope_full_precision off, so the reference keeps float64)."""
    from s2d2.models.llada import write_official

    return write_official(llama_model(seed, head_scale), folder, {
        "mask_token_id": MASK_ID, "eos_token_id": EOS_ID, "pad_token_id": EOS_ID, "rope_full_precision": False,
        "stop_token_ids": [EOS_ID]})


def write_dream(folder: Path, seed: int = 0, head_scale: float = 0.6) -> Path:
    """A tiny official-layout Dream folder (float64)."""
    from s2d2.models.dream import write_official

    return write_official(qwen2_model(seed, head_scale), folder, {
        "mask_token_id": MASK_ID, "eos_token_id": EOS_ID, "pad_token_id": EOS_ID, "bos_token_id": EOS_ID,
        "stop_token_ids": [EOS_ID]})


ATTENTION = {"llada": ("q_proj", "k_proj", "v_proj", "attn_out"),  # D2F's target modules, official names
             "dream": ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj")}


def write_lora(folder: Path, family: str, seed: int = 1, r: int = 4, alpha: float = 8.0) -> Path:
    """A tiny D2F-style LoRA adapter (rank r on the attention projections) in the official module names."""
    from s2d2.models.adapters import write_adapter

    g = torch.Generator().manual_seed(seed)
    d, kv = SIZES["hidden_size"], SIZES["hidden_size"] // SIZES["num_attention_heads"] * SIZES["num_key_value_heads"]
    pairs = {}
    for layer in range(SIZES["num_hidden_layers"]):
        for mod in ATTENTION[family]:
            out = kv if mod.endswith(("k_proj", "v_proj")) else d
            path = (f"model.transformer.blocks.{layer}.{mod}" if family == "llada" else f"model.layers.{layer}.{mod}")
            pairs[path] = {"lora_A": 0.3 * torch.randn(r, d, generator=g, dtype=torch.float64),
                           "lora_B": 0.3 * torch.randn(out, r, generator=g, dtype=torch.float64)}
    return write_adapter(folder, pairs, r, alpha, base=f"tiny-{family}")


def fingerprint(folder: Path) -> str:
    """sha256 over the folder's safetensors files (what the recorded logits were computed on)."""
    h = hashlib.sha256()
    for p in sorted(folder.glob("*.safetensors")):
        h.update(p.read_bytes())
    return h.hexdigest()[:16]
