"""Shippable folders of the tiny models: bf16 safetensors, the tokenizer, and config.json with the
block-diffusion keys (`mask_token_id`, `block_size`, `logits_alignment`, `stop_token_ids`)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from .tokenizer import special_ids


def _decoding_keys(tok: Any, block_size: int, alignment: str) -> dict[str, Any]:
    ids = special_ids(tok)
    return {
        "mask_token_id": ids["<|MASK|>"],
        "block_size": int(block_size),
        "logits_alignment": alignment,
        "stop_token_ids": [ids["<|im_end|>"], ids["<|endoftext|>"]],
    }


def _generation_config(dest: Path, tok: Any, eos: int | None = None) -> None:
    ids = special_ids(tok)
    gc = dest / "generation_config.json"
    g = json.loads(gc.read_text()) if gc.exists() else {}
    g["eos_token_id"] = [ids["<|im_end|>"], ids["<|endoftext|>"]]
    gc.write_text(json.dumps(g, indent=2) + "\n")


def export_model(src: str | Path, tok: Any, dest: str | Path, block_size: int = 4, alignment: str = "aligned",
                 logs: dict[str, str | Path] | None = None) -> Path:
    """A Qwen3 training checkpoint folder -> shippable folder (native Qwen3 layout)."""
    from ..models.builders import load_qwen3

    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    model = load_qwen3(src, dtype=torch.bfloat16)
    model.save_pretrained(str(dest), safe_serialization=True)
    tok.save_pretrained(str(dest))
    cfg_path = dest / "config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg.update(_decoding_keys(tok, block_size, alignment))
    cfg_path.write_text(json.dumps(cfg, indent=2) + "\n")
    if (dest / "generation_config.json").exists():
        _generation_config(dest, tok)
    return dest


def export_llada2(model: Any, tok: Any, dest: str | Path, block_size: int = 32) -> Path:
    """A Glm4Moe model -> shippable folder in the official LLaDA2 layout (`model_type` llada2_moe), bf16."""
    from ..models.llada2 import write_official

    dest = Path(dest)
    extra = _decoding_keys(tok, block_size, "aligned")
    extra["eos_token_id"] = extra["stop_token_ids"][1]
    write_official(model, dest, extra_config=extra, dtype=torch.bfloat16)
    tok.save_pretrained(str(dest))
    _generation_config(dest, tok)
    return dest
