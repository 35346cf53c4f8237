"""Count the decode loop's host-device transfers on any device, the CPU included.

On a GPU every device-to-host read (`.item()`, `.tolist()`, `int(t)`, `bool(t)`, `nonzero`, boolean-mask
indexing, ...) waits for all queued kernels, and so does a blocking upload of host data (`torch.tensor(list,
device=cuda)` copies through pageable memory and synchronizes the stream). `torch.cuda.set_sync_debug_mode` reports
them on CUDA only; this counter sees the same operations on any device, at the dispatcher (plus `tolist` and
`numpy`, which read memory without dispatching), so a CPU test can bound the syncs a GPU run would make.

    with HostSyncCounter(model) as syncs:
        s2d2.generate(model, prompt, cfg, detailed=False)
    syncs.reads, syncs.uploads, syncs.waits, syncs.events

Model forwards are not counted (`model.forward` is paused): what happens inside one is the forward backend's
business (the static backend runs it as one captured graph); the counter measures the engine around it. A
`HostReads.fetch` (s2d2/decoding/transfers.py) counts as the one read it is on an accelerator, where it packs its
parts into a single transfer; on the CPU it reads them one by one because nothing is moved (`packed_fetch=False`
counts those reads instead). In a batch (s2d2/decoding/batch.py) the scheduler serves several sequences' fetches
with one shared transfer: this counter still notes one read per fetch (what each sequence asked for), and the
batch's ledger counts the transfers (`BatchLedger.reads`).
"""
from __future__ import annotations

import functools
import traceback
from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode

_aten = torch.ops.aten
# Ops whose result size or value the host must read before it can go on.
READS = {
    _aten._local_scalar_dense.default,  # item(), int(t), float(t), bool(t), t.__index__()
    _aten.item.default,  # the same under inference mode, where the mode sees item before it decomposes
    _aten.nonzero.default, _aten.nonzero_numpy.default, _aten.masked_select.default,
    _aten.is_nonzero.default, _aten.equal.default,
    _aten.repeat_interleave.Tensor, _aten.repeat_interleave.self_Tensor,
    _aten._unique2.default, _aten.unique_consecutive.default, _aten.unique_dim.default,
}
UPLOADS = {_aten.lift_fresh.default}  # torch.tensor(<host data>): a blocking host-to-device copy on a GPU
_BOOL_INDEXED = {_aten.index.Tensor, _aten.index_put_.default, _aten.index_put.default}


@dataclass
class SyncEvent:
    kind: str  # "read" | "upload" | "wait" (an explicit torch.cuda.synchronize)
    op: str
    where: str  # the innermost s2d2 frame, "file:line function"


class HostSyncCounter(TorchDispatchMode):
    """A dispatch mode that records every host transfer outside `model.forward` (see the module docstring)."""

    def __init__(self, model: Any = None, packed_fetch: bool = True) -> None:
        super().__init__()
        self.model = model
        self.packed_fetch = packed_fetch
        self.events: list[SyncEvent] = []
        self._paused = 0
        self._undo: list[Callable[[], None]] = []

    @property
    def reads(self) -> int:
        return sum(e.kind == "read" for e in self.events)

    @property
    def uploads(self) -> int:
        return sum(e.kind == "upload" for e in self.events)

    @property
    def waits(self) -> int:
        """Explicit device synchronizations (a detailed trace times every forward exactly on CUDA)."""
        return sum(e.kind == "wait" for e in self.events)

    def total(self) -> int:
        return len(self.events)

    def _note(self, kind: str, op: str) -> None:
        if not self._paused:
            self.events.append(SyncEvent(kind, op, _where()))

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if func in READS or (func in _BOOL_INDEXED and _has_bool_index(args)):
            self._note("read", str(func))
        elif func in UPLOADS:
            self._note("upload", str(func))
        elif func in (_aten._to_copy.default, _aten.copy_.default):
            self._device_copy(func, args, kwargs)
        return func(*args, **kwargs)

    def _device_copy(self, func: Any, args: Any, kwargs: Any) -> None:
        """.cpu() / .to(device) between different devices (never the case on a CPU-only run)."""
        if func is _aten.copy_.default:
            dst, src = args[0].device, args[1].device
        else:
            src, dst = args[0].device, kwargs.get("device") or args[0].device
        if torch.device(dst).type != src.type:
            self._note("read" if torch.device(dst).type == "cpu" else "upload", str(func))

    def __enter__(self) -> "HostSyncCounter":
        self._patch(torch.Tensor, "tolist")
        self._patch(torch.Tensor, "numpy")
        self._patch(torch.cuda, "synchronize", kind="wait")
        if self.model is not None:
            self._pause_in(self.model, "forward")
        if self.packed_fetch:
            from .decoding.transfers import HostReads

            self._pause_in(HostReads, "fetch", note="HostReads.fetch")
        return super().__enter__()

    def __exit__(self, *exc: Any) -> None:
        super().__exit__(*exc)
        while self._undo:
            self._undo.pop()()

    def _patch(self, owner: Any, name: str, kind: str = "read") -> None:
        original = getattr(owner, name)
        counter = self

        def counted(*args: Any, **kwargs: Any) -> Any:
            counter._note(kind, f"{getattr(owner, '__name__', 'Tensor')}.{name}")
            return counter._uncounted(original, args, kwargs)

        setattr(owner, name, counted)
        self._undo.append(lambda: setattr(owner, name, original))

    def _pause_in(self, obj: Any, name: str, note: str = "") -> None:
        """Run `obj.name` uncounted (noting one read as `note` when given and something is read)."""
        original, own = getattr(obj, name), vars(obj).get(name)
        counter = self

        @functools.wraps(original)  # keeps the signature (the recorder asks whether forward takes `rows`)
        def paused(*args: Any, **kwargs: Any) -> Any:
            if note and (any(t is not None for t in args[1].values()) or args[0].pending):
                counter._note("read", note)
            return counter._uncounted(original, args, kwargs)

        setattr(obj, name, paused)
        self._undo.append(lambda: setattr(obj, name, own) if own is not None else delattr(obj, name))

    def _uncounted(self, call: Callable[..., Any], args: Any, kwargs: Any) -> Any:
        self._paused += 1
        try:
            return call(*args, **kwargs)
        finally:
            self._paused -= 1

    def summary(self) -> str:
        lines = [f"{self.reads} reads, {self.uploads} uploads, {self.waits} waits"]
        lines += [f"  {e.kind:6s} {e.op:40s} {e.where}" for e in self.events]
        return "\n".join(lines)


def _has_bool_index(args: Any) -> bool:
    indices = args[1] if len(args) > 1 else ()
    return any(isinstance(i, torch.Tensor) and i.dtype in (torch.bool, torch.uint8) for i in indices or ())


def _where() -> str:
    for frame in reversed(traceback.extract_stack(limit=40)):
        if "/s2d2/" in frame.filename and not frame.filename.endswith("host_syncs.py"):
            return f"{frame.filename.split('/s2d2/')[-1]}:{frame.lineno} {frame.name}"
    return "?"
