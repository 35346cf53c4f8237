"""The least time a run's forwards can take on this machine: its seconds inside the matrix-multiply and attention
kernels, the work no scheduling can remove.

A batched decode's figure against batch 1 cannot pass batch 1's time over this floor, whatever the engine does
around the kernels: even with no host work, no elementwise op and no module overhead, its matmuls and attention
still run. `ceiling(b1_seconds, floor_seconds)` is that bound. The floor is measured, not derived from FLOPs: a
kernel's rate depends on its shapes (on one AVX-512 core, a [700, 192] x [192, 576] matmul runs at ~100 GFLOP/s,
a [22, 192] one at ~70), and attention's fused CPU kernel has no FLOP formula in torch's counter.

Measured by torch.profiler as each kernel op's own CPU time (`self_cpu_time_total`), which is the kernel's run
time plus a profiler record per call: the floor is slightly high for tiny calls, so the ceiling errs low by that
record (about a microsecond a call against hundreds per batched matmul).
"""
from __future__ import annotations

from typing import Any, Callable

from torch.profiler import ProfilerActivity, profile

# The kernels a forward cannot avoid: dense matmuls (linear layers, the head) and attention (the fused CPU kernels,
# or the batched matmuls of the math path). Softmax and masking of the math path are left out: the floor stays a
# lower bound.
KERNEL_OPS = frozenset({
    "aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm",
    "aten::_scaled_dot_product_flash_attention_for_cpu", "aten::_scaled_dot_product_efficient_attention",
    "aten::_scaled_dot_product_flash_attention", "aten::_flash_attention_forward",
})


def kernel_seconds(run: Callable[[], Any]) -> tuple[float, Any]:
    """(seconds `run()` spent inside KERNEL_OPS, what `run()` returned). Only this thread's ops are profiled, so
    time it on one thread (the models part sets torch to one)."""
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        value = run()
    return sum(e.self_cpu_time_total for e in prof.key_averages() if e.key in KERNEL_OPS) / 1e6, value


def ceiling(b1_seconds: float, floor_seconds: float) -> float:
    """The most a batched run with this kernel floor can gain over batch 1's `b1_seconds` (inf for no floor)."""
    return b1_seconds / floor_seconds if floor_seconds > 0 else float("inf")
