"""`manifest.json`: everything the page needs to decode with an exported model, and proof of which files it means.

The page's decoder reads the block-diffusion facts (mask and stop ids, block size, logit alignment), the cache's shape
and the graph's input and output names from here, never from constants of its own, so one decoder serves every
exported model. `files` gives each file's size and sha256 (the page may check what it downloaded); `source` gives the
sha256 of the checkpoint files the export was made from, so a stale export (weights retrained, export not redone) is
detected by comparing hashes (tests/lib/test_web_shipped.py does for the bundled exports).

`FORMAT` names the layout of this file; a reader refuses another.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Iterable

from .storage import StorageReport

FORMAT = "s2d2-web-model/1"
MANIFEST_FILE = "manifest.json"
SOURCE_FILES = ("config.json", "model.safetensors", "tokenizer.json")
_DTYPES = {1: "float32", 7: "int64", 9: "bool", 10: "float16", 16: "bfloat16"}  # onnx.TensorProto codes


def sha256(path: Path) -> str:
    """Hex sha256 of a file, read in chunks."""
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def file_facts(folder: Path, names: Iterable[str]) -> dict[str, dict[str, Any]]:
    """{name: {bytes, sha256}} for files of a folder that exist."""
    return {n: {"bytes": (folder / n).stat().st_size, "sha256": sha256(folder / n)}
            for n in names if (folder / n).is_file()}


def graph_io(values: Iterable[Any]) -> list[dict[str, Any]]:
    """[{name, dtype, shape}] of an ONNX graph's inputs or outputs; a dynamic axis is named by its string."""
    out = []
    for v in values:
        t = v.type.tensor_type
        shape = [d.dim_param if d.dim_param else int(d.dim_value) for d in t.shape.dim]
        out.append({"name": v.name, "dtype": _DTYPES.get(t.elem_type, str(t.elem_type)), "shape": shape})
    return out


def architecture(config: Any, experts: str | None) -> dict[str, Any]:
    """Layer, head and cache sizes of a native config (the cache tensors are [1, kv_heads, length, head_dim])."""
    from ..models.onnx_forward import cache_shape

    layers, kv_heads, head_dim = cache_shape(config)
    out: dict[str, Any] = {"layers": layers, "heads": int(config.num_attention_heads), "kv_heads": kv_heads,
                           "head_dim": head_dim, "hidden_size": int(config.hidden_size)}
    if experts is not None:
        out["experts"] = {"routed": int(config.n_routed_experts), "per_token": int(config.num_experts_per_tok),
                          "shared": int(getattr(config, "n_shared_experts", 0) or 0), "implementation": experts}
    return out


def decoding(spec: Any) -> dict[str, Any]:
    """The facts the block loop reads from the model (s2d2.models.base.ModelSpec)."""
    return {"mask_id": spec.mask_id, "stop_ids": list(spec.stop_ids), "block_size": spec.default_block,
            "alignment": spec.alignment, "verifier": spec.verifier, "vocab_size": spec.vocab_size,
            "max_positions": spec.max_positions, "use_chat_template": spec.use_chat_template}


def versions() -> dict[str, str]:
    """The exporting software, for the record."""
    import onnx
    import torch
    from importlib.metadata import version

    from .. import __version__

    return {"s2d2": __version__, "torch": torch.__version__, "transformers": version("transformers"),
            "onnx": onnx.__version__}


def build_manifest(folder: Path, hf: Any, source: Path, *, params: int, experts: str | None, opset: int,
                   storage: StorageReport, files: tuple[str, ...]) -> dict[str, Any]:
    """The manifest of an export in `folder` (its files already written) of the loaded model `hf`."""
    import onnx

    graph = onnx.load(str(folder / files[0]), load_external_data=False).graph
    tok = hf.tokenizer
    return {
        "format": FORMAT,
        "model": hf.spec.name,
        "family": hf.spec.extra.get("family", ""),
        "model_class": type(hf.model).__name__,
        "parameters": params,
        "decoding": decoding(hf.spec),
        "architecture": architecture(hf.model.config, experts),
        "graph": {
            "file": files[0], "opset": opset, "compute_dtype": "float32",
            "weights": {"bfloat16": storage.bfloat16, "float32": storage.float32, "tied": storage.tied,
                        "note": "bfloat16 initializers are cast to float32 in the graph (exact)"},
            "inputs": graph_io(graph.input), "outputs": graph_io(graph.output),
            "cache": {"layout": "[1, kv_heads, length, head_dim]", "dtype": "float32",
                      "after_forward": "each present tensor holds past + queries positions; keep the first "
                                       "past + keep of them (keep = the query rows the decoder stores)"},
        },
        "tokenizer": {"file": files[1], "chat_template": getattr(tok, "chat_template", None),
                      "eos_token": getattr(tok, "eos_token", None), "pad_token": getattr(tok, "pad_token", None),
                      "add_special_tokens": False},
        "exporter": {"tool": "torch.onnx.export (TorchScript)", **versions()},
        "source": file_facts(source, SOURCE_FILES),
        "files": file_facts(folder, files),
    }


def write_manifest(folder: Path, hf: Any, source: Path, **facts: Any) -> dict[str, Any]:
    """Build the manifest and write it as folder/manifest.json (sorted keys, so an unchanged export is unchanged)."""
    manifest = build_manifest(folder, hf, source, **facts)
    (folder / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2, sort_keys=True, ensure_ascii=False) + "\n",
                                        encoding="utf-8")
    return manifest


def read_manifest(folder: Path) -> dict[str, Any]:
    """A manifest from disk, refusing (ValueError) another format."""
    manifest = json.loads((folder / MANIFEST_FILE).read_text(encoding="utf-8"))
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ValueError(f"{folder.name}/{MANIFEST_FILE}: not a {FORMAT} manifest")
    return manifest
