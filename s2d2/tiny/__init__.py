"""The bundled tiny block-diffusion model: data, tokenizer, objectives, training (`train_tiny`) and reporting.

Heavy imports (torch, transformers) happen on first use.
"""
from __future__ import annotations

__all__ = ["train_tiny", "TrainOptions", "export_model"]


def __getattr__(name: str):
    if name in __all__:
        from . import train

        return getattr(train, name)
    raise AttributeError(f"module 's2d2.tiny' has no attribute {name!r}")
