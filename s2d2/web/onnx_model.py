"""An exported model run by onnxruntime (Python, CPU) behind the decoder's model interface.

`OnnxModel.forward` keeps `HFModel.forward`'s contract (cache, ids, positions, attention, keep, last, rows -> float32
logits), so `s2d2.generate` decodes with the exported graph exactly as with torch: the round trip (roundtrip.py) runs
both and compares forwards and whole decodes. It is also the reference for the page's decoder, which drives the same
graph the same way from JavaScript: widen the query's mask behind all-True cache columns, feed the past, keep the first
`past + keep` positions of every present tensor.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..models.base import Attention, ModelSpec, QueryMask
from ..models.masks import causal_mask, full_mask, widen
from .manifest import read_manifest


class OnnxCache:
    """The KV cache as numpy arrays [1, kv_heads, length, head_dim] per layer, key then value (the graph's order)."""

    def __init__(self, layers: int, kv_heads: int, head_dim: int) -> None:
        self.tensors = [np.zeros((1, kv_heads, 0, head_dim), dtype=np.float32) for _ in range(2 * layers)]

    def get_seq_length(self) -> int:
        return int(self.tensors[0].shape[2])

    def crop(self, length: int) -> None:
        """Keep the first `length` positions, or drop the last `-length` (DynamicCache.crop's convention)."""
        end = length if length >= 0 else self.get_seq_length() + length
        self.tensors = [t[:, :, :end] for t in self.tensors]


def full_attention(attention: Attention, cache_len: int, q: int) -> torch.Tensor:
    """The [q, cache_len + q] bool mask of any attention the decoder passes ("causal", "full", a tensor, a
    QueryMask); the graph always takes the full mask."""
    if isinstance(attention, QueryMask):
        return widen(attention.pattern, cache_len)
    if isinstance(attention, str):
        return causal_mask(cache_len, q) if attention == "causal" else full_mask(cache_len, q)
    return attention


class OnnxModel:
    """An export folder (model.onnx + manifest.json) as a decoder model on the CPU."""

    attn_implementation = "onnxruntime"
    device = torch.device("cpu")
    dtype = torch.float32

    def __init__(self, folder: Path, tokenizer: Any = None, threads: int = 1) -> None:
        import onnxruntime as ort

        self.manifest = read_manifest(folder)
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        self.session = ort.InferenceSession(str(folder / self.manifest["graph"]["file"]), options,
                                            providers=["CPUExecutionProvider"])
        d, a = self.manifest["decoding"], self.manifest["architecture"]
        self.spec = ModelSpec(name=f"{self.manifest['model']} (onnx)", alignment=d["alignment"], mask_id=d["mask_id"],
                              stop_ids=list(d["stop_ids"]), vocab_size=d["vocab_size"],
                              max_positions=d["max_positions"], default_block=d["block_size"],
                              use_chat_template=d["use_chat_template"])
        self.shape = (a["layers"], a["kv_heads"], a["head_dim"])
        self.tokenizer = tokenizer
        self.names = [i.name for i in self.session.get_inputs()]

    def new_cache(self) -> OnnxCache:
        return OnnxCache(*self.shape)

    def run(self, cache: OnnxCache, ids: np.ndarray, positions: np.ndarray, mask: np.ndarray) -> list[np.ndarray]:
        """One graph run: [logits [1, q, V], present tensors...] (the cache is not changed)."""
        feeds = {self.names[0]: ids[None].astype(np.int64), self.names[1]: positions[None].astype(np.int64),
                 self.names[2]: mask[None, None].astype(bool)}
        feeds.update(zip(self.names[3:], cache.tensors))
        return self.session.run(None, feeds)

    def forward(self, cache: OnnxCache, input_ids: torch.Tensor, positions: torch.Tensor, attention: Attention,
                keep: int, last: int | None = None, rows: torch.Tensor | None = None) -> torch.Tensor:
        """`HFModel.forward`'s contract on the exported graph."""
        q, past = int(input_ids.shape[0]), cache.get_seq_length()
        mask = full_attention(attention, past, q)
        if tuple(mask.shape) != (q, past + q):
            raise ValueError(f"attention mask shape {tuple(mask.shape)} != {(q, past + q)}")
        out = self.run(cache, input_ids.numpy(), positions.numpy(), mask.numpy())
        cache.tensors = [t[:, :, : past + keep] for t in out[1:]]
        logits = torch.from_numpy(out[0][0])
        if last:
            logits = logits[-last:]
        return logits if rows is None else logits.index_select(0, rows)
