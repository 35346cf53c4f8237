"""Timing on the device inside a time budget, for the prepared GPU checks (benchmarks/gpu_check.py,
benchmarks/gpu_batch_first.py): the budget that skips what would not fit and says so, rows printed the moment they
are measured, and forwards timed with a device sync on both sides (wall) or by torch.profiler (kernel time).
"""
from __future__ import annotations

import time
from typing import Any, Callable

import torch


class Budget:
    def __init__(self, seconds: float, t0: float) -> None:
        self.seconds, self.t0 = seconds, t0

    def left(self) -> float:
        return self.seconds - (time.perf_counter() - self.t0)

    def allows(self, label: str, need: float) -> bool:
        """True if `need` seconds fit; otherwise print that `label` is skipped."""
        if need <= self.left():
            return True
        row(label, f"skipped: needs ~{need:.0f} s, {max(0.0, self.left()):.0f} s of the budget left")
        return False


def row(label: str, text: str) -> None:
    print(f"{label:<44} {text}", flush=True)


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def kernel_ms(call: Callable[[], None], device: torch.device, n: int = 5) -> float | None:
    """GPU kernel time per call from torch.profiler (sum of kernels' self device time), or None off CUDA."""
    if device.type != "cuda":
        return None
    from torch.profiler import ProfilerActivity, profile

    sync(device)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(n):
            call()
        sync(device)
    total = sum(getattr(e, "self_device_time_total", 0) or getattr(e, "self_cuda_time_total", 0)
                for e in prof.key_averages())
    return total / n / 1000.0


class SyncedForwards:
    """An HFModel whose forwards sync the device on both sides and add up the seconds spent inside."""

    def __init__(self, model: Any) -> None:
        self._model, self.seconds = model, 0.0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)

    def forward(self, cache: Any, ids: torch.Tensor, positions: torch.Tensor, attention: Any, keep: int,
                last: int | None = None, rows: torch.Tensor | None = None) -> torch.Tensor:
        sync(self._model.device)
        t0 = time.perf_counter()
        out = self._model.forward(cache, ids, positions, attention, keep, last, rows)
        sync(self._model.device)
        self.seconds += time.perf_counter() - t0
        return out
