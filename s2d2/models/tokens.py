"""The tokenizer of a checkpoint folder and the token ids the decoder needs from it (docs/model-families.md,
'Tokens the decoder needs'): the mask token, which the tokenizer, config.json and the registry must agree on, and the
stop ids."""
from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

from .hub import ModelLoadError
from .logs import first_line, quiet
from .registry import ModelEntry

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "tokenizer.model")


def load_tokenizer(folder: Path) -> Any:
    """AutoTokenizer from the folder (no network: the folder is local), or None if it ships none."""
    if not any((folder / name).is_file() for name in TOKENIZER_FILES):
        return None
    from transformers import AutoTokenizer

    try:
        with quiet(), warnings.catch_warnings():
            # AutoTokenizer reads config.json; an unknown model_type (llada2_moe) with "rope_scaling": null
            # makes transformers warn about the deprecated key: noise for a tokenizer load.
            warnings.filterwarnings("ignore", message=".*rope_scaling.*", category=FutureWarning)
            return AutoTokenizer.from_pretrained(folder, trust_remote_code=False)
    except Exception as e:
        native = native_tokenizer(folder)  # a remote-code tokenizer class over standard files (Dream's)
        if native is not None:
            return native
        raise ModelLoadError(f"could not load the tokenizer in {folder}: {first_line(e)}") from e


def native_tokenizer(folder: Path) -> Any:
    """A tokenizer whose config names a remote-code class (Dream's `DreamTokenizer`, a Qwen2 BPE tokenizer with a
    mask token) loads as the native class its files describe: PreTrainedTokenizerFast over tokenizer.json, else
    Qwen2Tokenizer over vocab.json + merges.txt. None when neither applies."""
    try:
        config = json.loads((folder / "tokenizer_config.json").read_text())
    except (OSError, ValueError):
        return None
    if not config.get("auto_map"):
        return None
    from transformers import PreTrainedTokenizerFast, Qwen2Tokenizer

    try:
        with quiet():
            if (folder / "tokenizer.json").is_file():
                return PreTrainedTokenizerFast.from_pretrained(folder, trust_remote_code=False)
            if (folder / "vocab.json").is_file() and (folder / "merges.txt").is_file():
                return Qwen2Tokenizer.from_pretrained(folder, trust_remote_code=False)
    except Exception:
        return None
    return None


def resolve_mask_id(tokenizer: Any, config: dict[str, Any], entry: ModelEntry | None, vocab: int,
                     default: int | None = None) -> int:
    """tokenizer.mask_token, config mask_token_id and the registry must agree (docs/model-families.md,
    'Tokens the decoder needs'); `default` (the family's id) only when none of them says anything."""
    sources: dict[str, int] = {}
    token = getattr(tokenizer, "mask_token", None) if tokenizer is not None else None
    if token:
        tid = tokenizer.convert_tokens_to_ids(token)
        # A mask token the vocabulary does not know (SDAR's stray "<MASK>") is no evidence: skip it.
        if isinstance(tid, int) and tid != getattr(tokenizer, "unk_token_id", None):
            sources[f"tokenizer.mask_token {token!r}"] = tid
    if isinstance(config.get("mask_token_id"), int):
        sources["config.json mask_token_id"] = config["mask_token_id"]
    if entry is not None and entry.mask_id is not None:
        sources["registry"] = entry.mask_id
    if not sources and default is not None:
        sources["family default"] = default
    if not sources:
        raise ModelLoadError(
            "cannot tell the mask token: the tokenizer has no mask_token, config.json has no mask_token_id and "
            "the model is not in the registry; use from_transformers(..., mask_token_id=...)"
        )
    if len(set(sources.values())) > 1:
        listed = ", ".join(f"{k} = {v}" for k, v in sources.items())
        raise ModelLoadError(f"mask token ids disagree: {listed}")
    mask_id = next(iter(sources.values()))
    if not 0 <= mask_id < vocab:
        raise ModelLoadError(f"mask token id {mask_id} is outside the vocabulary [0, {vocab})")
    return mask_id


def resolve_stop_ids(tokenizer: Any, config: dict[str, Any], entry: ModelEntry | None, folder: Path,
                      default: list[int] | None = None) -> list[int]:
    """config stop_token_ids, else the registry, else generation_config eos ids, else the tokenizer's eos,
    else the family's `default`."""
    if config.get("stop_token_ids"):
        return [int(t) for t in config["stop_token_ids"]]
    if entry is not None and entry.stop_ids:
        return list(entry.stop_ids)
    gen = folder / "generation_config.json"
    if gen.is_file():
        try:
            eos = json.loads(gen.read_text()).get("eos_token_id")
        except ValueError:
            eos = None
        if eos is not None:
            return [int(t) for t in (eos if isinstance(eos, list) else [eos])]
    eos_id = getattr(tokenizer, "eos_token_id", None) if tokenizer is not None else None
    return [int(eos_id)] if eos_id is not None else list(default or [])
