"""The decoder layers of dense models, run here so that a forward computes only what is read and works in the
CPU's cache (issue 37; read_rows.py says which rows are read).

* **The last layer over the read rows.** A query row's last-layer output feeds nothing but its own logits, so for
  a row nobody reads the last layer needs only its keys and values (which the read rows attend), and those come
  from the layer's input. A draft of block 32 reads its few masks; on the CPU, where every query token is work,
  the last layer's query projection, attention, output projection and MLP over the unread rows are a sixth of a
  forward's layer work spent on nothing. So the last layer computes every row's keys and values (the cache and the
  read rows' attention are exactly the full layer's), then the queries, attention, residual and MLP of the read
  rows alone, gathered per batch row (padded to the most rows any batch row reads by repeating one of its own
  reads: a row computed twice gives the same values), written back in place of their input rows. The unread rows
  keep their input, which nothing reads (the head runs only over the read rows).
* **Attention without copies** (`attention`): SDPA shares the key/value heads in its kernel and reads an additive
  mask made once per forward.
* **The MLP in row chunks** (`mlp_rows`). A batch's MLP over all its rows at once writes and reads back megabytes
  of intermediate activations per matmul, slower per row than batch 1's few rows that stay in cache; chunks of
  `MLP_ROWS` rows give every row exactly what the whole gives (norm and MLP are row-wise) at batch 1's pace.

Every layer otherwise runs as the transformers model's own forward runs it for the inputs the decoder gives (an
explicit [N, 1, Q, K] mask, which transformers passes through unchanged; position ids; a DynamicCache). Only layer
layouts checked against that forward run here (`light_layers`: Qwen3 and Qwen2 decoder layers, full attention,
sdpa or eager); any other model, or a forward without an explicit mask, runs the transformers forward unchanged.
tests/lib/test_read_rows.py compares both paths.
"""
from __future__ import annotations

import sys
from typing import Any, Optional

import torch

LIGHT_LAYERS = ("Qwen3DecoderLayer", "Qwen2DecoderLayer")
MLP_ROWS = 256  # rows per MLP chunk: [256, intermediate] float32 activations stay in a core's L2 cache


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


def mlp_rows(layer: Any, rows: torch.Tensor) -> torch.Tensor:
    """`layer`'s post-attention norm and MLP of `rows` [N, R, H], on the CPU in chunks of about `MLP_ROWS` rows:
    both are row-wise, so a chunk gives each row what the whole does, and a chunk's intermediate activations stay
    in the core's cache (the whole [N * R, intermediate] of a batch is megabytes written and read back per
    matmul)."""
    flat = rows.reshape(-1, rows.shape[-1])
    parts = -(-flat.shape[0] // MLP_ROWS)
    if parts <= 1 or rows.device.type != "cpu":  # an accelerator has no such cache to keep to, only launches
        return layer.mlp(layer.post_attention_layernorm(rows))
    chunks = [layer.mlp(layer.post_attention_layernorm(part)) for part in flat.tensor_split(parts)]
    return torch.cat(chunks).view_as(rows)


def attention(attn: Any, home: Any, queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
              mask: torch.Tensor) -> torch.Tensor:
    """The layer's attention output [N, R, heads, head_dim]. For sdpa, one SDPA call with the key/value heads
    shared in the kernel (`enable_gqa`) instead of copied per query head (what transformers does whenever a mask
    is given), under the additive mask `body` made once per forward instead of converted in every layer: the
    same softmax over the same scores (tests/lib/test_read_rows.py compares it with the transformers forward).
    Eager attention runs the model's own function."""
    if attn.config._attn_implementation == "sdpa":
        out = torch.nn.functional.scaled_dot_product_attention(queries, keys, values, attn_mask=mask,
                                                               scale=attn.scaling, enable_gqa=True)
        return out.transpose(1, 2)
    out, _ = home.eager_attention_forward(attn, queries, keys, values, mask, dropout=0.0, scaling=attn.scaling,
                                          sliding_window=getattr(attn, "sliding_window", None))
    return out


def run_layer(layer: Any, hidden: torch.Tensor, mask: torch.Tensor,
              position_embeddings: tuple[torch.Tensor, torch.Tensor], cache: Any,
              sel: Optional[torch.Tensor]) -> torch.Tensor:
    """The decoder `layer` on `hidden` [N, Q, H], as its own forward computes it: every row's keys and values
    (into `cache`), then the queries, attention, residual and MLP of rows `sel` [N, R] only (all rows when None);
    returns `hidden` with those rows replaced by their outputs."""
    attn = layer.self_attn
    home = sys.modules[type(attn).__module__]  # the model's own rotary and attention functions
    n, q = hidden.shape[:2]
    x = layer.input_layernorm(hidden)
    keys = attn.k_proj(x).view(n, q, -1, attn.head_dim)
    keys = (attn.k_norm(keys) if hasattr(attn, "k_norm") else keys).transpose(1, 2)
    values = attn.v_proj(x).view(n, q, -1, attn.head_dim).transpose(1, 2)
    cos, sin = position_embeddings
    if sel is not None:
        x, cos_q, sin_q, mask, base = (take_rows(x, sel), take_rows(cos, sel), take_rows(sin, sel),
                                       torch.take_along_dim(mask, sel[:, None, :, None], dim=2), take_rows(hidden, sel))
    else:
        cos_q, sin_q, base = cos, sin, hidden
    r = x.shape[1]
    queries = attn.q_proj(x).view(n, r, -1, attn.head_dim)
    queries = (attn.q_norm(queries) if hasattr(attn, "q_norm") else queries).transpose(1, 2)
    if sel is None:  # one call rotates both (the model's function always rotates two tensors)
        queries, keys = home.apply_rotary_pos_emb(queries, keys, cos, sin)
    else:  # the read rows' queries sit at their own positions
        queries = home.apply_rotary_pos_emb(queries, queries, cos_q, sin_q)[0]
        keys = home.apply_rotary_pos_emb(keys, keys, cos, sin)[1]
    if cache is not None:
        keys, values = cache.update(keys, values, attn.layer_idx)
    out = attention(attn, home, queries, keys, values, mask)
    rows = base + attn.o_proj(out.reshape(n, r, -1).contiguous())
    rows = rows + mlp_rows(layer, rows)
    return rows if sel is None else hidden.scatter(1, sel[..., None].expand(-1, -1, hidden.shape[-1]), rows)


def body(model: Any, sel: Optional[torch.Tensor], input_ids: torch.Tensor, position_ids: torch.Tensor,
         attention_mask: Optional[torch.Tensor], cache: Any) -> torch.Tensor:
    """The final-norm hidden states [N, Q, H] of `model` on these inputs. For a layout `light_layers` accepts and
    an explicit mask, the layers run here (`run_layer`), the last over the rows `sel` [N, R] alone when given (the
    other rows' hidden states are then not their outputs: never read them); else the model's own forward."""
    inner = model.model
    if attention_mask is None or not light_layers(model):
        return inner(input_ids=input_ids, position_ids=position_ids, attention_mask=attention_mask, cache=cache,
                     use_cache=True).last_hidden_state
    hidden = inner.embed_tokens(input_ids)
    position_embeddings = inner.rotary_emb(hidden, position_ids)
    if attention_mask.dtype == torch.bool:  # SDPA would turn a bool mask into this in every layer
        attention_mask = torch.zeros(attention_mask.shape, dtype=hidden.dtype,
                                     device=hidden.device).masked_fill_(~attention_mask, float("-inf"))
    layers = inner.layers
    for i, layer in enumerate(layers):
        hidden = run_layer(layer, hidden, attention_mask, position_embeddings, cache,
                           sel if i == len(layers) - 1 else None)
    return inner.norm(hidden)
