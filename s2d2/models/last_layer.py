"""The last decoder layer over the read rows only (issue 37; read_rows.py says which rows are read).

Why: a query row's last-layer output feeds nothing but its own logits, so for a row nobody reads the last layer
needs only its keys and values (which the read rows attend), and those come from the layer's input. A draft of
block 32 reads its few masks; on the CPU, where every query token is work, the last layer's query projection,
attention, output projection and MLP over the unread rows are a sixth of a forward's layer work spent on nothing.

How: the model body runs here layer by layer, as the transformers model's own forward runs it for the inputs the
decoder gives (an explicit [N, 1, Q, K] mask, which transformers passes through unchanged; position ids; a
DynamicCache), except the last layer: every row's keys and values (so the cache and the read rows' attention are
exactly the full layer's), then the queries, attention, residual and MLP of the read rows alone, gathered per
batch row (padded to the most rows any batch row reads, by repeating one of its own reads: computing a row twice
gives the same values). The read rows' outputs are written back in place of their input rows; the unread rows
keep their input, which nothing reads (the head runs only over the read rows).

Only layer layouts checked against transformers' own forward run here (`light_layers`: Qwen3 and Qwen2 decoder
layers, full attention, sdpa or eager); any other model, a forward without an explicit mask, or one that reads
every row runs the transformers forward unchanged. tests/lib/test_read_rows.py compares both paths.
"""
from __future__ import annotations

import sys
from typing import Any, Optional

import torch

LIGHT_LAYERS = ("Qwen3DecoderLayer", "Qwen2DecoderLayer")


def light_layers(model: Any) -> bool:
    """True when `model` (a transformers causal LM) has the layer layout `body` runs: Qwen3 or Qwen2 decoder
    layers, full attention only, sdpa or eager attention."""
    inner = getattr(model, "model", None)
    layers = getattr(inner, "layers", None)
    config = getattr(model, "config", None)
    if layers is None or config is None or len(layers) == 0:
        return False
    kinds = set(getattr(config, "layer_types", None) or ["full_attention"])
    return (all(type(layer).__name__ in LIGHT_LAYERS for layer in layers) and kinds == {"full_attention"}
            and getattr(config, "_attn_implementation", None) in ("sdpa", "eager")
            and not getattr(config, "use_sliding_window", False))


def take_rows(t: torch.Tensor, sel: torch.Tensor) -> torch.Tensor:
    """t [N, Q, ...] at rows sel [N, R] of each batch row: [N, R, ...]."""
    index = sel.reshape(*sel.shape, *([1] * (t.dim() - 2)))
    return torch.take_along_dim(t, index, dim=1)


def last_layer(layer: Any, hidden: torch.Tensor, mask: torch.Tensor,
               position_embeddings: tuple[torch.Tensor, torch.Tensor], cache: Any, sel: torch.Tensor) -> torch.Tensor:
    """The decoder `layer` (the model's last) with every row's keys and values but the queries, attention and MLP
    of rows `sel` [N, R] only; returns `hidden` with those rows replaced by their outputs."""
    attn = layer.self_attn
    home = sys.modules[type(attn).__module__]  # the model's own rotary and attention functions
    n, q = hidden.shape[:2]
    x = layer.input_layernorm(hidden)
    keys = attn.k_proj(x).view(n, q, -1, attn.head_dim)
    keys = (attn.k_norm(keys) if hasattr(attn, "k_norm") else keys).transpose(1, 2)
    values = attn.v_proj(x).view(n, q, -1, attn.head_dim).transpose(1, 2)
    r = sel.shape[1]
    queries = attn.q_proj(take_rows(x, sel)).view(n, r, -1, attn.head_dim)
    queries = (attn.q_norm(queries) if hasattr(attn, "q_norm") else queries).transpose(1, 2)
    cos, sin = position_embeddings
    queries = home.apply_rotary_pos_emb(queries, queries, take_rows(cos, sel), take_rows(sin, sel))[0]
    keys = home.apply_rotary_pos_emb(keys, keys, cos, sin)[1]
    if cache is not None:
        keys, values = cache.update(keys, values, attn.layer_idx)
    attend = home.ALL_ATTENTION_FUNCTIONS.get_interface(attn.config._attn_implementation, home.eager_attention_forward)
    out, _ = attend(attn, queries, keys, values, torch.take_along_dim(mask, sel[:, None, :, None], dim=2),
                    dropout=0.0, scaling=attn.scaling, sliding_window=getattr(attn, "sliding_window", None))
    rows = take_rows(hidden, sel) + attn.o_proj(out.reshape(n, r, -1).contiguous())
    rows = rows + layer.mlp(layer.post_attention_layernorm(rows))
    return hidden.scatter(1, sel[..., None].expand(-1, -1, hidden.shape[-1]), rows)


def body(model: Any, sel: Optional[torch.Tensor], input_ids: torch.Tensor, position_ids: torch.Tensor,
         attention_mask: Optional[torch.Tensor], cache: Any) -> torch.Tensor:
    """The final-norm hidden states [N, Q, H] of `model` on these inputs; with `sel` (rows [N, R] read per batch
    row) and a layout `light_layers` accepts and an explicit mask, the last layer runs over those rows only (the
    others' hidden states are then not their outputs: never read them)."""
    inner = model.model
    if sel is None or attention_mask is None or not light_layers(model):
        return inner(input_ids=input_ids, position_ids=position_ids, attention_mask=attention_mask, cache=cache,
                     use_cache=True).last_hidden_state
    hidden = inner.embed_tokens(input_ids)
    position_embeddings = inner.rotary_emb(hidden, position_ids)
    for layer in inner.layers[:-1]:
        hidden = layer(hidden, attention_mask=attention_mask, position_ids=position_ids, cache=cache, use_cache=True,
                       position_embeddings=position_embeddings)
    hidden = last_layer(inner.layers[-1], hidden, attention_mask, position_embeddings, cache, sel)
    return inner.norm(hidden)
