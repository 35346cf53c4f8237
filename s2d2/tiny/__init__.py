"""The bundled tiny models: data, tokenizer, objectives, training (`train_tiny`, stages ar / sdar / llada2) and
reporting. torch loads on first use; transformers only through `s2d2.models.builders` (the one package that
imports it)."""
from __future__ import annotations

__all__ = ["train_tiny", "TrainOptions", "export_model", "export_llada2"]


def __getattr__(name: str):
    if name in __all__:
        from . import train

        return getattr(train, name)
    raise AttributeError(f"module 's2d2.tiny' has no attribute {name!r}")
