"""Dream (Dream-org, `model_type` "Dream", the base of D2F-Dream) on transformers' native `Qwen2ForCausalLM`.

Dream's modeling code is Qwen2 with the causal mask removed: the same parameter names and shapes (q/k/v biases, no
output bias, SwiGLU MLP, RMSNorm, rotate-half RoPE), and attention is whatever mask the caller passes. Its logits
are right-shifted like an AR model's: the logit at position j-1 predicts token j (D2F's `shift_logits`), so the
decoder treats it as the "shifted" family. The folder loads with Qwen2's own loader; only `model_type` is replaced
(loading.py) and the facts below fill what the config leaves out.

`write_official` saves a Qwen2ForCausalLM as an official-layout Dream folder (tests, tiny checkpoints).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

import torch

from .weights import model_state, write_folder

MODEL_TYPE = "dream"  # lower-cased; config.json says "Dream"
ARCHITECTURE = "DreamModel"
MASK_ID = 151666  # <|mask|>
STOP_IDS = (151643, 151644, 151645)  # <|endoftext|>, <|im_start|>, <|im_end|> (the reference demo's stop list)
AUTO_MAP = {"AutoConfig": "configuration_dream.DreamConfig", "AutoModel": "modeling_dream.DreamModel"}


def is_dream(config: Mapping[str, Any]) -> bool:
    arch = [str(a).lower() for a in config.get("architectures") or []]
    return str(config.get("model_type", "")).lower() == MODEL_TYPE or ARCHITECTURE.lower() in arch


def official_config_dict(native: Any, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """An official Dream config.json for a Qwen2Config."""
    rope = dict(native.rope_parameters or {})
    out = {
        "architectures": [ARCHITECTURE], "model_type": "Dream", "auto_map": dict(AUTO_MAP),
        "vocab_size": native.vocab_size, "hidden_size": native.hidden_size,
        "intermediate_size": native.intermediate_size, "num_hidden_layers": native.num_hidden_layers,
        "num_attention_heads": native.num_attention_heads, "num_key_value_heads": native.num_key_value_heads,
        "hidden_act": native.hidden_act, "max_position_embeddings": native.max_position_embeddings,
        "rms_norm_eps": native.rms_norm_eps, "rope_theta": float(rope.get("rope_theta", 10000.0)),
        "rope_scaling": None, "tie_word_embeddings": bool(native.tie_word_embeddings), "use_sliding_window": False,
        "sliding_window": None, "max_window_layers": native.num_hidden_layers, "attention_dropout": 0.0,
        "use_cache": False, "initializer_range": 0.02,
    }
    out.update(extra or {})
    return out


def write_official(model: Any, folder: Path, extra_config: Mapping[str, Any] | None = None,
                   dtype: torch.dtype | None = None) -> Path:
    """Save a Qwen2ForCausalLM as an official Dream folder: config.json, generation_config.json and
    model.safetensors (same names)."""
    config = write_folder(folder, model_state(model), official_config_dict(model.config, extra_config), dtype)
    gen = {k: config[k] for k in ("bos_token_id", "eos_token_id", "pad_token_id") if k in config}
    (folder / "generation_config.json").write_text(json.dumps(gen, indent=2) + "\n")  # official folders ship one
    return folder
