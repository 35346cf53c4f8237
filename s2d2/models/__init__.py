"""Model adapters: the only package in s2d2 that imports transformers.

Names are imported lazily so that `s2d2.models.masks` / `.registry` stay cheap to import.
"""
from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "ModelSpec": "base",
    "HFModel": "hf",
    "ModelLoadError": "loading",
    "from_transformers": "loading",
    "load_model": "loading",
    "known_models": "registry",
    "lookup": "registry",
    "ModelEntry": "registry",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 's2d2.models' has no attribute {name!r}")
    return getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
