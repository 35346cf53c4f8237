"""Storing an exported graph's weights at half the size with exactly the same arithmetic.

The bundled models' weights are bfloat16 on disk and computed in float32 in the page. Every float32 initializer whose
values are all bfloat16 values (the low 16 bits of each float32 are zero) is stored as a bfloat16 initializer followed
by a `Cast` to float32: the cast is exact, so the graph computes exactly what the float32 graph computes, and ONNX
Runtime folds the cast into a float32 constant when the session starts (its constant folding), so no forward pays for
it. float16 would not do: some bfloat16 weights lie below float16's normal range and would round (measured: a few
values in most tensors of both bundled models).

A tied output head is a second copy of the embedding matrix, transposed (the exporter writes both). It is replaced by a
`Transpose` of the embedding, also folded at session start, so the file holds the matrix once.

Invariant: the rewritten graph's outputs equal the original graph's bit for bit (tested).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
from onnx import helper, numpy_helper


@dataclass(frozen=True)
class StorageReport:
    """What the rewrite did: counts of initializers by how they are stored, and the bytes before and after."""

    bfloat16: int
    float32: int
    tied: int
    bytes_before: int
    bytes_after: int


def is_bfloat16_exact(values: np.ndarray) -> bool:
    """True when every float32 value is a bfloat16 value (its low 16 bits are zero: truncation loses nothing)."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    return bool(np.all((bits & 0xFFFF) == 0))


def bfloat16_tensor(values: np.ndarray, name: str) -> onnx.TensorProto:
    """A BFLOAT16 initializer holding `values` (which must be bfloat16-exact) as their high 16 bits."""
    high = (np.ascontiguousarray(values, dtype=np.float32).view(np.uint32) >> 16).astype("<u2")
    tensor = onnx.TensorProto()
    tensor.name = name
    tensor.data_type = onnx.TensorProto.BFLOAT16
    tensor.dims.extend(values.shape)
    tensor.raw_data = high.tobytes()
    return tensor


def compact(model: onnx.ModelProto) -> StorageReport:
    """Rewrite `model` in place: tied transposed copies become a Transpose, bfloat16-exact float32 initializers
    become bfloat16 + Cast. Nodes are inserted at the front of the graph (their inputs are initializers only)."""
    graph = model.graph
    before = sum(len(t.raw_data) or numpy_helper.to_array(t).nbytes for t in graph.initializer)
    arrays = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    tied = _tied_transposes(arrays)
    kept: list[onnx.TensorProto] = []
    nodes: list[onnx.NodeProto] = []
    counts = {"bfloat16": 0, "float32": 0}
    for name, values in arrays.items():
        if name in tied:
            nodes.append(helper.make_node("Transpose", [tied[name]], [name], perm=[1, 0], name=f"tied/{name}"))
            continue
        if values.dtype == np.float32 and values.size and is_bfloat16_exact(values):
            stored = f"{name}.bf16"
            kept.append(bfloat16_tensor(values, stored))
            nodes.append(helper.make_node("Cast", [stored], [name], to=onnx.TensorProto.FLOAT, name=f"cast/{name}"))
            counts["bfloat16"] += 1
            continue
        kept.append(numpy_helper.from_array(values, name))
        counts["float32"] += values.dtype == np.float32
    del graph.initializer[:]
    graph.initializer.extend(kept)
    rest = list(graph.node)
    del graph.node[:]
    graph.node.extend(nodes + rest)
    after = sum(len(t.raw_data) or numpy_helper.to_array(t).nbytes for t in graph.initializer)
    return StorageReport(counts["bfloat16"], counts["float32"], len(tied), before, after)


def _tied_transposes(arrays: dict[str, np.ndarray]) -> dict[str, str]:
    """{copy: source} for 2-D float32 initializers that are exactly another's transpose (a tied output head)."""
    by_shape: dict[tuple[int, ...], list[str]] = {}
    for name, a in arrays.items():
        if a.ndim == 2 and a.dtype == np.float32:
            by_shape.setdefault(a.shape, []).append(name)
    out: dict[str, str] = {}
    for name, a in arrays.items():
        if a.ndim != 2 or a.dtype != np.float32 or a.shape[0] == a.shape[1] or name in out.values():
            continue
        for other in by_shape.get((a.shape[1], a.shape[0]), []):
            if other not in out and np.array_equal(arrays[other].T, a):
                out[name] = other
                break
    return out
