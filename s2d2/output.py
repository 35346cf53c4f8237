"""Output trimming shared by the decoder and trace replay (docs/algorithm.md, 'The block loop, stopping and output')."""
from __future__ import annotations


def trim_output(generated: list[int], gen_length: int, mask_id: int, stop_ids: list[int]) -> tuple[list[int], int | None]:
    """Keep at most gen_length tokens, up to the last non-mask, then cut before the first stop id.

    Returns (ids, stop_position) where stop_position is the index of the first stop id (None if none).
    """
    ids = list(generated[:gen_length])
    while ids and ids[-1] == mask_id:
        ids.pop()
    stops = set(stop_ids)
    for i, t in enumerate(ids):
        if t in stops:
            return ids[:i], i
    return ids, None
