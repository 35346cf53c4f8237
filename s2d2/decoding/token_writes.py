"""Many sequences' decoded tokens written with a fixed number of tensor operations (the batch-first engine).

Why: batch 1 writes a step's picks into its sequence with three or four small indexing calls
(selection.py `write_picks`), and in a batch-first step every row paid them on its own sequence tensor, ~6 µs of
host time per row and step (issue 37). Where the host already holds what a step decodes (a step without a
verifier: its commits carry each position and token, read in the step's one read), the writes of every such row of
a step can wait for the step's end and go in at once: the rows' current blocks stacked, every commit written by
one `index_put_`, and the blocks copied back into their sequences by one multi-tensor copy.

Invariant: after `flush` each sequence holds exactly what its own `write_picks` would have written (the commits are
the picks, position by position, with the tokens the step read), so a row's trace is unchanged. Nothing reads a
waiting row's sequence before the flush: its next read of the sequence is its next step's request.
"""
from __future__ import annotations

from array import array
from typing import Sequence

import torch

from ..trace import Commit


class TokenWrites:
    """Commits of many rows, held until `flush` writes them all; rows grouped by block length (one stack each)."""

    def __init__(self) -> None:
        self._groups: dict[int, tuple[list[torch.Tensor], array]] = {}

    def add(self, block: torch.Tensor, start: int, commits: Sequence[Commit]) -> None:
        """The step's commits for the row whose current block is the view `block` of its sequence, which starts at
        sequence position `start` (each commit's token is a host value: no resampled token still on the device)."""
        views, entries = self._groups.setdefault(int(block.shape[0]), ([], array("q")))
        k = len(views)
        views.append(block)
        entries.extend([v for c in commits for v in (k, c.position - start, c.token)])  # (one call per row)

    def flush(self) -> None:
        """Write every held commit into its sequence, then forget them."""
        for views, entries in self._groups.values():
            if not entries:
                continue
            stacked = torch.stack(views)
            at = torch.frombuffer(entries, dtype=torch.int64).to(stacked.device).view(-1, 3)
            stacked[at[:, 0], at[:, 1]] = at[:, 2]
            torch._foreach_copy_(views, stacked.unbind(0))
        self._groups = {}
