"""`python -m s2d2 export-web`: a checkpoint's forward as an ONNX graph plus the manifest the page decodes with.

Steps: refuse a checkpoint too big for a browser before reading its weights (limits.py); load it in float32 on the
CPU with SDPA attention and the dynamic cache (MoE experts on `batched_mm`, which the exporter can trace); trace
`CacheForward` (s2d2/models/onnx_forward.py) with TorchScript's ONNX exporter at opset `OPSET`, dynamic in the query
count and the cache length; store the weights as bfloat16 where that is exact (storage.py); write `model.onnx`, the
tokenizer and `manifest.json` (manifest.py) into the output folder.

Why TorchScript's exporter: it traces the bundled models in seconds, and its graphs run unchanged in onnxruntime-web;
the dynamo exporter also works but takes ~100 s per model (issue 36's prototype). The trace follows one example
shape, so the graph must not branch on shapes: the round trip (roundtrip.py) checks other query counts and cache
lengths, including an empty cache and one query.
"""
from __future__ import annotations

import io
import shutil
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..models.onnx_forward import (
    ATTENTION_MASK, INPUT_IDS, LOGITS, POSITION_IDS, CacheForward, cache_shape, input_names, output_names,
    past_names, present_names, use_batched_experts,
)
from .limits import folder_params, registry_params, too_big
from .manifest import write_manifest
from .storage import StorageReport, compact

OPSET = 18
MODEL_FILE = "model.onnx"
TOKENIZER_FILE = "tokenizer.json"
EXAMPLE_CACHE, EXAMPLE_QUERY = 5, 3  # the traced example's shape (any shape works at run time)


@dataclass(frozen=True)
class Exported:
    """Where an export went, its manifest and how its weights were stored."""

    folder: Path
    manifest: dict[str, Any]
    storage: StorageReport


def default_folder(name: str) -> Path | None:
    """assets/web/<name> for a bundled model (where the app serves it from), None for any other checkpoint."""
    from ..models.registry import ASSETS, lookup

    entry = lookup(name)
    return ASSETS / "web" / entry.name if entry is not None and entry.path is not None else None


def check_size(name: str) -> None:
    """Refuse (ValueError, one line) what export-web does not take, before any load or download: a registry entry or
    local folder over the parameter limit, and any name that is neither a bundled model, a registry entry nor a
    local folder (a Hub id is not downloaded to be measured: download it first and pass its folder)."""
    from ..models.registry import lookup

    entry = lookup(name)
    folder = Path(name).expanduser()
    if folder.is_dir():
        why = too_big(folder_params(folder), name)
    elif entry is not None and entry.path is not None:
        why = too_big(folder_params(entry.path), entry.name)
    elif entry is not None:
        why = too_big(registry_params(entry.size_gb), entry.name)
    else:
        why = (f"unknown model {name!r}: export-web takes tiny, tiny-llada2 or a local checkpoint folder (download a "
               "Hub checkpoint first and pass its folder)")
    if why:
        raise ValueError(why)


def export_web(name: str, out: Path | None = None) -> Exported:
    """Export checkpoint `name` (a bundled model or a local checkpoint folder) into `out` (default:
    `default_folder`). Everything refusable is refused before the output folder is touched."""
    from ..models.loading import load_model

    folder = out if out is not None else default_folder(name)
    if folder is None:
        raise ValueError(f"--out: give a folder for {name!r} (only the bundled models have a default)")
    check_size(name)
    hf = load_model(name, device="cpu", dtype="float32", attn_implementation="sdpa", backend="dynamic")
    params = sum(p.numel() for p in hf.model.parameters())
    why = too_big(params, name) or unsupported(hf.model.config)
    source = Path(hf.spec.extra["folder"])
    if not why and not (source / TOKENIZER_FILE).is_file():
        why = f"{name}: no {TOKENIZER_FILE} in the checkpoint folder (the page encodes prompts with it)"
    if why:
        raise ValueError(why)
    experts = use_batched_experts(hf.model)
    graph = trace(hf.model)
    storage = compact(graph)
    folder.mkdir(parents=True, exist_ok=True)
    import onnx

    onnx.save(graph, str(folder / MODEL_FILE))
    shutil.copyfile(source / TOKENIZER_FILE, folder / TOKENIZER_FILE)
    manifest = write_manifest(folder, hf, source, params=params, experts="batched_mm" if experts else None,
                              opset=OPSET, storage=storage, files=(MODEL_FILE, TOKENIZER_FILE))
    return Exported(folder, manifest, storage)


def unsupported(config: Any) -> str | None:
    """Why a loaded model's forward cannot be exported as this graph, or None."""
    kinds = set(getattr(config, "layer_types", None) or ["full_attention"])
    if kinds != {"full_attention"} or getattr(config, "use_sliding_window", False):
        return f"export-web supports full-attention layers only (this model has {sorted(kinds)})"
    return None


def example_inputs(config: Any) -> tuple[torch.Tensor, ...]:
    """The traced example: EXAMPLE_QUERY tokens after EXAMPLE_CACHE cached ones, a causal (not all-True) mask so
    no all-visible shortcut is traced in."""
    layers, kv_heads, head_dim = cache_shape(config)
    p, q = EXAMPLE_CACHE, EXAMPLE_QUERY
    ids = torch.arange(4, 4 + q)[None]
    positions = torch.arange(p, p + q)[None]
    mask = torch.ones(q, p + q, dtype=torch.bool)
    mask[:, p:] = torch.tril(mask[:, p:])
    past = [torch.zeros(1, kv_heads, p, head_dim) for _ in range(2 * layers)]
    return (ids, positions, mask[None, None], *past)


def dynamic_axes(layers: int) -> dict[str, dict[int, str]]:
    """Which axes vary: the query count `queries`, the cache length `past` and their sum `total`."""
    axes: dict[str, dict[int, str]] = {INPUT_IDS: {1: "queries"}, POSITION_IDS: {1: "queries"},
                                       ATTENTION_MASK: {2: "queries", 3: "total"}, LOGITS: {1: "queries"}}
    axes.update({n: {2: "past"} for n in past_names(layers)})
    axes.update({n: {2: "total"} for n in present_names(layers)})
    return axes


def trace(model: Any) -> Any:
    """The ONNX ModelProto of `CacheForward(model)` (TorchScript exporter, float32 throughout). An MoE model's
    experts are switched to `batched_mm` first (the same function, traceable)."""
    import onnx

    use_batched_experts(model)
    layers = cache_shape(model.config)[0]
    buffer = io.BytesIO()
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # tracer warnings about Python branches; the round trip checks the graph
        torch.onnx.export(CacheForward(model), example_inputs(model.config), buffer, input_names=input_names(layers),
                          output_names=output_names(layers), dynamic_axes=dynamic_axes(layers), opset_version=OPSET,
                          dynamo=False, do_constant_folding=True)
    graph = onnx.load_from_string(buffer.getvalue())
    for value in list(graph.graph.input) + list(graph.graph.output):
        value.type.tensor_type.shape.dim[0].dim_value = 1  # one sequence; the tracer may name this axis instead
    return graph
