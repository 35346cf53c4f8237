"""A bundled model loaded for a benchmark in the dtype it asks for, float64 included.

torch's grouped-matmul kernel, which transformers runs a MoE's experts on by default (tiny-llada2's), refuses
float64 ("Expected mat_a to be Float32, BFloat16 or Float16 matrix, got Double"); in float64 the experts go on the
eager path instead, as the tests' float64 models do (tests/support/batch_cases.py). Other dtypes load as they are.
"""
from __future__ import annotations

from typing import Any

import torch


def load_model(name: str, dtype: torch.dtype, **kwargs: Any) -> Any:
    """`s2d2.load_model(name, dtype=dtype, **kwargs)`, its MoE experts (if any) on the eager path in float64."""
    import s2d2

    model = s2d2.load_model(name, dtype=dtype, **kwargs)
    if dtype == torch.float64 and hasattr(model.model, "set_experts_implementation"):
        model.model.set_experts_implementation("eager")
    return model
