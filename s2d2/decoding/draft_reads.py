"""What the S2D2 draft rows of one config read after their shared forward, as parts over all of them
(transfers.py `Bulk`, read once in the batch-first step's shared read, lockstep_block.py): their drafts, their
routing summary (route_summary.py) and their skip rule's padded rows. Each row gets the very values its own parts
would give (its slice, converted value by value)."""
from __future__ import annotations

import torch

from .route_summary import SummaryParts
from .transfers import Bulk


def draft_bulk(first: int, sizes: list[int], tokens: torch.Tensor, summary: SummaryParts,
               rule: dict[str, torch.Tensor]) -> list[Bulk]:
    """What the S2D2 draft rows of one config read, as parts over all of them (transfers.py `Bulk`): their drafts,
    their routing summary and their skip rule's padded rows; the rows are readers `first`, `first + 1`, ... of
    the step's shared read. Each row gets the very values its own parts would give (its slice, converted value by
    value), in the order its batch-1 step asks for them (step.py `route_inputs`)."""
    members = range(first, first + len(sizes))
    starts = [0]
    for n in sizes[:-1]:
        starts.append(starts[-1] + n)
    out = [Bulk("drafts", tokens, members, [(a, a + n) for a, n in zip(starts, sizes)]), *summary_bulk(first, summary)]
    width = max(sizes)
    for name, t in rule.items():  # "order": [R, width] cut to each row's masks; "above": [R]
        cuts = [(k * width, k * width + n) for k, n in enumerate(sizes)] if t.dim() == 2 else \
            [(k, None) for k in range(len(sizes))]
        out.append(Bulk(name, t, members, cuts))
    return out


def summary_bulk(first: int, summary: SummaryParts) -> list[Bulk]:
    """The routing summary of many rows (route_summary.py `summary_parts`) as parts read once for all of them
    (transfers.py `Bulk`): N_hi, then each of the summary's parts, row j of the summary being reader `first + j` of
    the shared read. Also the batch-first editing loop's (lockstep_editing.py)."""
    out = [Bulk("n_hi", summary.n_hi, range(first, first + int(summary.n_hi.shape[0])),
                [(k, None) for k in range(int(summary.n_hi.shape[0]))])]
    names = summary.buckets[0][1].keys() if summary.buckets else ()
    for name in names:
        for rows, parts in summary.buckets:
            out.append(_per_row(name, parts[name], [first + j for j in rows]))
    return out


def _per_row(name: str, t: torch.Tensor, members: list[int]) -> Bulk:
    """A part with one row per member ([R]: a value each, as a 0-d part; [R, w]: w values each)."""
    if t.dim() == 1:
        return Bulk(name, t, members, [(k, None) for k in range(len(members))])
    w = t[0].numel()
    return Bulk(name, t, members, [(k * w, (k + 1) * w) for k in range(len(members))])
