"""The `s2d2` backend's model_args: which model, which decoder, which seeds; checked without importing lm-eval.

    pretrained=tiny,preset=sdar-config-b,acceptance=greedy_exact,seed=0,trace_dir=traces/

Keys: `pretrained` (registry name, Hub id or local folder; default tiny), `preset` (python -m s2d2 presets; default
sdar-config-a), any `DecodeConfig` field (an override of the preset), `seed` (request i of a task decodes with
seed + doc_id, as `bench` decodes problem i with seed + i), `device`, `dtype`, `backend` (auto | static | dynamic),
`max_gen_toks` (used when a task sets none; default 256), `trace_dir` (write every request's full trace there),
`max_length` (context cap; default the model's). `gen_length`, when given, caps lm-eval's max_gen_toks. lm-eval's
own `batch_size` (`--batch_size N`) is how many requests `generate_until` decodes at once (s2d2.generate_batch: the
same answers as one at a time, up to float round-off in the shared forwards; the dynamic backend; "auto" means
AUTO_BATCH); `max_batch_size` is accepted and unused.
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any, Optional

from ..config import DecodeConfig, preset
from ..limits import check_seed

DTYPES = ("float32", "bfloat16", "float16", "float64")
BACKENDS = ("auto", "static", "dynamic")
DECODE_FIELDS = tuple(f.name for f in dataclasses.fields(DecodeConfig))
OWN_KEYS = ("pretrained", "preset", "seed", "device", "dtype", "backend", "max_gen_toks", "trace_dir", "max_length",
            "batch_size")
IGNORED_KEYS = ("max_batch_size",)  # lm-eval passes it to every backend
AUTO_BATCH = 8
MAX_BATCH = 256
DEFAULT_MAX_GEN_TOKS = 256


@dataclass(frozen=True)
class BackendArgs:
    pretrained: str
    preset: str
    config: DecodeConfig  # the preset with the overrides; gen_length is set per request
    gen_cap: Optional[int]  # gen_length given in model_args: at most this many tokens per request
    seed: int
    device: Optional[str]
    dtype: Optional[str]
    backend: str
    max_gen_toks: int
    trace_dir: Optional[str]
    max_length: Optional[int]
    batch_size: int = 1

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["config"] = {k: v for k, v in self.config.to_dict().items() if k != "gen_length"}  # set per request
        return out


def parse_arg_string(text: str) -> dict[str, Any]:
    """'k=v,k2=v2' -> typed values the way lm-eval reads them: true/false, none, integers, floats, else text."""
    out: dict[str, Any] = {}
    for part in (p for p in text.split(",") if p.strip()):
        if "=" not in part:
            raise ValueError(f"--model_args: expected key=value, got {part.strip()[:60]!r}")
        key, raw = part.split("=", 1)
        out[key.strip()] = typed_value(raw)
    return out


def typed_value(raw: str) -> Any:
    raw = raw.strip()
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "'\"":
        return raw[1:-1]
    low = raw.lower()
    if low in ("true", "false"):
        return low == "true"
    if low == "none":
        return None
    for cast in (int, float):
        try:
            return cast(raw)
        except ValueError:
            pass
    return raw


def check_backend_args(args: dict[str, Any]) -> BackendArgs:
    """Every key and value checked (one ValueError naming the first bad one); nothing loads."""
    unknown = sorted(k for k in args if k not in OWN_KEYS + IGNORED_KEYS + DECODE_FIELDS)
    if unknown:
        raise ValueError(f"model_args: unknown key {unknown[0]!r}; known: {', '.join(OWN_KEYS)}, or a DecodeConfig "
                         f"field such as block_length, confidence_threshold, acceptance (see docs/library.md)")
    pretrained = _text(args, "pretrained", "tiny")
    name = _text(args, "preset", "sdar-config-a")
    overrides = {k: v for k, v in args.items() if k in DECODE_FIELDS}
    try:
        cfg = preset(name, **overrides)
    except ValueError as exc:
        raise ValueError(f"model_args: {exc}") from None
    seed = args.get("seed", 0)
    check_seed(seed, "model_args seed")
    dtype = args.get("dtype")
    if dtype is not None and dtype not in DTYPES:
        raise ValueError(f"model_args dtype: one of {', '.join(DTYPES)}, got {dtype!r}")
    backend = _text(args, "backend", "auto")
    if backend not in BACKENDS:
        raise ValueError(f"model_args backend: one of {', '.join(BACKENDS)}, got {backend!r}")
    device = args.get("device")
    if device is not None:
        _check_device(str(device))
    trace_dir = args.get("trace_dir")
    if trace_dir is not None:
        check_folder(str(trace_dir), "model_args trace_dir")
    batch = _batch_size(args.get("batch_size", 1))  # both backends batch (the static one a slot per sequence)
    return BackendArgs(
        pretrained=pretrained, preset=name, config=cfg, gen_cap=overrides.get("gen_length"), seed=seed,
        device=None if device is None else str(device), dtype=dtype, backend=backend,
        max_gen_toks=_positive(args, "max_gen_toks", DEFAULT_MAX_GEN_TOKS),
        trace_dir=None if trace_dir is None else str(trace_dir), max_length=_positive(args, "max_length", None),
        batch_size=batch,
    )


def _batch_size(value: Any) -> int:
    """lm-eval's batch_size: an integer, its text, or "auto" / "auto:N" (AUTO_BATCH)."""
    if isinstance(value, str) and value.strip().lower().startswith("auto"):
        return AUTO_BATCH
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_BATCH:
        raise ValueError(f"batch_size: an integer in [1, {MAX_BATCH}] or auto, got {value!r}")
    return value


def _text(args: dict[str, Any], key: str, default: str) -> str:
    value = args.get(key, default)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"model_args {key}: expected a non-empty name, got {value!r}")
    return value


def _positive(args: dict[str, Any], key: str, default: Optional[int]) -> Optional[int]:
    value = args.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 1_000_000:
        raise ValueError(f"model_args {key}: expected a whole number in [1, 1000000], got {value!r}")
    return value


def _check_device(device: str) -> None:
    import torch

    try:
        torch.device(device)
    except (RuntimeError, ValueError):
        raise ValueError(f"model_args device: {device!r} is not a device (cpu, cuda, cuda:1, mps, ...)") from None


def check_folder(path: str, name: str) -> None:
    """A folder that exists and is writable, or that can be created under a writable parent."""
    probe = os.path.abspath(path)
    while not os.path.exists(probe):
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    if not os.path.isdir(probe) or not os.access(probe, os.W_OK):
        raise ValueError(f"{name}: cannot write under {path!r} (give a folder in a writable place)")
