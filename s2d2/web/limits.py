"""Which checkpoints `export-web` takes: how many parameters, known before any weight is read.

A browser decodes with every weight in its memory and downloads them on the first Run, so exports are bounded by
`MAX_PARAMS` (50 M parameters: 100 MB as bfloat16). A registry entry is judged by its listed size, a local folder by
its safetensors headers (the JSON at the front of each file, read without the tensors), so a 4 GB checkpoint is
refused in one line before anything is downloaded or loaded.
"""
from __future__ import annotations

import json
import math
import struct
from pathlib import Path

MAX_PARAMS = 50_000_000
HEADER_MAX = 100_000_000  # bytes: a safetensors header longer than this is not a checkpoint we read


def too_big(params: int, what: str) -> str | None:
    """The one-line refusal for a checkpoint of `params` parameters, or None when it may be exported."""
    if params <= MAX_PARAMS:
        return None
    return (f"{what} has about {params / 1e6:,.0f} M parameters; export-web takes checkpoints of at most "
            f"{MAX_PARAMS // 1_000_000} M (a browser holds and downloads every weight)")


def registry_params(size_gb: float) -> int:
    """Parameters of a registry entry from its listed bfloat16 size on disk (2 bytes each)."""
    return int(size_gb * 1e9 / 2)


def folder_params(folder: Path) -> int:
    """Parameters in a folder's *.safetensors files, counted from their headers (ValueError if one is unreadable)."""
    total = 0
    for path in sorted(folder.glob("*.safetensors")):
        total += header_params(path)
    return total


def header_params(path: Path) -> int:
    """Parameters listed in one safetensors file's header."""
    with path.open("rb") as fh:
        raw = fh.read(8)
        if len(raw) != 8:
            raise ValueError(f"{path.name} is not a safetensors file (too short)")
        (length,) = struct.unpack("<Q", raw)
        if length > HEADER_MAX:
            raise ValueError(f"{path.name}: header of {length} bytes; not a safetensors file this reads")
        try:
            header = json.loads(fh.read(length))
        except ValueError:
            raise ValueError(f"{path.name}: its header is not JSON; not a safetensors file") from None
    if not isinstance(header, dict):
        raise ValueError(f"{path.name}: its header is not a JSON object; not a safetensors file")
    return sum(math.prod(v.get("shape", [])) for k, v in header.items() if k != "__metadata__" and isinstance(v, dict))
