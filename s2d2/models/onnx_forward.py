"""The decoder's forward as a pure function of tensors, for export to ONNX (s2d2/web/, docs/browser-decoding.md).

`HFModel.forward` runs the model on a DynamicCache it owns and crops it afterwards. A graph cannot hold state, so
`CacheForward` takes the cache in and gives it out: inputs are the query's token ids and absolute positions, the full
boolean attention mask (which of the cached keys and query keys each query row may see) and every layer's past key and
value; outputs are the float32 logits of every query row and every layer's keys and values with the query appended.
The caller keeps the first `cached + keep` positions of the new cache: that is the crop `HFModel.forward` does.

The mask is an input, not built in the graph, because the decoder's masks differ by forward kind (block-causal
prefill, block-bidirectional draft, the 2L verifier's layout, a fused commit): one graph serves every kind.

Input and output names are a contract with the page's decoder (s2d2_web/); `input_names` and `output_names` give
them, and the manifest lists them. Changing one breaks every exported model in use.
"""
from __future__ import annotations

from typing import Any

import torch
from transformers import DynamicCache

INPUT_IDS = "input_ids"  # int64 [1, Q]
POSITION_IDS = "position_ids"  # int64 [1, Q]: absolute positions (cache length + index for a contiguous query)
ATTENTION_MASK = "attention_mask"  # bool [1, 1, Q, P + Q]: True = row may see the key; cache columns first
LOGITS = "logits"  # float32 [1, Q, V]


def past_names(layers: int) -> list[str]:
    """The past cache inputs, in order: key then value for each layer (float32 [1, kv_heads, P, head_dim])."""
    return [f"past_key_values.{i}.{part}" for i in range(layers) for part in ("key", "value")]


def present_names(layers: int) -> list[str]:
    """The new cache outputs, in order: key then value for each layer (float32 [1, kv_heads, P + Q, head_dim])."""
    return [f"present.{i}.{part}" for i in range(layers) for part in ("key", "value")]


def input_names(layers: int) -> list[str]:
    return [INPUT_IDS, POSITION_IDS, ATTENTION_MASK] + past_names(layers)


def output_names(layers: int) -> list[str]:
    return [LOGITS] + present_names(layers)


def cache_shape(config: Any) -> tuple[int, int, int]:
    """(layers, kv_heads, head_dim) of a native config: the cache tensors are [1, kv_heads, length, head_dim]."""
    heads = int(config.num_attention_heads)
    head_dim = int(getattr(config, "head_dim", None) or int(config.hidden_size) // heads)
    kv_heads = int(getattr(config, "num_key_value_heads", None) or heads)
    return int(config.num_hidden_layers), kv_heads, head_dim


class CacheForward(torch.nn.Module):
    """A native causal LM's forward with its KV cache as explicit inputs and outputs (see the module docstring).

    Invariant: for any cache, ids, positions and mask, `logits` equals `HFModel.forward(...)` on a DynamicCache
    holding the same past (same model, same dtype), and `present` is that cache after the forward, before any crop.
    """

    def __init__(self, model: Any) -> None:
        super().__init__()
        self.model = model.eval()
        self.layers = cache_shape(model.config)[0]

    def forward(self, input_ids: torch.Tensor, position_ids: torch.Tensor, attention_mask: torch.Tensor,
                *past: torch.Tensor) -> tuple[torch.Tensor, ...]:
        pairs = [(past[2 * i], past[2 * i + 1]) for i in range(self.layers)]
        cache = DynamicCache(ddp_cache_data=pairs, config=self.model.config)
        out = self.model(input_ids=input_ids, position_ids=position_ids, attention_mask=attention_mask,
                         cache=cache, use_cache=True)
        present: list[torch.Tensor] = []
        for layer in cache.layers:  # updated in place: each layer's past with the query appended
            present += [layer.keys, layer.values]
        return (out.logits.float(), *present)


def use_batched_experts(model: Any) -> bool:
    """Switch an MoE model's experts to transformers' `batched_mm` implementation (same function; the default
    per-expert loop uses `aten::histc`, which the ONNX exporter refuses). True when the model has experts."""
    config = model.config
    if not hasattr(config, "n_routed_experts") and not hasattr(config, "num_experts"):
        return False
    model.set_experts_implementation("batched_mm")
    return True
