"""Reading a checkpoint's safetensors and checking that a strict load filled every weight.

Shared by the loaders of official (non-transformers) layouts (llada.py, llada2.py) and the native one
(loading.py): a weight left random decodes garbage, so any missing or mismatched key is an error. The writers of
those layouts (tests' tiny checkpoints, the bundled LLaDA2 model) share `model_state` and `write_folder`."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Mapping, Optional

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


def model_state(model: Any) -> dict[str, torch.Tensor]:
    """A model's state dict without the output head when it is tied to the embeddings (official files omit it)."""
    state = dict(model.state_dict())
    if model.config.tie_word_embeddings:
        state.pop("lm_head.weight", None)
    return state


def write_folder(folder: Path, tensors: Mapping[str, torch.Tensor], config: dict[str, Any],
                 dtype: Optional[torch.dtype] = None,
                 keep_fp32: Callable[[str], bool] = lambda name: False) -> dict[str, Any]:
    """Write `tensors` as folder/model.safetensors (floating ones cast to `dtype`, except names `keep_fp32` keeps)
    and `config` as folder/config.json (its torch_dtype set to `dtype`); returns the config written."""
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    cast = {k: (v.to(dtype) if dtype is not None and v.is_floating_point() and not keep_fp32(k) else v)
            .detach().contiguous().clone() for k, v in tensors.items()}
    save_file(cast, str(folder / "model.safetensors"), metadata={"format": "pt"})
    if dtype is not None:
        config["torch_dtype"] = str(dtype).replace("torch.", "")
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    return config
