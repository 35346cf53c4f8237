"""Building native transformers models and tokenizers for the bundled tiny models (training code included).

Only `s2d2/models/` imports transformers; `s2d2/tiny/` calls these helpers.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import torch


def qwen3(config: dict[str, Any], seed: int = 0) -> Any:
    """A freshly initialised `Qwen3ForCausalLM` (SDPA) from config keyword arguments."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(seed)
    cfg = Qwen3Config(**config)
    cfg._attn_implementation = "sdpa"
    return Qwen3ForCausalLM(cfg)


def glm4moe(config: dict[str, Any], seed: int = 0) -> Any:
    """A freshly initialised `Glm4MoeForCausalLM` (SDPA) from config keyword arguments."""
    from transformers import Glm4MoeConfig, Glm4MoeForCausalLM

    torch.manual_seed(seed)
    cfg = Glm4MoeConfig(**config)
    cfg._attn_implementation = "sdpa"
    return Glm4MoeForCausalLM(cfg)


def load_qwen3(folder: str | Path, dtype: torch.dtype = torch.float32) -> Any:
    from transformers import Qwen3ForCausalLM

    return Qwen3ForCausalLM.from_pretrained(str(folder), dtype=dtype, attn_implementation="sdpa").eval()


def fast_tokenizer(backend: Any, **kwargs: Any) -> Any:
    """Wrap a trained `tokenizers.Tokenizer` as a transformers fast tokenizer."""
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(tokenizer_object=backend, **kwargs)


def load_tokenizer(folder: str | Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(folder))


def quiet_progress() -> None:
    """No transformers progress bars (training logs stay readable)."""
    from transformers.utils import logging

    logging.disable_progress_bar()
