"""One sequence of a batch-first decode (`Row`), and the helpers its steps share: rows grouped by sampling
transform, and one host read for many rows.

A Row holds what a batch-1 loop keeps in its locals (position, tokens, records, generator, cache, progress check),
so the batch-first step (lockstep.py and its loops) can advance every row with shared tensor work and still give
each one the records its own loop would write.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, NamedTuple, Optional

import torch

from ..config import DecodeConfig
from ..models.base import ForwardRequest
from ..trace import BlockRecord, StepRecord
from .batch_ledger import BatchLedger
from .draws import Source
from .forwards import Recorder
from .transfers import HostReads, packed_values


@dataclass(eq=False)
class Row:
    """One live sequence: `index` is its prompt's place in the batch; `at` the next position it decodes. Rows
    compare by identity (two rows are never the same sequence, and a field-by-field comparison would read their
    caches and records)."""

    index: int
    prep: Any  # api.Prepared
    seed: int
    rec: Recorder
    generator: Source
    cache: Any
    check: Callable[[list[StepRecord]], Optional[str]]
    at: int
    tokens: list[int] = field(default_factory=list)
    blocks: list[BlockRecord] = field(default_factory=list)
    steps: list[StepRecord] = field(default_factory=list)
    finish_reason: Optional[str] = None
    t0: float = field(default_factory=time.perf_counter)
    prompt_len: int = 0  # set from prep: len(prep.ids)
    state: Any = None  # the loop's own state of this row (lockstep_block.BlockState; None for AR)
    ledger: Optional[BatchLedger] = None  # the batch's ledger (its shared reads are counted there)
    loop: Any = None  # the module of the loop that steps it (lockstep.py `loop_for`, looked up once at its start)

    def __post_init__(self) -> None:
        self.prompt_len = len(self.prep.ids)

    def prompt_ids(self, model: Any) -> torch.Tensor:
        """The prompt's ids on the model's device (one upload, at the row's start)."""
        return torch.tensor(self.prep.ids, dtype=torch.long, device=model.device)

    def finish(self, reason: str, steps: list[StepRecord]) -> None:
        """End this row's decode with `reason` (its loop's finish_reason) and its final step list."""
        self.finish_reason, self.steps = reason, steps


class Asked(NamedTuple):
    """One row's forward of a step: the record it gets in the row's trace (kind, block, step) and the request."""

    kind: str
    block: int
    step: int
    request: ForwardRequest


def sampling_groups(rows: list[Row]) -> list[tuple[DecodeConfig, list[int]]]:
    """The rows (their indices in `rows`) that share one sampling transform, each group with a config of its own:
    `token_distribution` and `draw_tokens` read only temperature, top-k and top-p."""
    groups: dict[tuple[float, int, float], tuple[DecodeConfig, list[int]]] = {}
    for j, r in enumerate(rows):
        cfg = r.prep.cfg
        groups.setdefault((cfg.temperature, cfg.top_k, cfg.top_p), (cfg, []))[1].append(j)
    return list(groups.values())


def read_rows(model: Any, parts: Mapping[str, Optional[torch.Tensor]], n: int,
              ledger: Optional[BatchLedger] = None) -> list[dict[str, list[Any]]]:
    """The host values of `parts` (each with n rows first: [n] or [n, ...]) in ONE read, split into each row's
    flat lists, as its own batch-1 fetch of its row would give them (HostReads.fetch: on the CPU each part read as
    it is, on an accelerator packed into one transfer; values converted one by one either way)."""
    asked = [(name, t) for name, t in parts.items() if t is not None]
    tensors = [t for _, t in asked]
    if model.device.type != "cpu" or HostReads.pack_on_cpu:
        dtype = torch.float32 if model.device.type == "mps" else torch.float64
        values = packed_values([tensors], dtype, model.device)[0]
        if ledger is not None:
            ledger.reads += 1
            ledger.sequence_reads += n
    else:
        values = [t.reshape(-1).tolist() for t in tensors]
    out: list[dict[str, list[Any]]] = [{} for _ in range(n)]
    for (name, t), flat in zip(asked, values):
        width = t.numel() // n if n else 0
        for j in range(n):
            out[j][name] = flat[j * width : (j + 1) * width]
    return out


def padded_runs(values: torch.Tensor, sizes: list[int]) -> torch.Tensor:
    """[R, max size] with row j holding the j-th run of `values` (runs of `sizes`, one after another), padded with
    -1: a remasking rule's batch form over many rows' masks (remasking.py `rule_inputs`: a pad sorts after every
    probability and never counts above τ)."""
    device = values.device
    rows = torch.repeat_interleave(torch.arange(len(sizes), device=device), torch.tensor(sizes, device=device))
    starts = torch.tensor([0] + sizes[:-1], device=device).cumsum(0)
    cols = torch.arange(values.shape[0], device=device) - starts[rows]
    out = torch.full((len(sizes), max(sizes)), -1, dtype=values.dtype, device=device)
    out[rows, cols] = values
    return out
