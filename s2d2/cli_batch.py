"""The `--batch-size` option of the commands that decode many problems (`bench`, `eval-task`): an integer, or
`auto`, which picks by the device the model runs on. One definition, so the commands accept the same values and say
the same thing about them."""
from __future__ import annotations

import argparse
from typing import Any

from .cli_checks import whole

MAX_BATCH = 256
AUTO_BATCH = {"cuda": 32, "cpu": 16}  # (a GPU shares a forward among many more sequences before it slows)


def add_batch_size(p: argparse.ArgumentParser, default: str) -> None:
    p.add_argument("--batch-size", default=default,
                   help="sequences decoded at once, sharing forwards (s2d2.generate_batch; the dynamic backend): "
                        f"an integer in [1, {MAX_BATCH}], or auto ({AUTO_BATCH['cuda']} on CUDA, "
                        f"{AUTO_BATCH['cpu']} elsewhere; default: {default}). Answers equal batch 1's up to float "
                        "round-off")


def batch_size_for(value: Any, device_type: str) -> int:
    """The --batch-size value as an integer (auto: by the device type); ValueError, one line, if it is neither."""
    if value is None or value == "auto":
        return AUTO_BATCH["cuda" if device_type == "cuda" else "cpu"]
    try:
        n = int(value)
    except (TypeError, ValueError):
        raise ValueError(f"--batch-size: an integer in [1, {MAX_BATCH}] or auto, got {value!r}") from None
    return whole(n, "--batch-size", 1, MAX_BATCH)


def torch_device_type(device: Any) -> str:
    """"cuda", "cpu", ... of a --device value (None: CUDA when available, as load_model picks)."""
    import torch

    if device is None:
        return "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(device).type
