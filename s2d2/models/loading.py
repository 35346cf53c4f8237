"""Turning checkpoints into `HFModel`s (docs/model-families.md, 'Loading checkpoints').

Every source (registry name, Hub id, local folder) is first resolved to a local folder, then loaded by one
code path: native concrete class, explicit dtype and attention backend, safetensors only, no remote code.
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Iterable

import torch

from ..limits import value_text
from ..suggest import did_you_mean
from . import dream, llada, llada2
from .adapters import AdapterError, apply_adapter, is_adapter_folder
from .base import ALIGNMENTS, ModelSpec
from .hf import BACKENDS, HFModel
from .hub import ModelLoadError, fetch_from_hub
from .logs import first_line, quiet
from .registry import ModelEntry, known_models, lookup
from .tokens import load_tokenizer, resolve_mask_id, resolve_stop_ids
from .weights import unexpected, unfilled


# model_type / architectures (lower-cased) -> native class name. SDAR and Fast-dLLM ship remote code that
# does not run on transformers 5.x, but their weights match these classes exactly.
_BY_MODEL_TYPE = {
    "qwen3": "Qwen3ForCausalLM",
    "sdar": "Qwen3ForCausalLM",
    "qwen3_moe": "Qwen3MoeForCausalLM",
    "sdar_moe": "Qwen3MoeForCausalLM",
    "qwen2": "Qwen2ForCausalLM",
    "fast_dllm_qwen": "Qwen2ForCausalLM",
    llada2.MODEL_TYPE: "Glm4MoeForCausalLM",  # official LLaDA2 layout, mapped at load time (models/llada2.py)
    llada.MODEL_TYPE: "LlamaForCausalLM",  # official LLaDA (v1) layout, mapped at load time (models/llada.py)
    dream.MODEL_TYPE: "Qwen2ForCausalLM",  # Dream: Qwen2's names, right-shifted logits (models/dream.py)
}
_BY_ARCHITECTURE = {
    "qwen3forcausallm": "Qwen3ForCausalLM",
    "sdarforcausallm": "Qwen3ForCausalLM",
    "qwen3moeforcausallm": "Qwen3MoeForCausalLM",
    "sdarmoeforcausallm": "Qwen3MoeForCausalLM",
    "qwen2forcausallm": "Qwen2ForCausalLM",
    "fast_dllm_qwenforcausallm": "Qwen2ForCausalLM",
    llada2.ARCHITECTURE.lower(): "Glm4MoeForCausalLM",
    llada.ARCHITECTURE.lower(): "LlamaForCausalLM",
    dream.ARCHITECTURE.lower(): "Qwen2ForCausalLM",
}
# The native model_type for each class: the 5.x weight conversions (MoE expert packing) are keyed on it.
_NATIVE_TYPE = {"Qwen3ForCausalLM": "qwen3", "Qwen3MoeForCausalLM": "qwen3_moe", "Qwen2ForCausalLM": "qwen2"}

_DTYPES = {
    "bf16": torch.bfloat16, "bfloat16": torch.bfloat16, "fp16": torch.float16, "float16": torch.float16,
    "half": torch.float16, "fp32": torch.float32, "float32": torch.float32, "float": torch.float32,
    "fp64": torch.float64, "float64": torch.float64, "double": torch.float64,
}
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


# ---------------------------------------------------------------------------------------------------------
# Wrapping an in-memory model


def from_transformers(
    model: Any,
    tokenizer: Any = None,
    *,
    mask_token_id: int,
    stop_token_ids: Iterable[int],
    logits: str = "aligned",
    block_size: int | None = None,
    name: str | None = None,
    use_chat_template: bool | None = None,
    backend: str = "auto",
) -> HFModel:
    """Wrap a native transformers causal-LM object (and optional tokenizer) as an `HFModel`.

    `logits`: "aligned" (logit i predicts token i, SDAR) or "shifted" (logit i-1 predicts token i, Fast-dLLM).
    `backend`: "static" (preallocated cache + CUDA graphs), "dynamic" (DynamicCache), or "auto" (static on CUDA).
    """
    config = model.config
    vocab = int(config.vocab_size)
    head = model.get_output_embeddings()
    if head is not None and int(head.weight.shape[0]) != vocab:
        raise ModelLoadError(f"lm_head width {head.weight.shape[0]} != config.vocab_size {vocab}")
    if logits not in ALIGNMENTS:
        raise ModelLoadError(f"logits must be one of {ALIGNMENTS}, got {logits!r}")
    if not isinstance(mask_token_id, int) or not 0 <= mask_token_id < vocab:
        raise ModelLoadError(f"mask_token_id {mask_token_id!r} is not a token id in [0, {vocab})")
    stops = [int(s) for s in stop_token_ids]
    bad = [s for s in stops if not 0 <= s < vocab]
    if bad:
        raise ModelLoadError(f"stop_token_ids {bad} are outside the vocabulary [0, {vocab})")
    block = 4 if block_size is None else int(block_size)
    if block < 1:
        raise ModelLoadError(f"block_size must be >= 1, got {block}")
    if use_chat_template is None:
        use_chat_template = bool(getattr(tokenizer, "chat_template", None))
    spec = ModelSpec(
        name=name or getattr(config, "_name_or_path", "") or type(model).__name__,
        alignment=logits,
        mask_id=mask_token_id,
        stop_ids=stops,
        vocab_size=vocab,
        max_positions=int(config.max_position_embeddings),
        default_block=block,
        use_chat_template=use_chat_template,
        extra={"model_class": type(model).__name__},
    )
    try:
        return HFModel(model, tokenizer, spec, backend=backend)
    except ValueError as e:
        raise ModelLoadError(str(e)) from e


# ---------------------------------------------------------------------------------------------------------
# Loading a checkpoint


def load_model(
    id_or_path: str | os.PathLike[str],
    device: str | torch.device | None = None,
    dtype: str | torch.dtype | None = None,
    attn_implementation: str = "sdpa",
    backend: str = "auto",
    adapter: str | os.PathLike[str] | None = None,
) -> HFModel:
    """Load a registry name ("tiny", a Hub id) or a local checkpoint folder as an `HFModel`.

    `adapter`: a peft LoRA adapter (local folder or Hub id) merged into the weights at load (models/adapters.py);
    a registry entry may name one (the D2F checkpoints), and a local adapter folder loads onto the base its
    `adapter_config.json` names. Defaults: CUDA with bfloat16 when available, else CPU with float32; the forward
    backend is static on CUDA (see `from_transformers`). Raises `ModelLoadError` on any failure.
    """
    if backend not in BACKENDS:
        raise ModelLoadError(f"backend must be one of {BACKENDS}, got {backend!r}")
    folder, entry, revision, adapter_folder = _resolve_with_adapter(id_or_path, adapter)
    config = _read_config(folder)
    device, dtype = _device_and_dtype(device, dtype)
    facts = family_facts(config, entry)
    model, unexpected = _load_base(folder, config, entry, dtype, attn_implementation)
    extra: dict[str, Any] = {}
    if adapter_folder is not None:
        mapper = llada.module_to_native if llada.is_llada(config) else _same_name(model)
        try:
            model, extra = apply_adapter(model, adapter_folder, mapper)
        except AdapterError as e:
            raise ModelLoadError(str(e)) from e
    model.to(device)
    experts_for_dtype(model, dtype)
    tokenizer = load_tokenizer(folder)
    hf = from_transformers(
        model,
        tokenizer,
        mask_token_id=resolve_mask_id(tokenizer, config, entry, int(model.config.vocab_size), default=facts["mask"]),
        stop_token_ids=resolve_stop_ids(tokenizer, config, entry, folder, default=facts["stops"]),
        logits=facts["alignment"],
        block_size=facts["block"],
        name=entry.name if entry else str(id_or_path),
        use_chat_template=entry.use_chat_template if entry else None,
        backend=backend,
    )
    hf.spec.revision = revision
    hf.spec.extra.update(family=facts["family"], folder=str(folder), unexpected_keys=sorted(unexpected), **extra)
    return hf


def experts_for_dtype(model: Any, dtype: torch.dtype) -> None:
    """A MoE's experts (LLaDA2's) on transformers' eager path in float64: the grouped-matmul kernel it picks by
    default refuses float64 ("Expected mat_a to be Float32, BFloat16 or Float16 matrix, got Double"), so a float64
    load would fail at its first forward. Other dtypes and dense models keep their kernels."""
    if dtype == torch.float64 and hasattr(model, "set_experts_implementation") and _has_experts(model.config):
        model.set_experts_implementation("eager")


def _has_experts(config: Any) -> bool:
    return any(getattr(config, name, None) for name in ("num_experts", "n_routed_experts", "num_local_experts"))


def family_facts(config: dict[str, Any], entry: ModelEntry | None) -> dict[str, Any]:
    """What the decoder needs that config.json may leave out, per official family: logit alignment, block size,
    family defaults for the mask and stop ids (used only when the tokenizer, config and registry say nothing)."""
    model_type = str(config.get("model_type", "")).lower()
    kind = ("llada2" if llada2.is_llada2(config) else "llada" if llada.is_llada(config)
            else "dream" if dream.is_dream(config) else "")
    shifted = model_type == "fast_dllm_qwen" or "bd_size" in config or kind == "dream"
    alignment = config.get("logits_alignment") or (entry.alignment if entry else None)
    block = config.get("block_size") or config.get("bd_size") or (entry.block_size if entry else None)
    defaults = {"llada2": (llada2.MASK_ID, [llada2.EOS_ID]), "llada": (llada.MASK_ID, [llada.EOS_ID, llada.EOT_ID]),
                "dream": (dream.MASK_ID, list(dream.STOP_IDS))}
    mask, stops = defaults.get(kind, (None, []))
    return {"alignment": alignment or ("shifted" if shifted else "aligned"),
            "block": block or (D2F_BLOCK if kind in ("llada", "dream") else llada2.BLOCK if kind else None),
            "mask": mask, "stops": stops,
            "family": entry.family if entry else (kind or str(config.get("model_type", "")))}


D2F_BLOCK = 32  # the D2F checkpoints' block size (the reference demo's --block_size)


def _load_base(folder: Path, config: dict[str, Any], entry: ModelEntry | None, dtype: torch.dtype,
               attn: str) -> tuple[Any, list[str]]:
    if llada2.is_llada2(config):
        return _load_llada2(folder, config, dtype, attn)
    if llada.is_llada(config):
        return _load_llada(folder, config, dtype, attn)
    return _load_weights(folder, _model_class(entry, config, folder), dtype, attn)


def _same_name(model: Any) -> Any:
    """The adapter name map of a base whose official names are the native ones (Dream): identity, for modules
    that exist."""
    names = {name for name, _ in model.named_modules()}

    def mapper(module: str) -> str:
        if module not in names:
            raise KeyError(module)
        return module

    return mapper


def _resolve_with_adapter(id_or_path: str | os.PathLike[str], adapter: str | os.PathLike[str] | None,
                          ) -> tuple[Path, ModelEntry | None, str, Path | None]:
    """(base folder, entry, revision, adapter folder or None): an adapter named by the caller, by the registry
    entry, or by being the folder passed (its adapter_config.json then names the base)."""
    path = Path(os.fspath(id_or_path)).expanduser()
    if adapter is None and path.is_dir() and is_adapter_folder(path):
        base = _adapter_base(path)
        folder, entry, revision = resolve_checkpoint(base)
        return folder, entry, revision, path.resolve()
    folder, entry, revision = resolve_checkpoint(id_or_path)
    named = adapter if adapter is not None else (entry.adapter if entry is not None else None)
    return folder, entry, revision, None if named is None else _adapter_folder(named)


def _adapter_base(folder: Path) -> str:
    try:
        base = json.loads((folder / "adapter_config.json").read_text()).get("base_model_name_or_path")
    except (OSError, ValueError) as e:
        raise ModelLoadError(f"{folder}/adapter_config.json is not valid JSON: {first_line(e)}") from e
    if not base:
        raise ModelLoadError(f"{folder} is an adapter without base_model_name_or_path; pass the base model and "
                             "adapter=... instead")
    return str(base)


def _adapter_folder(adapter: str | os.PathLike[str]) -> Path:
    text = os.fspath(adapter)
    path = Path(text).expanduser()
    if path.is_dir():
        return path.resolve()
    if _HUB_ID.match(text):
        return fetch_from_hub(text)
    raise ModelLoadError(f"adapter: no adapter folder at {text!r} (pass a local folder or a Hub id)")


def resolve_checkpoint(id_or_path: str | os.PathLike[str]) -> tuple[Path, ModelEntry | None, str]:
    """(local folder, registry entry or None, revision) for a registry name, Hub id or folder."""
    text = os.fspath(id_or_path)
    path = Path(text).expanduser()
    if path.is_dir():
        return path.resolve(), lookup(text), ""
    if path.exists():
        raise ModelLoadError(f"{text!r} is a file; pass the checkpoint folder (with config.json) instead")
    entry = lookup(text)
    if entry is not None and entry.path is not None:
        if not entry.path.is_dir():
            raise ModelLoadError(f"bundled model {entry.name!r} is missing: no folder at {entry.path}")
        return entry.path, entry, ""
    if entry is not None or _HUB_ID.match(text):
        repo = entry.repo if entry is not None and entry.repo else text
        snapshot = fetch_from_hub(repo)
        return snapshot, entry, snapshot.name
    if text.startswith((".", "/", "~")) or os.sep in text:
        raise ModelLoadError(f"no checkpoint folder at {text!r}")
    names = known_models()
    bundled = [n for n in names if (e := lookup(n)) is not None and e.path is not None]
    raise ModelLoadError(  # the bundled models first: they run offline, and a long list may be cut
        f"unknown model {value_text(text)}{did_you_mean(text, names)}: pass a local checkpoint folder, a Hub id "
        f"(owner/name), or a known name: bundled {', '.join(bundled)}; on the Hub "
        f"{', '.join(n for n in names if n not in bundled)}"
    )


def _read_config(folder: Path) -> dict[str, Any]:
    path = folder / "config.json"
    if not path.is_file():
        raise ModelLoadError(f"{folder} has no config.json: not a transformers checkpoint folder")
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise ModelLoadError(f"{path} is not valid JSON: {first_line(e)}") from e


def _model_class(entry: ModelEntry | None, config: dict[str, Any], folder: Path) -> str:
    """The concrete native class: the registry's, else from model_type, else from architectures."""
    if entry is not None and entry.path is None:
        return entry.model_class
    found = _BY_MODEL_TYPE.get(str(config.get("model_type", "")).lower())
    for arch in config.get("architectures") or []:
        found = found or _BY_ARCHITECTURE.get(str(arch).lower())
    if found is None:
        raise ModelLoadError(
            f"{folder}: unsupported model_type {config.get('model_type')!r} / architectures "
            f"{config.get('architectures')} (supported: {', '.join(sorted(_BY_MODEL_TYPE))})"
        )
    return found


def _device_and_dtype(device: str | torch.device | None, dtype: str | torch.dtype | None) -> tuple[torch.device, torch.dtype]:
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        device = torch.device(device)
    except (RuntimeError, TypeError) as e:
        raise ModelLoadError(f"invalid device {device!r}") from e
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ModelLoadError("device 'cuda' was requested but CUDA is not available")
    if dtype is None:
        dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    elif isinstance(dtype, str):
        if dtype.lower() not in _DTYPES:
            raise ModelLoadError(f"unknown dtype {dtype!r} (use one of {', '.join(sorted(_DTYPES))})")
        dtype = _DTYPES[dtype.lower()]
    elif not isinstance(dtype, torch.dtype):
        raise ModelLoadError(f"dtype must be a torch.dtype or a name, got {dtype!r}")
    return device, dtype


def _check_weight_files(folder: Path) -> None:
    if any(folder.glob("*.safetensors")):
        return
    legacy = sorted(p.name for p in folder.iterdir() if p.suffix in (".bin", ".pt", ".pth", ".ckpt"))
    if legacy:
        raise ModelLoadError(
            f"{folder} has only pickle weights ({', '.join(legacy[:3])}); S2D2 loads safetensors only "
            "(convert the checkpoint to .safetensors first)"
        )
    raise ModelLoadError(f"{folder} has no *.safetensors weights")


def _load_weights(folder: Path, cls_name: str, dtype: torch.dtype, attn: str) -> tuple[Any, list[str]]:
    """Load into the concrete class; the config's model_type is set to the native one (the MoE fix)."""
    import transformers

    _check_weight_files(folder)
    cls = getattr(transformers, cls_name)
    try:
        with quiet():
            config = cls.config_class.from_pretrained(folder)
            # SDAR-MoE says "sdar_moe": nothing then matches 5.x's expert-packing conversion and the experts stay
            # random. The native model_type makes the conversion apply (harmless for the dense classes).
            config.model_type = _NATIVE_TYPE[cls_name]
            model, info = cls.from_pretrained(
                folder,
                config=config,
                dtype=dtype,  # explicit: the config says bfloat16
                attn_implementation=attn,  # explicit: SDAR's config.json says flex_attention
                use_safetensors=True,
                trust_remote_code=False,
                output_loading_info=True,
            )
    except Exception as e:
        raise ModelLoadError(f"could not load {folder} as {cls_name}: {first_line(e)}") from e
    problem = unfilled(info)
    if problem:
        raise ModelLoadError(f"{folder} does not match {cls_name}: {problem}; they would be left random")
    return model.eval(), unexpected(info)


def _load_llada(folder: Path, config: dict[str, Any], dtype: torch.dtype, attn: str) -> tuple[Any, list[str]]:
    """An official-layout LLaDA (v1) folder onto native LlamaForCausalLM (the map in models/llada.py)."""
    _check_weight_files(folder)
    try:
        return llada.load_native(folder, config, dtype, attn, quiet)
    except llada.UnsupportedLLaDAConfig as e:
        raise ModelLoadError(f"{folder}: {e}") from e
    except Exception as e:
        raise ModelLoadError(f"could not load {folder} as LLaDA (LlamaForCausalLM): {first_line(e)}") from e


def _load_llada2(folder: Path, config: dict[str, Any], dtype: torch.dtype, attn: str) -> tuple[Any, list[str]]:
    """An official-layout LLaDA2 folder onto native Glm4MoeForCausalLM (the map in models/llada2.py)."""
    _check_weight_files(folder)
    try:
        return llada2.load_native(folder, config, dtype, attn, quiet)
    except llada2.UnsupportedLLaDA2Config as e:
        raise ModelLoadError(f"{folder}: {e}") from e
    except Exception as e:
        raise ModelLoadError(f"could not load {folder} as LLaDA2 (Glm4MoeForCausalLM): {first_line(e)}") from e