"""S2D2 Explorer: self-speculative decoding of block-diffusion language models, with a replayable trace.

    import s2d2
    model = s2d2.load_model("tiny")
    result = s2d2.generate(model, "What is 3 + 4?", s2d2.preset("sdar-config-a"), seed=0)
    result.text, result.metrics, result.trace
"""
from __future__ import annotations

__version__ = "0.1.0"

from .config import DecodeConfig, preset, presets  # noqa: E402
from .trace import Trace  # noqa: E402


def __getattr__(name: str):
    # Heavy modules (torch, transformers) load on first use so `import s2d2` stays cheap.
    if name in ("generate", "GenerateResult", "encode_prompt", "StopDecoding"):
        from . import api

        return getattr(api, name)
    if name == "generate_batch":
        from .batched import generate_batch

        return generate_batch
    if name in ("load_model", "from_transformers", "ModelLoadError", "known_models"):
        from . import models

        return getattr(models, name)
    raise AttributeError(f"module 's2d2' has no attribute {name!r}")


__all__ = ["DecodeConfig", "preset", "presets", "Trace", "generate", "generate_batch", "GenerateResult", "StopDecoding", "load_model",
           "from_transformers", "ModelLoadError", "known_models", "__version__"]
