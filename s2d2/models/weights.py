"""Reading a checkpoint's safetensors and checking that a strict load filled every weight.

Shared by the loaders of official (non-transformers) layouts (llada.py, llada2.py) and the native one
(loading.py): a weight left random decodes garbage, so any missing or mismatched key is an error."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping, Optional

import torch


def read_safetensors(folder: Path) -> dict[str, torch.Tensor]:
    """Every tensor of the folder's *.safetensors files (a sharded index or single files); never pickle."""
    from safetensors.torch import load_file

    index = folder / "model.safetensors.index.json"
    if index.is_file():
        files = sorted(set(json.loads(index.read_text())["weight_map"].values()))
    else:
        files = sorted(p.name for p in folder.glob("*.safetensors"))
    weights: dict[str, torch.Tensor] = {}
    for name in files:
        weights.update(load_file(str(folder / name)))
    return weights


def unfilled(info: Mapping[str, Any]) -> Optional[str]:
    """None when `from_pretrained(..., output_loading_info=True)` filled every weight; otherwise
    "N missing and M mismatched weights (e.g. ...)"."""
    missing = sorted(info.get("missing_keys") or [])
    mismatched = list(info.get("mismatched_keys") or [])
    if not (missing or mismatched):
        return None
    shown = ", ".join(map(str, (missing + mismatched)[:4]))
    return f"{len(missing)} missing and {len(mismatched)} mismatched weights (e.g. {shown})"


def unexpected(info: Mapping[str, Any]) -> list[str]:
    """The checkpoint's keys the model has no place for (reported, not fatal)."""
    return list(info.get("unexpected_keys") or [])
