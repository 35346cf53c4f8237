"""The decode loop's device-to-host reads, batched: each `fetch` is ONE transfer.

On a GPU every read waits for the queued kernels, so the loop reads only where the host must decide something
(route a step, know what it decoded, end a block) and then reads everything it needs at once: the tensors it asks
for plus every value deferred with `later` (record fields the host does not need yet, e.g. a resampled token that
is already written on the device).

On an accelerator all parts are flattened into one float64 tensor (float32 on MPS, which has no float64: token ids
stay exact below 2^24 > MAX_VOCAB) and moved by a single `.tolist()`; integer and bool parts come back as ints,
float32 values come back exactly (float64 holds every float32). On the CPU there is nothing to move and packing
costs more than it saves, so each part is read as it is: the same values at the same points of the loop.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Optional

import torch

Apply = Callable[[list[Any]], None]


class HostReads:
    pack_on_cpu = False  # tests set it to run the accelerator path on the CPU

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.dtype = torch.float32 if device.type == "mps" else torch.float64
        self.transfers = 0  # how many reads this run made (benchmarks report it per step)
        self._later: list[tuple[torch.Tensor, Apply]] = []

    @property
    def pending(self) -> bool:
        return bool(self._later)

    def later(self, tensor: torch.Tensor, apply: Apply) -> None:
        """Read `tensor` at the next fetch and call `apply(values)` with its flattened host values."""
        self._later.append((tensor, apply))

    def fetch(self, wanted: Mapping[str, Optional[torch.Tensor]]) -> dict[str, Any]:
        """Host values of the non-None tensors in `wanted` (flat lists; 0-d tensors give scalars), in one transfer
        that also settles everything deferred."""
        asked = [(name, t) for name, t in wanted.items() if t is not None]
        later, self._later = self._later, []
        parts = [t for _, t in asked] + [t for t, _ in later]
        if not parts:
            return {}
        self.transfers += 1
        packed = self.device.type != "cpu" or self.pack_on_cpu
        values = self._packed(parts) if packed else [t.reshape(-1).tolist() if t.dim() > 1 else t.tolist()
                                                     for t in parts]
        for (_, apply), chunk in zip(later, values[len(asked):]):
            apply(chunk if isinstance(chunk, list) else [chunk])
        return {name: chunk for (name, _), chunk in zip(asked, values)}

    def _packed(self, parts: list[torch.Tensor]) -> list[Any]:
        flat = [t.reshape(-1) for t in parts]
        values = torch.cat(flat, out=torch.empty(0, dtype=self.dtype, device=self.device)).tolist()
        out, at = [], 0
        for t, f in zip(parts, flat):
            chunk = values[at : at + f.shape[0]]
            at += f.shape[0]
            chunk = chunk if t.is_floating_point() else list(map(int, chunk))
            out.append(chunk[0] if t.dim() == 0 else chunk)
        return out

    def flush(self) -> None:
        """Settle everything deferred (a no-op without pending reads)."""
        if self._later:
            self.fetch({})
