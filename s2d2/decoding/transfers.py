"""The decode loop's device-to-host reads, batched: each `fetch` is ONE transfer.

On a GPU every read waits for the queued kernels, so the loop reads only where the host must decide something
(route a step, know what it decoded, end a block) and then reads everything it needs at once: the tensors it asks
for plus every value deferred with `later` (record fields the host does not need yet, e.g. a resampled token that
is already written on the device).

On an accelerator all parts are flattened into one float64 tensor (float32 on MPS, which has no float64: token ids
stay exact below 2^24 > MAX_VOCAB) and moved by a single `.tolist()`; integer and bool parts come back as ints,
float32 values come back exactly (float64 holds every float32). On the CPU there is nothing to move and packing
costs more than it saves, so each part is read as it is: the same values at the same points of the loop.

In a batch (s2d2/decoding/batch.py) a packed fetch is one more hand-off: `share(parts, dtype)`, given by the
sequence's model, waits while the scheduler serves every waiting sequence's read with ONE transfer
(`packed_values` of all their parts at once), so a batch step costs ~2 transfers for the whole batch, not per
sequence. Each sequence still gets exactly what its own packed fetch gives (the packing converts value by value),
and `transfers` still counts its own fetches, as at batch 1. The plain CPU path never hands off.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, NamedTuple, Optional, Sequence

import torch

Apply = Callable[[list[Any]], None]
# A batch's shared read: the host values of `parts` as `packed_values` gives them, or None: read them here.
Share = Callable[[list[torch.Tensor], torch.dtype], Optional[list[Any]]]


class HostReads:
    pack_on_cpu = False  # tests set it to run the accelerator path on the CPU

    def __init__(self, device: torch.device, share: Optional[Share] = None) -> None:
        self.device = device
        self.share = share  # a batch's shared read (packed path only); None alone
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
        asked, later, parts = self._take(wanted)
        if not parts:
            return {}
        packed = self.device.type != "cpu" or self.pack_on_cpu
        shared = self.share(parts, self.dtype) if packed and self.share is not None else None
        if shared is not None:
            values = shared
        elif packed:
            values = packed_values([parts], self.dtype, self.device)[0]
        else:
            values = plain_values(parts)
        return self._settle(asked, later, values)

    def _take(self, wanted: Mapping[str, Optional[torch.Tensor]],
              busy: bool = False) -> tuple[list[tuple[str, torch.Tensor]], list[tuple[torch.Tensor, Apply]],
                                          list[torch.Tensor]]:
        """A fetch's parts: the asked tensors, then everything deferred (taken: the fetch settles it); counts the
        transfer when there is anything to read (`busy`: values of this reader's come in a batch's bulk part)."""
        asked = [(name, t) for name, t in wanted.items() if t is not None]
        later = self._later
        parts = [t for _, t in asked]
        if later:  # (most reads defer nothing: every row of every batch-first step takes a read)
            self._later = []
            parts += [t for t, _ in later]
        if parts or busy:
            self.transfers += 1
        return asked, later, parts

    @staticmethod
    def _settle(asked: list[tuple[str, torch.Tensor]], later: list[tuple[torch.Tensor, Apply]],
                values: list[Any]) -> dict[str, Any]:
        """Hand the deferred values to their callbacks; the asked ones by name."""
        for (_, apply), chunk in zip(later, values[len(asked):]):
            apply(chunk if isinstance(chunk, list) else [chunk])
        return {name: chunk for (name, _), chunk in zip(asked, values)}

    def flush(self) -> None:
        """Settle everything deferred (a no-op without pending reads)."""
        if self._later:
            self.fetch({})


class Bulk(NamedTuple):
    """One part of a shared read that many readers want slices of (the batch-first engine's tensors over all its
    rows): reader `members[k]` gets `name` = the flat values [cuts[k][0], cuts[k][1]) of `tensor`, or the one value
    at cuts[k][0] when cuts[k][1] is None (what a 0-d part of its own gives). Read with ONE conversion for all
    members instead of one per member: each value is converted on its own either way, so a member gets exactly
    what its own part would give."""

    name: str
    tensor: torch.Tensor
    members: Sequence[int]
    cuts: Sequence[tuple[int, Optional[int]]]


def fetch_many(readers: Sequence[HostReads], wanted: Sequence[Mapping[str, Optional[torch.Tensor]]],
               bulk: Sequence[Bulk] = ()) -> tuple[list[dict[str, Any]], int]:
    """Each reader's `fetch(wanted[j])`, all in ONE transfer on the packed path (the batch-first engine's shared
    read: s2d2/decoding/lockstep_verify.py); each reader gets what its own fetch gives (values converted one by one)
    and counts its own transfer, as alone. `bulk`: parts read once for many readers (`Bulk`), each reader's slices
    coming first in its dict, then its own parts. Also returns how many readers had something to read. The plain
    CPU path reads each part as `fetch` does."""
    served = {j for b in bulk for j in b.members}
    taken = [r._take(w, j in served) for j, (r, w) in enumerate(zip(readers, wanted))]
    busy = [t for t in taken if t[2]]
    out: list[dict[str, Any]] = [{} for _ in readers]
    if not busy and not bulk:
        return out, 0
    first = readers[0]
    if first.device.type != "cpu" or HostReads.pack_on_cpu:
        values = packed_values([t[2] for t in busy] + [[b.tensor.reshape(-1) for b in bulk]], first.dtype,
                               first.device)
        shared = values.pop()
    else:
        values = [plain_values(t[2]) for t in busy]
        shared = plain_values([b.tensor.reshape(-1) for b in bulk])
    for b, flat in zip(bulk, shared):
        for j, (a, z) in zip(b.members, b.cuts):
            out[j][b.name] = flat[a] if z is None else flat[a:z]
    at = iter(values)
    for j, (asked, later, parts) in enumerate(taken):
        if parts:
            out[j].update(HostReads._settle(asked, later, next(at)))
    return out, len(served | {j for j, t in enumerate(taken) if t[2]})


def plain_values(parts: Sequence[torch.Tensor]) -> list[Any]:
    """The CPU path: each part read as it is (flat lists; 0-d and 1-d tensors as `tolist` gives them)."""
    return [t.reshape(-1).tolist() if t.dim() > 1 else t.tolist() for t in parts]


def packed_values(requests: Sequence[Sequence[torch.Tensor]], dtype: torch.dtype,
                  device: torch.device) -> list[list[Any]]:
    """The host values of every request's parts (flat lists; 0-d tensors give scalars; integer and bool parts as
    ints, floating parts as floats) in ONE transfer: every part flattened into one `dtype` tensor on `device`, one
    `.tolist()`, split back. A request's values do not depend on the others packed with it (each value is converted
    on its own), so a batch's shared read gives each sequence what its lone packed fetch gives."""
    flat = [t.reshape(-1) for parts in requests for t in parts]
    values = torch.cat(flat, out=torch.empty(0, dtype=dtype, device=device)).tolist()
    out: list[list[Any]] = []
    at = 0
    for parts in requests:
        got = []
        for t in parts:
            n = t.numel()
            chunk = values[at : at + n]
            at += n
            chunk = chunk if t.is_floating_point() else list(map(int, chunk))
            got.append(chunk[0] if t.dim() == 0 else chunk)
        out.append(got)
    return out
