"""LLaDA (v1, GSAI-ML; `model_type` "llada", the base of D2F-LLaDA) on transformers' native `LlamaForCausalLM`.

The published LLaDA modeling code (an OLMo-derived "llama" block) computes exactly a Llama forward with
bidirectional attention: pre-norm RMSNorm blocks, q/k/v projections with rotate-half RoPE over the whole head,
`silu(ff_proj(x)) * up_proj(x)` through `ff_out`, a final RMSNorm and an untied output projection. Attention is
whatever mask the caller passes (LLaDA is a diffusion model: full attention, or D2F's block-causal mask), which on
the native class means an explicit 4D mask or `attention="full"`; the logits are position-aligned (logit i
predicts token i). Only the names differ, so an official folder loads through this map at load time (nothing
converted is written to disk), and `write_official` writes the inverse (tests and tiny checkpoints).

Config (official -> native): `d_model` -> `hidden_size`, `n_heads` -> `num_attention_heads`, `n_kv_heads` (or
1 with `multi_query_attention`, or `n_heads`) -> `num_key_value_heads`, `n_layers` -> `num_hidden_layers`,
`mlp_hidden_size` (or `mlp_ratio · d_model`) -> `intermediate_size`, `embedding_size` (or `vocab_size`) ->
`vocab_size` (the logits width), `max_sequence_length` -> `max_position_embeddings`, `rope_theta` ->
`rope_parameters`, `weight_tying` -> `tie_word_embeddings`. Weights: `model.transformer.wte` ->
`model.embed_tokens`; per block `attn_norm` / `ff_norm` -> `input_layernorm` / `post_attention_layernorm`;
`q_proj`, `k_proj`, `v_proj` -> `self_attn.*`; `attn_out` -> `self_attn.o_proj`; `ff_proj` / `up_proj` / `ff_out`
-> `mlp.gate_proj` / `mlp.up_proj` / `mlp.down_proj`; `ln_f` -> `model.norm`; `transformer.ff_out` -> `lm_head`.

Refused (one clear error each; none is set by the released checkpoints): a block type other than "llama", an
activation other than "silu", a layer norm other than RMS with affine weights, biases, QK layer norm, ALiBi or no
RoPE, `input_emb_norm`, `scale_logits`, `block_group_size` > 1. `rope_full_precision` (RoPE in float32 for
low-precision weights) is the one thing not reproduced bit for bit: native Llama applies RoPE in the model's dtype,
the same function with bf16 round-off instead of float32 (identical in float32 and float64).
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable, Mapping

import torch

from .weights import model_state, read_safetensors, unexpected, unfilled, write_folder

MODEL_TYPE = "llada"
ARCHITECTURE = "LLaDAModelLM"
MASK_ID = 126336  # <|mdm_mask|>
EOS_ID = 126081  # <|endoftext|>
EOT_ID = 126348  # <|eot_id|>: ends an Instruct turn

_BLOCK = re.compile(r"^model\.transformer\.blocks\.(\d+)\.(.+)$")
_LAYER = re.compile(r"^model\.layers\.(\d+)\.(.+)$")
_PER_BLOCK = {  # official per-block module -> native per-layer module
    "attn_norm": "input_layernorm", "ff_norm": "post_attention_layernorm",
    "q_proj": "self_attn.q_proj", "k_proj": "self_attn.k_proj", "v_proj": "self_attn.v_proj",
    "attn_out": "self_attn.o_proj", "ff_proj": "mlp.gate_proj", "up_proj": "mlp.up_proj", "ff_out": "mlp.down_proj",
}
_PER_LAYER = {v: k for k, v in _PER_BLOCK.items()}
_TOP = {"model.transformer.wte": "model.embed_tokens", "model.transformer.ln_f": "model.norm",
        "model.transformer.ff_out": "lm_head"}
_TOP_BACK = {v: k for k, v in _TOP.items()}


class UnsupportedLLaDAConfig(ValueError):
    """An official config this port cannot represent exactly on Llama; the message says which field."""


def is_llada(config: Mapping[str, Any]) -> bool:
    arch = [str(a).lower() for a in config.get("architectures") or []]
    return str(config.get("model_type", "")).lower() == MODEL_TYPE or ARCHITECTURE.lower() in arch


def module_to_native(name: str) -> str:
    """An official module path (`model.transformer.blocks.3.attn_out`) -> the native one
    (`model.layers.3.self_attn.o_proj`); raises KeyError for a name outside the map."""
    if name in _TOP:
        return _TOP[name]
    m = _BLOCK.match(name)
    if m is None or m.group(2) not in _PER_BLOCK:
        raise KeyError(name)
    return f"model.layers.{m.group(1)}.{_PER_BLOCK[m.group(2)]}"


def module_to_official(name: str) -> str:
    if name in _TOP_BACK:
        return _TOP_BACK[name]
    m = _LAYER.match(name)
    if m is None or m.group(2) not in _PER_LAYER:
        raise KeyError(name)
    return f"model.transformer.blocks.{m.group(1)}.{_PER_LAYER[m.group(2)]}"


def _param(name: str, mapper: Callable[[str], str]) -> str:
    module, _, leaf = name.rpartition(".")
    return f"{mapper(module)}.{leaf}"


# ---------------------------------------------------------------------------------------------------------
# Config


def _refuse(field: str, value: Any, why: str) -> None:
    raise UnsupportedLLaDAConfig(f"config.json sets {field} = {value!r}; {why}")


def native_config_dict(official: Mapping[str, Any]) -> dict[str, Any]:
    """LlamaConfig keyword arguments for an official LLaDA config.json (raises UnsupportedLLaDAConfig)."""
    checks = (  # (field, default, allowed values, why)
        ("block_type", "sequential", ("llama",), "only the 'llama' block (q/k/v, gate and up projections) is "
                                                 "supported"),
        ("activation_type", "swiglu", ("silu",), "only silu(ff_proj) * up_proj is supported"),
        ("layer_norm_type", "default", ("rms",), "only RMSNorm is supported"),
        ("layer_norm_with_affine", True, (True,), "RMSNorm without weights is not supported"),
        ("include_bias", False, (False,), "Llama has no per-projection biases of that shape"),
        ("include_qkv_bias", False, (False, None), "q/k/v biases without an output bias are not supported"),
        ("bias_for_layer_norm", None, (False, None), "layer-norm biases are not supported"),
        ("attention_layer_norm", False, (False,), "QK layer norm is not supported"),
        ("alibi", False, (False,), "ALiBi is not supported (LLaDA uses RoPE)"),
        ("rope", False, (True,), "LLaDA without RoPE is not supported"),
        ("input_emb_norm", False, (False,), "an embedding scale by sqrt(d_model) is not supported"),
        ("scale_logits", False, (False,), "a logit scale of 1/sqrt(d_model) is not supported"),
        ("block_group_size", 1, (1,), "grouped blocks are not supported"),
    )
    for field, default, allowed, why in checks:
        value = official.get(field, default)
        if value not in allowed:
            _refuse(field, value, why)
    d, heads = int(official["d_model"]), int(official["n_heads"])
    if official.get("multi_query_attention"):
        kv = 1
    else:
        kv = int(official.get("n_kv_heads") or heads)
    hidden = official.get("mlp_hidden_size") or int(official.get("mlp_ratio", 4)) * d
    vocab = int(official.get("embedding_size") or official["vocab_size"])
    out: dict[str, Any] = dict(
        vocab_size=vocab, hidden_size=d, intermediate_size=int(hidden), num_hidden_layers=int(official["n_layers"]),
        num_attention_heads=heads, num_key_value_heads=kv, head_dim=d // heads, hidden_act="silu",
        max_position_embeddings=int(official.get("max_sequence_length", 1024)),
        rms_norm_eps=float(official.get("rms_norm_eps", 1e-5)), tie_word_embeddings=bool(official.get("weight_tying",
                                                                                                      True)),
        attention_bias=False, mlp_bias=False,
        rope_parameters={"rope_type": "default", "rope_theta": float(official.get("rope_theta", 10000.0))},
    )
    for k in ("pad_token_id", "eos_token_id"):
        if isinstance(official.get(k), int):
            out[k] = official[k]
    return out


def official_config_dict(native: Any, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """An official-layout config.json for a LlamaConfig (the inverse of `native_config_dict`)."""
    rope = dict(native.rope_parameters or {})
    out: dict[str, Any] = {
        "architectures": [ARCHITECTURE], "model_type": MODEL_TYPE, "block_type": "llama",
        "activation_type": "silu", "layer_norm_type": "rms", "layer_norm_with_affine": True,
        "bias_for_layer_norm": False, "include_bias": False, "include_qkv_bias": False, "rope": True,
        "alibi": False, "attention_layer_norm": False, "input_emb_norm": False, "scale_logits": False,
        "block_group_size": 1, "rope_full_precision": True, "flash_attention": False,
        "d_model": native.hidden_size, "n_heads": native.num_attention_heads,
        "n_kv_heads": native.num_key_value_heads, "n_layers": native.num_hidden_layers,
        "mlp_hidden_size": native.intermediate_size, "mlp_ratio": 4, "vocab_size": native.vocab_size,
        "embedding_size": native.vocab_size, "max_sequence_length": native.max_position_embeddings,
        "rms_norm_eps": native.rms_norm_eps, "rope_theta": float(rope.get("rope_theta", 10000.0)),
        "weight_tying": bool(native.tie_word_embeddings), "attention_dropout": 0.0, "residual_dropout": 0.0,
        "embedding_dropout": 0.0, "use_cache": False,
    }
    out.update(extra or {})
    return out


# ---------------------------------------------------------------------------------------------------------
# Weights


def to_native(weights: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Official-layout tensors -> LlamaForCausalLM state dict (names mapped; raises on a name outside the map)."""
    out = {}
    for name, tensor in weights.items():
        try:
            out[_param(name, module_to_native)] = tensor
        except KeyError:
            raise UnsupportedLLaDAConfig(f"unexpected weight {name!r} in an official LLaDA checkpoint") from None
    return out


def to_official(state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """LlamaForCausalLM state dict -> official-layout tensors (the inverse of `to_native`)."""
    return {_param(name, module_to_official): t for name, t in state.items()}


def load_native(folder: Path, official: Mapping[str, Any], dtype: torch.dtype, attn: str,
                quiet: Callable[[], Any]) -> tuple[Any, list[str]]:
    """Build `LlamaForCausalLM` from an official folder: map the config and the names, load strictly.

    Returns (model, unexpected keys). Missing weights raise: a random layer would decode garbage."""
    from transformers import LlamaConfig, LlamaForCausalLM

    with quiet():
        config = LlamaConfig(**native_config_dict(official))
    state = to_native(read_safetensors(folder))
    if config.tie_word_embeddings:
        state.pop("lm_head.weight", None)
    with quiet():
        model, info = LlamaForCausalLM.from_pretrained(None, config=config, state_dict=state, dtype=dtype,
                                                       attn_implementation=attn, output_loading_info=True)
    problem = unfilled(info)
    if problem:
        raise UnsupportedLLaDAConfig(f"{problem} after mapping to Llama; they would be left random")
    return model.eval(), unexpected(info)


def write_official(model: Any, folder: Path, extra_config: Mapping[str, Any] | None = None,
                   dtype: torch.dtype | None = None) -> Path:
    """Save a LlamaForCausalLM in the official LLaDA layout: config.json + model.safetensors."""
    write_folder(folder, to_official(model_state(model)), official_config_dict(model.config, extra_config), dtype)
    return folder
