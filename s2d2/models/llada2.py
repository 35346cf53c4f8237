"""LLaDA2.0 / 2.1 (inclusionAI, `model_type` "llada2_moe") on transformers' native `Glm4MoeForCausalLM`.

The published LLaDA2-MoE modeling code computes exactly the function of Glm4Moe (docs/model-families.md,
'LLaDA2.x on Glm4Moe'): sigmoid routing with a bias-corrected choice, group-limited top-k, renormalised weights scaled
by `routed_scaling_factor`, shared experts, `first_k_dense_replace` dense layers, per-head QK RMSNorm before a partial
rotate-half RoPE. Only the names differ, so an official folder loads through this map at load time (nothing converted is
written to disk), and `to_official` writes the inverse (the bundled tiny LLaDA2 model ships in the official layout).

Config (official -> native): `num_experts` -> `n_routed_experts`, `num_shared_experts` -> `n_shared_experts`,
`use_qkv_bias` -> `attention_bias`, `rope_theta` + `partial_rotary_factor` -> `rope_parameters`; the other names
are shared. Weights: `model.word_embeddings` -> `model.embed_tokens`; `attention.query_key_value` split by rows
`[H·hd | KV·hd | KV·hd]` -> `self_attn.{q,k,v}_proj`; `attention.dense` -> `self_attn.o_proj`;
`attention.{query,key}_layernorm` -> `self_attn.{q,k}_norm`; `mlp.gate.expert_bias` ->
`mlp.gate.e_score_correction_bias`; per-expert `mlp.experts.<e>.{gate,up,down}_proj` are packed into Glm4Moe's
`mlp.experts.gate_up_proj` [E, 2I, h] (gate rows first) and `mlp.experts.down_proj` [E, h, I].

Two details the plain rename would miss:
* the official router renormalises the top-k weights only when `num_experts_per_tok > 1`; Glm4Moe's
  `norm_topk_prob` is set accordingly (a top-1 router keeps the raw sigmoid score);
* `num_shared_experts: null` (no shared expert) becomes `n_shared_experts = 0`: a zero-width MLP whose output is
  exactly 0. `num_experts: null` (a dense model) makes every layer dense.
`use_bias: true` (a bias on `attention.dense`) has no Glm4Moe equivalent and is refused, as is a `rope_scaling`
other than null and a `score_function` other than sigmoid.
"""
from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any, Callable, Mapping

import torch

from .weights import model_state, read_safetensors, unexpected, unfilled, write_folder

MODEL_TYPE = "llada2_moe"
ARCHITECTURE = "LLaDA2MoeModelLM"
MASK_ID = 156895  # <|mask|> in the LLaDA2 tokenizer
EOS_ID = 156892  # <|endoftext|>
BLOCK = 32

# Official config keys that carry over to Glm4MoeConfig unchanged.
_SHARED_KEYS = (
    "vocab_size", "hidden_size", "intermediate_size", "moe_intermediate_size", "num_hidden_layers",
    "num_attention_heads", "num_key_value_heads", "head_dim", "hidden_act", "rms_norm_eps",
    "max_position_embeddings", "num_experts_per_tok", "n_group", "topk_group", "routed_scaling_factor",
    "first_k_dense_replace", "use_qk_norm", "tie_word_embeddings", "initializer_range", "attention_dropout",
    "pad_token_id", "bos_token_id", "eos_token_id",
)
_LAYER = re.compile(r"^model\.layers\.(\d+)\.(.+)$")
_EXPERT = re.compile(r"^mlp\.experts\.(\d+)\.(gate_proj|up_proj|down_proj)\.weight$")
_RENAMES = {  # per-layer suffix, official -> native (the rest keeps its name)
    "attention.dense.weight": "self_attn.o_proj.weight",
    "attention.query_layernorm.weight": "self_attn.q_norm.weight",
    "attention.key_layernorm.weight": "self_attn.k_norm.weight",
    "mlp.gate.expert_bias": "mlp.gate.e_score_correction_bias",
}
_RENAMES_BACK = {v: k for k, v in _RENAMES.items()}
_EMBED = {"model.word_embeddings.weight": "model.embed_tokens.weight"}
_EMBED_BACK = {v: k for k, v in _EMBED.items()}


def _per_layer(name: str) -> tuple[str, str | None]:
    """(layer index, the rest of the name) for `model.layers.<i>.<rest>`, else ("", None)."""
    m = _LAYER.match(name)
    return (m.group(1), m.group(2)) if m else ("", None)


class UnsupportedLLaDA2Config(ValueError):
    """An official config this port cannot represent exactly on Glm4Moe; the message says which field."""


def is_llada2(config: Mapping[str, Any]) -> bool:
    arch = [str(a).lower() for a in config.get("architectures") or []]
    return str(config.get("model_type", "")).lower() == MODEL_TYPE or ARCHITECTURE.lower() in arch


# ---------------------------------------------------------------------------------------------------------
# Config


def native_config_dict(official: Mapping[str, Any]) -> dict[str, Any]:
    """Glm4MoeConfig keyword arguments for an official LLaDA2 config.json (raises UnsupportedLLaDA2Config)."""
    if official.get("use_bias"):
        raise UnsupportedLLaDA2Config(
            "config.json sets use_bias: true (a bias on attention.dense); transformers' Glm4Moe has no output-"
            "projection bias, so this checkpoint cannot be loaded exactly")
    if official.get("rope_scaling") not in (None, {}):
        raise UnsupportedLLaDA2Config(f"config.json sets rope_scaling {official['rope_scaling']!r}; only the "
                                      "default RoPE (rope_scaling: null) is supported")
    score_fn = official.get("score_function", "sigmoid")
    if score_fn != "sigmoid":
        raise UnsupportedLLaDA2Config(f"config.json sets score_function {score_fn!r}; only sigmoid routing is "
                                      "supported")
    out = {k: official[k] for k in _SHARED_KEYS if official.get(k) is not None}
    layers = int(official["num_hidden_layers"])
    n_experts = official.get("num_experts")
    if n_experts is None:  # a dense model: every layer keeps its MLP
        out.update(n_routed_experts=1, num_experts_per_tok=1, n_group=1, topk_group=1, first_k_dense_replace=layers)
    else:
        out["n_routed_experts"] = int(n_experts)
    shared = official.get("num_shared_experts")
    out["n_shared_experts"] = 0 if shared is None else int(shared)
    out["attention_bias"] = bool(official.get("use_qkv_bias", False))
    out["norm_topk_prob"] = int(out.get("num_experts_per_tok", 1)) > 1
    out["rope_parameters"] = {
        "rope_type": "default",
        "rope_theta": float(official.get("rope_theta", 10000.0)),
        "partial_rotary_factor": float(official.get("partial_rotary_factor", 1.0)),
    }
    out["num_mtp_layers"] = 0
    return out


def official_config_dict(native: Any, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """An official-layout config.json for a Glm4MoeConfig (the inverse of `native_config_dict`)."""
    rope = dict(native.rope_parameters or {})
    out: dict[str, Any] = {"architectures": [ARCHITECTURE], "model_type": MODEL_TYPE}
    for k in _SHARED_KEYS:
        v = getattr(native, k, None)
        if v is not None:
            out[k] = v
    out.update(
        num_experts=int(native.n_routed_experts),
        num_shared_experts=int(native.n_shared_experts) if native.n_shared_experts else None,
        use_qkv_bias=bool(native.attention_bias),
        use_bias=False,
        rope_theta=float(rope.get("rope_theta", 10000.0)),
        rope_scaling=None,
        partial_rotary_factor=float(rope.get("partial_rotary_factor", 1.0)),
        score_function="sigmoid",
        moe_router_enable_expert_bias=True,
        num_nextn_predict_layers=0,
    )
    out.update(extra or {})
    return out


# ---------------------------------------------------------------------------------------------------------
# Weights


def to_native(weights: Mapping[str, torch.Tensor], official: Mapping[str, Any]) -> dict[str, torch.Tensor]:
    """Official-layout tensors -> Glm4MoeForCausalLM state dict (qkv split, experts packed, names mapped)."""
    heads, kv = int(official["num_attention_heads"]), int(official["num_key_value_heads"])
    hd = int(official.get("head_dim") or int(official["hidden_size"]) // heads)
    sizes = [heads * hd, kv * hd, kv * hd]
    out: dict[str, torch.Tensor] = {}
    experts: dict[tuple[int, str], dict[int, torch.Tensor]] = {}
    for name, tensor in weights.items():
        layer, rest = _per_layer(name)
        if rest is None:
            out[_EMBED.get(name, name)] = tensor
            continue
        prefix = f"model.layers.{layer}."
        if rest.startswith("attention.query_key_value."):
            kind = rest.rsplit(".", 1)[1]  # weight | bias
            if tensor.shape[0] != sum(sizes):
                raise UnsupportedLLaDA2Config(f"{name}: {tensor.shape[0]} rows, expected (heads + 2·kv_heads)·"
                                              f"head_dim = {sum(sizes)}")
            for proj, part in zip(("q_proj", "k_proj", "v_proj"), torch.split(tensor, sizes, dim=0)):
                out[f"{prefix}self_attn.{proj}.{kind}"] = part
            continue
        e = _EXPERT.match(rest)
        if e is not None:
            experts.setdefault((int(layer), e.group(2)), {})[int(e.group(1))] = tensor
            continue
        out[prefix + _RENAMES.get(rest, rest)] = tensor
    for layer in sorted({k[0] for k in experts}):
        gate, up, down = (experts.get((layer, p), {}) for p in ("gate_proj", "up_proj", "down_proj"))
        n = len(gate)
        if not n or not (set(gate) == set(up) == set(down) == set(range(n))):
            raise UnsupportedLLaDA2Config(f"model.layers.{layer}.mlp.experts: incomplete expert weights "
                                          f"(gate {sorted(gate)[:4]}…, up {len(up)}, down {len(down)})")
        prefix = f"model.layers.{layer}.mlp.experts."
        out[prefix + "gate_up_proj"] = torch.stack([torch.cat([gate[i], up[i]], dim=0) for i in range(n)])
        out[prefix + "down_proj"] = torch.stack([down[i] for i in range(n)])
    return out


def to_official(state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Glm4MoeForCausalLM state dict -> official-layout tensors (the inverse of `to_native`)."""
    out: dict[str, torch.Tensor] = {}
    for name, tensor in state.items():
        layer, rest = _per_layer(name)
        if rest is None:
            out[_EMBED_BACK.get(name, name)] = tensor
            continue
        prefix = f"model.layers.{layer}."
        if rest.startswith("self_attn.") and rest.split(".")[1] in ("q_proj", "k_proj", "v_proj"):
            if rest.startswith("self_attn.q_proj."):
                kind = rest.rsplit(".", 1)[1]
                parts = [state[f"{prefix}self_attn.{p}.{kind}"] for p in ("q_proj", "k_proj", "v_proj")]
                out[f"{prefix}attention.query_key_value.{kind}"] = torch.cat(parts, dim=0)
            continue
        if rest == "mlp.experts.gate_up_proj":
            inter = tensor.shape[1] // 2
            for i in range(tensor.shape[0]):
                out[f"{prefix}mlp.experts.{i}.gate_proj.weight"] = tensor[i, :inter]
                out[f"{prefix}mlp.experts.{i}.up_proj.weight"] = tensor[i, inter:]
            continue
        if rest == "mlp.experts.down_proj":
            for i in range(tensor.shape[0]):
                out[f"{prefix}mlp.experts.{i}.down_proj.weight"] = tensor[i]
            continue
        out[prefix + _RENAMES_BACK.get(rest, rest)] = tensor
    return out


def load_native(folder: Path, official: Mapping[str, Any], dtype: torch.dtype, attn: str,
                quiet: Callable[[], Any]) -> tuple[Any, list[str]]:
    """Build `Glm4MoeForCausalLM` from an official folder: map the config and weights, load strictly.

    Returns (model, unexpected keys). Missing weights raise: a random router or expert would decode garbage.
    Host memory: the mapped state dict is materialised once (≈ the checkpoint's size).
    """
    from transformers import Glm4MoeConfig, Glm4MoeForCausalLM

    native = native_config_dict(official)
    with quiet():
        config = Glm4MoeConfig(**native)
    state = to_native(read_safetensors(folder), official)
    if not native["n_shared_experts"]:  # zero-width shared experts: exact zeros, nothing to read
        state.update(_empty_shared_experts(config))
    with quiet(), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Initializing zero-element tensors")  # zero-width shared expert
        model, info = Glm4MoeForCausalLM.from_pretrained(
            None, config=config, state_dict=state, dtype=dtype, attn_implementation=attn,
            output_loading_info=True,
        )
    problem = unfilled(info)
    if problem:
        raise UnsupportedLLaDA2Config(f"{problem} after mapping to Glm4Moe; they would be left random")
    return model.eval(), unexpected(info)


def _empty_shared_experts(config: Any) -> dict[str, torch.Tensor]:
    h = int(config.hidden_size)
    out = {}
    for layer in range(int(config.first_k_dense_replace), int(config.num_hidden_layers)):
        p = f"model.layers.{layer}.mlp.shared_experts."
        out.update({p + "gate_proj.weight": torch.zeros(0, h), p + "up_proj.weight": torch.zeros(0, h),
                    p + "down_proj.weight": torch.zeros(h, 0)})
    return out


def write_official(model: Any, folder: Path, extra_config: Mapping[str, Any] | None = None,
                   dtype: torch.dtype | None = None) -> Path:
    """Save a Glm4MoeForCausalLM in the official LLaDA2 layout: config.json + model.safetensors."""
    write_folder(folder, to_official(model_state(model)), official_config_dict(model.config, extra_config), dtype,
                 keep_fp32=_keep_fp32)
    return folder


def _keep_fp32(name: str) -> bool:
    # The router runs in float32 (Glm4Moe keeps gate.weight and the score bias in fp32; LLaDA2's router_dtype).
    return name.endswith("mlp.gate.weight") or name.endswith("mlp.gate.expert_bias")

