"""Which models a visitor may run, and the few kept in memory.

A public Space must not download whatever a visitor names. Only the allow-list is offered and loaded:
`S2D2_MODELS="tiny,JetLM/SDAR-1.7B-Chat"` sets it; by default it holds the bundled models (tiny, tiny-llada2) plus
the registry checkpoints that fit this machine (offline: only those already in the local Hugging Face cache), and
never one over MAX_DEFAULT_GB of weights (the 30B MoE is 61 GB). "Fits" counts what a load really takes: the weights
in the dtype the loader uses on this device (bfloat16 on a GPU, float32 on the CPU: twice the bf16 size on disk),
times HEADROOM for activations and the KV cache, and S2D2_MAX_LOADED_MODELS of them loaded at once: the largest that
many allowed models together must fit the free GPU memory (or the available RAM without a GPU). A name off the list
is refused before anything is downloaded. At most S2D2_MAX_LOADED_MODELS models stay loaded; the least recently used
one is evicted before another loads.
`S2D2_ALLOW_ANY_MODEL=1` lifts the list (for a private machine only).
"""
from __future__ import annotations

import gc
import os
import threading
from collections import OrderedDict
from functools import cache
from typing import Any, Optional

from s2d2.limits import limits

DEFAULT_MODEL = "tiny"
MAX_DEFAULT_GB = 20.0
HEADROOM = 1.3  # weights x this must fit: activations, KV cache, allocator slack

_LOADED: "OrderedDict[str, Any]" = OrderedDict()  # name -> model, least recently used first
_LOCK = threading.Lock()
_LOADING: dict[str, threading.Lock] = {}


def on_gpu() -> bool:
    """Whether models load on a GPU here (the loader's default device)."""
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:  # no driver, ...
        return False


def free_memory_gb() -> float:
    """Free GPU memory (first device), else available RAM, in GiB; 0 when neither can be read."""
    try:
        import torch

        if torch.cuda.is_available():
            free, _ = torch.cuda.mem_get_info()
            return free / 2**30
    except Exception:  # no driver, ZeroGPU outside a GPU call, ...
        pass
    return available_ram_gb()


def available_ram_gb() -> float:
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) / 2**20
    except (OSError, ValueError, IndexError):
        pass
    return 0.0


def load_gb(size_gb: float, gpu: bool) -> float:
    """Memory one loaded model takes: bf16 weights on a GPU, float32 (twice the bf16 size) on the CPU, with
    HEADROOM."""
    return size_gb * (1.0 if gpu else 2.0) * HEADROOM


def fitting(sizes: dict[str, float], budget_gb: float, loaded: int) -> list[str]:
    """The names (smallest first) such that the `loaded` largest of them, loaded together, take at most
    `budget_gb`; `sizes` is each model's load_gb."""
    chosen: list[float] = []
    names = []
    for name, gb in sorted(sizes.items(), key=lambda kv: kv[1]):
        worst = sum(sorted(chosen + [gb], reverse=True)[:max(1, loaded)])
        if worst <= budget_gb:
            chosen.append(gb)
            names.append(name)
    return names


@cache
def default_models() -> tuple[str, ...]:
    """The bundled models, then every registry checkpoint that fits this machine and can be fetched here (offline:
    only those in the local cache), decided once, at start-up."""
    from s2d2.models.registry import known_models, lookup

    gpu = on_gpu()
    entries = [(name, lookup(name)) for name in known_models()]
    bundled = {n: load_gb(_folder_gb(e.path), gpu) for n, e in entries if e is not None and e.path is not None
               and e.path.is_dir()}
    hub = {n: load_gb(e.size_gb, gpu) for n, e in entries
           if e is not None and e.repo and 0 < e.size_gb <= MAX_DEFAULT_GB and fetchable(e.repo, e.adapter)}
    allowed = set(fitting({**bundled, **hub}, free_memory_gb(), limits().max_loaded_models)) | set(bundled)
    return tuple(dict.fromkeys([DEFAULT_MODEL, *bundled, *(n for n in hub if n in allowed)]))


def fetchable(*repos: Optional[str]) -> bool:
    """Whether every named Hub repo can be fetched here: offline, only what the local cache holds (a model offered
    offline that cannot load would be a dead choice in the list). s2d2/models/hub.py `can_fetch`."""
    from s2d2.models.hub import can_fetch

    return all(can_fetch(r) for r in repos if r)


def _folder_gb(path: Any) -> float:
    """Size of a bundled model's weight files, as bf16 (the files of the tiny models are float32 or bf16; this
    over-counts a float32 file, which is the safe side)."""
    return sum(f.stat().st_size for f in path.glob("*.safetensors")) / 2**30


def allowed_models() -> list[str]:
    env = os.environ.get("S2D2_MODELS", "").strip()
    if env:
        return [n.strip() for n in env.split(",") if n.strip()]
    return list(default_models())


def model_choices() -> list[str]:
    """What the Run tab's dropdown offers."""
    return allowed_models()


def check_model(name: Any) -> Optional[str]:
    """None when the name may be run here; otherwise the message refusing it (nothing is downloaded)."""
    if not isinstance(name, str) or not name.strip():
        return "Pick a model."
    if name in _LOADED or name in allowed_models() or os.environ.get("S2D2_ALLOW_ANY_MODEL") == "1":
        return None
    from s2d2.models.registry import lookup

    entry = lookup(name)
    if entry is not None:
        return (f"Model {name[:80]!r} is not offered on this server (about {entry.size_gb:g} GB of weights): pick "
                "one from the list. An operator sets the list with S2D2_MODELS.")
    return f"Unknown model {name[:80]!r}: pick one from the list (an operator sets it with S2D2_MODELS)."


def register_model(name: str, model: Any) -> None:
    """Put an already built model in the cache (tests, preloads); it counts toward the loaded limit."""
    with _LOCK:
        _LOADED[name] = model
        _LOADED.move_to_end(name)
        _evict(limits().max_loaded_models)


def forget_model(name: str) -> None:
    with _LOCK:
        _LOADED.pop(name, None)


def loaded_models() -> list[str]:
    return list(_LOADED)


def get_model(name: str) -> Any:
    """The loaded model, loading it (once, other models keep serving meanwhile) if it is allowed; ValueError with
    a readable message otherwise."""
    problem = check_model(name)
    if problem:
        raise ValueError(problem)
    with _LOCK:
        if name in _LOADED:
            _LOADED.move_to_end(name)
            return _LOADED[name]
        loading = _LOADING.setdefault(name, threading.Lock())
    with loading:
        with _LOCK:
            if name in _LOADED:
                return _LOADED[name]
            _evict(limits().max_loaded_models - 1)  # make room before the new weights arrive
        try:
            import s2d2

            model = s2d2.load_model(name)
        except Exception as exc:  # ModelLoadError, missing files, no network, out of memory
            raise ValueError(f"Could not load model {name!r}: {str(exc)[:300]}") from None
        with _LOCK:
            _LOADED[name] = model
            _evict(limits().max_loaded_models)
        return model


def _evict(keep: int) -> None:
    """Drop least recently used models until at most `keep` remain (call with _LOCK held)."""
    dropped = False
    while len(_LOADED) > max(0, keep):
        _LOADED.popitem(last=False)
        dropped = True
    if dropped:
        gc.collect()
        try:
            import torch

            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        except Exception:
            pass


def preload_on_spaces(name: str = DEFAULT_MODEL) -> Optional[str]:
    """On a Space, load the default model at start-up (ZeroGPU runs decodes in a fork that would otherwise reload
    it every call). Returns an error message or None; local runs load lazily on the first Run."""
    if not os.environ.get("SPACE_ID"):
        return None
    try:
        get_model(name)
    except ValueError as exc:
        return str(exc)
    return None
