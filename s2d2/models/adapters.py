"""LoRA adapters (D2F's: `SJTU-Deng-Lab/D2F_*_Lora`) applied with peft and merged into the native model at load.

A D2F checkpoint is a base model (LLaDA-8B-Instruct, Dream-v0-Base-7B) plus a peft LoRA adapter trained on the
base's *official* module names. The adapter is read from `adapter_config.json` + `adapter_model.safetensors`
(safetensors only, never pickle), its module names are mapped to the native class's (for LLaDA through
llada.module_to_native; Dream's names are Qwen2's already), peft injects the LoRA layers into exactly those
modules, loads the weights, and `merge_and_unload` folds them into the base weights: W + (alpha / r)·B·A, the
same function as the unmerged adapter (float round-off apart) with no extra matmul per forward, which is the
faster path for inference.

Refused with a clear error: an adapter type other than LoRA, DoRA, `fan_in_fan_out`, LoRA biases, per-module rank
or alpha patterns, `modules_to_save` (full copies of base modules), a weight name outside the base's map, and
adapter weights that would leave an injected layer half loaded.
"""
from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any, Callable, Mapping

import torch

PREFIX = "base_model.model."
CONFIG = "adapter_config.json"
WEIGHTS = "adapter_model.safetensors"


class AdapterError(ValueError):
    """An adapter folder that cannot be applied exactly; the message says why."""


def is_adapter_folder(folder: Path) -> bool:
    return (folder / CONFIG).is_file() and not (folder / "config.json").is_file()


def read_adapter(folder: Path) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """(adapter_config.json, {official module path: {"lora_A": A, "lora_B": B}}) of an adapter folder."""
    from safetensors.torch import load_file

    path = folder / CONFIG
    if not path.is_file():
        raise AdapterError(f"{folder} has no {CONFIG}: not a peft adapter folder")
    try:
        config = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise AdapterError(f"{path} is not valid JSON: {e}") from e
    weights = folder / WEIGHTS
    if not weights.is_file():
        legacy = [p.name for p in folder.glob("adapter_model.*")]
        why = f"only {legacy[0]} (pickle), and S2D2 loads safetensors only" if legacy else f"no {WEIGHTS}"
        raise AdapterError(f"{folder} has {why}")
    _check_config(config, path)
    return config, load_file(str(weights))


def _check_config(config: Mapping[str, Any], path: Path) -> None:
    if str(config.get("peft_type", "")).upper() != "LORA":
        raise AdapterError(f"{path}: peft_type {config.get('peft_type')!r}; only LoRA adapters are supported")
    for field, ok in (("use_dora", False), ("fan_in_fan_out", False)):
        if bool(config.get(field, False)) != ok:
            raise AdapterError(f"{path}: {field} = {config[field]!r} is not supported")
    if config.get("bias", "none") != "none":
        raise AdapterError(f"{path}: bias = {config['bias']!r}; only bias 'none' is supported")
    for field in ("rank_pattern", "alpha_pattern", "modules_to_save"):
        if config.get(field):
            raise AdapterError(f"{path}: {field} is set; per-module patterns and saved module copies are not "
                               "supported")


def lora_pairs(weights: Mapping[str, torch.Tensor], to_native: Callable[[str], str]) -> dict[str, dict[str, Any]]:
    """{native module path: {"lora_A": A, "lora_B": B}} from adapter tensors named
    `base_model.model.<official module>.lora_{A,B}.weight`."""
    out: dict[str, dict[str, Any]] = {}
    for name, tensor in weights.items():
        body = name[len(PREFIX):] if name.startswith(PREFIX) else name
        module, _, kind = body.rpartition(".lora_")
        if kind not in ("A.weight", "B.weight"):
            raise AdapterError(f"adapter weight {name!r} is not a LoRA A/B matrix")
        try:
            native = to_native(module)
        except KeyError:
            raise AdapterError(f"adapter weight {name!r} targets a module the base model does not have") from None
        out.setdefault(native, {})["lora_" + kind[0]] = tensor
    broken = [m for m, ab in out.items() if set(ab) != {"lora_A", "lora_B"}]
    if broken:
        raise AdapterError(f"adapter module {broken[0]!r} has only one of its two LoRA matrices")
    if not out:
        raise AdapterError("the adapter holds no LoRA weights")
    return out


def merge_lora(model: Any, config: Mapping[str, Any], pairs: Mapping[str, Mapping[str, torch.Tensor]]) -> Any:
    """Inject the LoRA layers with peft, load `pairs`, merge them into the base weights; returns the base model."""
    from peft import LoraConfig, get_peft_model, set_peft_model_state_dict

    dtype = next(model.parameters()).dtype
    lora = LoraConfig(r=int(config["r"]), lora_alpha=float(config.get("lora_alpha", config["r"])), lora_dropout=0.0,
                      target_modules=sorted(pairs), bias="none", use_rslora=bool(config.get("use_rslora", False)))
    with warnings.catch_warnings():  # peft asks transformers 5.x a deprecated question (is_gradient_checkpointing)
        warnings.filterwarnings("ignore", category=FutureWarning)
        peft_model = get_peft_model(model, lora, autocast_adapter_dtype=False)
    state = {f"{PREFIX}{m}.{k}.weight": t.to(dtype) for m, ab in pairs.items() for k, t in ab.items()}
    expected = {k for k in peft_model.state_dict() if ".lora_" in k}
    result = set_peft_model_state_dict(peft_model, state)
    missing = sorted(k for k in getattr(result, "missing_keys", []) if ".lora_" in k)
    loaded = {k.replace(".default.", ".") for k in expected} - {k.replace(".default.", ".") for k in missing}
    if missing or len(loaded) != len(state):
        raise AdapterError(f"{len(missing)} LoRA weights were not loaded (e.g. {missing[:2]}); the adapter does "
                           "not match the base model")
    return peft_model.merge_and_unload().eval()


def apply_adapter(model: Any, folder: Path, to_native: Callable[[str], str]) -> tuple[Any, dict[str, Any]]:
    """Read, map, inject and merge the adapter at `folder`; returns (merged model, adapter facts for the spec)."""
    config, weights = read_adapter(folder)
    pairs = lora_pairs(weights, to_native)
    try:
        merged = merge_lora(model, config, pairs)
    except AdapterError:
        raise
    except Exception as e:  # a shape mismatch between adapter and base, a peft refusal
        raise AdapterError(f"could not apply the adapter in {folder}: {str(e).splitlines()[0]}") from e
    facts = {"adapter": str(folder), "adapter_rank": int(config["r"]), "adapter_modules": len(pairs),
             "adapter_base": str(config.get("base_model_name_or_path") or "")}
    return merged, facts


def write_adapter(folder: Path, pairs: Mapping[str, Mapping[str, torch.Tensor]], r: int, alpha: float,
                  base: str = "") -> Path:
    """Save LoRA matrices under their (official) module paths as a peft adapter folder (tests, tiny adapters)."""
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    tensors = {f"{PREFIX}{m}.{k}.weight": t.detach().contiguous().clone() for m, ab in pairs.items()
               for k, t in ab.items()}
    save_file(tensors, str(folder / WEIGHTS), metadata={"format": "pt"})
    targets = sorted({m.rsplit(".", 1)[-1] for m in pairs})
    config = {"peft_type": "LORA", "task_type": None, "r": r, "lora_alpha": alpha, "lora_dropout": 0.0,
              "target_modules": targets, "bias": "none", "fan_in_fan_out": False, "inference_mode": True,
              "use_rslora": False, "use_dora": False, "modules_to_save": None, "init_lora_weights": True,
              "layers_to_transform": None, "layers_pattern": None, "rank_pattern": {}, "alpha_pattern": {},
              "base_model_name_or_path": base, "revision": None}
    (folder / CONFIG).write_text(json.dumps(config, indent=2) + "\n")
    return folder
