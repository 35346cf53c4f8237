"""How long a sweep took, and against what: the time fields of a results file's metadata.

A sweep can be resumed (a rerun does only the missing items), so the time of the last invocation (`seconds`) is not
the sweep's. `decode_seconds` is: the decodes' wall times summed over every row on disk, whichever run wrote it
(with several ranks, the ranks' seconds add up; a batched row's wall is its batch's wall shared among its problems,
so the sum is the batches' wall). `--batch1-reference FILE` sets this sweep beside an earlier one of the same grid
decoded one problem at a time: seconds per decode of each and their ratio. The two ran at different times, so the
ratio also carries whatever else the machine was doing then; `python -m benchmarks.batch_speed` measures batch
sizes side by side in one run.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable

SAME = ("model", "task", "scorer", "grid", "seed", "gen_length")  # what the two sweeps must share to be compared


def decode_seconds(rows: Iterable[dict[str, Any]]) -> float:
    """The summed wall time of these problem rows."""
    return round(sum(float(r.get("wall_s") or 0.0) for r in rows), 1)


def read_reference(path: str | Path, cells: int) -> dict[str, Any]:
    """The batch-1 results file at `path` for a sweep of `cells` cells, checked before any decode; ValueError (one
    line) when it is unreadable, batched, or of another number of cells."""
    try:
        ref = json.loads(Path(path).read_text(encoding="utf-8"))
        meta, ref_cells = ref["meta"], len(ref["cells"])
        float(meta["seconds"]), int(meta["n"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ValueError(f"--batch1-reference: {path} is not a results file ({type(e).__name__})") from None
    if int(meta.get("batch_size", 1)) != 1:
        raise ValueError(f"--batch1-reference: {path} was decoded at batch {meta['batch_size']}, not 1")
    if ref_cells != cells:
        raise ValueError(f"--batch1-reference: {path} is a sweep of something else ({ref_cells} vs {cells} cells)")
    return ref


def batch1_reference(path: str | Path, meta: dict[str, Any], cells: int) -> dict[str, Any]:
    """The `batch1_reference` metadata entry comparing this sweep (`meta`, `cells` cells) with the batch-1 results
    file at `path`; ValueError (one line) when that file is not a batch-1 sweep of the same grid and task."""
    ref_meta = read_reference(path, cells)["meta"]
    differs = [k for k in SAME if ref_meta.get(k) != meta.get(k)]
    if differs:
        what = ", ".join(f"{k} {ref_meta.get(k)!r} vs {meta.get(k)!r}" for k in differs)
        raise ValueError(f"--batch1-reference: {path} is a sweep of something else ({what})")
    ref_per = float(ref_meta["seconds"]) / (cells * int(ref_meta["n"]))
    this_per = float(meta["decode_seconds"]) / (cells * int(meta["n"]))
    return {"file": Path(path).name, "n": ref_meta["n"], "created": ref_meta.get("created"),
            "seconds": ref_meta["seconds"], "seconds_per_decode": round(ref_per, 4),
            "this_seconds_per_decode": round(this_per, 4),
            "speedup_per_decode": round(ref_per / this_per, 2) if this_per > 0 else None}


def time_line(meta: dict[str, Any]) -> str:
    """One sentence for the table's footer: the sweep's decode time, and the batch-1 reference when there is one."""
    line = (f"Decoding took {meta['decode_seconds']:,.0f} s at batch {meta.get('batch_size', 1)}"
            if "decode_seconds" in meta else f"The run took {meta.get('seconds', 0):,.0f} s")
    ref = meta.get("batch1_reference")
    if ref and ref.get("speedup_per_decode"):
        line += (f" ({ref['this_seconds_per_decode']:.3f} s per decode; the batch-1 sweep of n = {ref['n']} took "
                 f"{ref['seconds_per_decode']:.3f} s per decode: {ref['speedup_per_decode']:.1f}× faster per decode,"
                 " measured on different days)")
    return line + "."
