"""The Run panel: knobs -> validated DecodeConfig, and `record`, the one GPU-decorated call.

`config_from_inputs` is pure (UI values -> DecodeConfig or one readable message). `record` runs s2d2.generate in
a worker thread and yields plain dicts (ZeroGPU pickles results): progress after every block, then the trace.
"""
from __future__ import annotations

import dataclasses
import os
import queue
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Optional

from s2d2.config import (ACCEPTANCE, ESTIMATORS, LOOPS, MAX_POST_STEPS, METHODS, POLICIES, REMASKING, SCORE_TYPES,
                         DecodeConfig, preset, presets)

try:  # a no-op decorator off Hugging Face Spaces (and when the package is missing)
    import spaces  # type: ignore

    _GPU = spaces.GPU
except Exception:  # pragma: no cover - depends on the environment
    def _GPU(*args: Any, **kwargs: Any) -> Any:
        if args and callable(args[0]) and not kwargs:
            return args[0]
        return lambda fn: fn

MAX_PROMPT_CHARS = 2000
MAX_GEN_LENGTH = 512
MAX_RUN_SECONDS = 120.0
DEFAULT_MODEL = "tiny"
DEFAULT_PRESET = "sdar-config-a"
EXAMPLE_PROMPTS = [
    "Tom has 12 apples. He buys 7 more. How many apples does Tom have now?",
    "Noah has 24 apples. He doubles the apples. He buys 6 more. How many apples does Noah have now?",
    "It is a truth universally acknowledged, that",
]


@dataclass(frozen=True)
class Knob:
    name: str  # DecodeConfig field (or "seed")
    label: str
    kind: str  # "choice" | "int" | "float" | "bool"
    choices: tuple[str, ...] = ()
    lo: float = 0.0
    hi: float = 1.0
    step: float = 1.0
    info: str = ""
    optional_zero: bool = False  # 0 in the UI means None (auto / off)
    group: str = ""


_B, _R, _P = "Blocks and length", "Baseline remasking (skipped steps)", "Routing policy"
_E, _S, _L = "Estimator and verification", "Sampling", "Self-correction (LLaDA2.x editing loop)"
KNOBS: tuple[Knob, ...] = (
    Knob("method", "Method", "choice", METHODS, group=_B,
         info="ar: one token per forward; diffusion: the baseline, never verifies; s2d2: draft, route, verify"),
    Knob("block_length", "Block length B", "int", lo=1, hi=64, group=_B),
    Knob("denoising_steps", "Denoising steps S (0 = B)", "int", lo=0, hi=64, optional_zero=True, group=_B),
    Knob("sub_block_length", "Sub-block (shifted models; 0 = whole block)", "int", lo=0, hi=64, optional_zero=True,
         group=_B),
    Knob("gen_length", "Generation length", "int", lo=1, hi=MAX_GEN_LENGTH, group=_B),
    Knob("remasking", "Remasking rule", "choice", REMASKING, group=_R),
    Knob("confidence_threshold", "Confidence threshold τ", "float", lo=0.0, hi=1.0, step=0.01, group=_R),
    Knob("eb_gamma", "Entropy bound γ", "float", lo=0.01, hi=5.0, step=0.01, group=_R),
    Knob("policy", "Routing policy", "choice", POLICIES, group=_P,
         info="decides at each step whether the verifier forward is worth it"),
    Knob("min_span_length", "Min span length τ_span", "int", lo=1, hi=64, group=_P),
    Knob("score_threshold", "Score threshold τ_score", "float", lo=-10.0, hi=10.0, step=0.1, group=_P),
    Knob("score_type", "Score type", "choice", SCORE_TYPES, group=_P),
    Knob("penalty_coef", "Penalty c", "float", lo=0.0, hi=10.0, step=0.1, group=_P),
    Knob("hysteresis_on", "Hysteresis τ_on", "float", lo=-10.0, hi=10.0, step=0.1, group=_P),
    Knob("hysteresis_off", "Hysteresis τ_off", "float", lo=-10.0, hi=10.0, step=0.1, group=_P),
    Knob("ucb_beta", "UCB β", "float", lo=0.0, hi=5.0, step=0.1, group=_P),
    Knob("estimator", "Acceptance estimator", "choice", ESTIMATORS, group=_E),
    Knob("negexp_beta", "neg-exp β", "float", lo=0.0, hi=10.0, step=0.1, group=_E),
    Knob("acceptance", "Acceptance mode", "choice", ACCEPTANCE, group=_E,
         info="paper: u < min(1, q/p); greedy_exact: draft == argmax q (AR-exact)"),
    Knob("ratio_gamma", "Ratio tempering γ", "float", lo=0.1, hi=5.0, step=0.1, group=_E),
    Knob("allow_resample", "Resample at first rejection", "bool", group=_E),
    Knob("cache_ver", "cache_ver (causal cache)", "bool", group=_E,
         info="causal prefill and commit: the verifier then equals exact AR"),
    Knob("draft_ver", "draft_ver (causal decoded prefix in drafts)", "bool", group=_E),
    Knob("loop", "Block loop", "choice", LOOPS, group=_L,
         info="editing: the LLaDA2.x loop (edits, EOS early stop, no commit after the last block)"),
    Knob("editing_threshold", "Edit threshold τ_edit (0 = editing off)", "float", lo=0.0, hi=1.0, step=0.01,
         optional_zero=True, group=_L, info="replace a decoded token when the draft there differs with p > τ_edit"),
    Knob("max_post_steps", "Editing steps after the last mask", "int", lo=0, hi=MAX_POST_STEPS, group=_L),
    Knob("temperature", "Temperature", "float", lo=0.0, hi=2.0, step=0.05, group=_S),
    Knob("seed", "Seed", "int", lo=0, hi=2**31 - 1, group=_S),
)
KNOB_NAMES = tuple(k.name for k in KNOBS)


def preset_values(name: str, seed: int = 0) -> list[Any]:
    """UI values (KNOBS order) for a preset; gen_length capped for the app."""
    cfg = preset(name, gen_length=min(64, MAX_GEN_LENGTH))
    values = []
    for knob in KNOBS:
        value = seed if knob.name == "seed" else getattr(cfg, knob.name)
        if knob.optional_zero and value is None:
            value = 0
        values.append(value)
    return values


def preset_choices() -> list[tuple[str, str]]:
    return [(f"{name} — {line}", name) for name, line in presets().items()]


def _coerce(knob: Knob, value: Any) -> Any:
    if value is None or (isinstance(value, str) and not value.strip() and knob.kind != "choice"):
        raise ValueError(f"{knob.name}: no value given")
    if knob.kind == "int":
        f = float(value)
        if f != int(f):
            raise ValueError(f"{knob.name}: expected a whole number, got {value}")
        v: Any = int(f)
        return None if knob.optional_zero and v == 0 else v
    if knob.kind == "float":
        f = float(value)
        return None if knob.optional_zero and f == 0 else f
    if knob.kind == "bool":
        return bool(value)
    return str(value)


def config_from_inputs(*values: Any) -> tuple[Optional[DecodeConfig], int, Optional[str]]:
    """UI values in KNOBS order -> (config, seed, None) or (None, 0, "one readable message")."""
    if len(values) != len(KNOBS):
        return None, 0, f"internal: expected {len(KNOBS)} settings, got {len(values)}"
    data: dict[str, Any] = {}
    try:
        for knob, value in zip(KNOBS, values):
            data[knob.name] = _coerce(knob, value)
        seed = data.pop("seed")
        if not 0 <= seed < 2**31:
            raise ValueError(f"seed: must be in [0, {2**31 - 1}], got {seed}")
        if data["gen_length"] > MAX_GEN_LENGTH:
            raise ValueError(f"gen_length: at most {MAX_GEN_LENGTH} tokens in this app, got {data['gen_length']}")
        cfg = DecodeConfig.from_dict(data)
    except (ValueError, TypeError, OverflowError) as exc:
        return None, 0, f"Invalid setting — {exc}"
    return cfg, int(seed), None


def check_model(name: Any) -> Optional[str]:
    """Only registry names (or models already loaded) unless S2D2_ALLOW_ANY_MODEL=1: a public Space must not
    load arbitrary folders or Hub repos on request."""
    if not isinstance(name, str) or not name.strip():
        return "Pick a model."
    if name in _MODELS or name in model_choices() or os.environ.get("S2D2_ALLOW_ANY_MODEL") == "1":
        return None
    return f"Unknown model {name[:80]!r}: pick one from the list (set S2D2_ALLOW_ANY_MODEL=1 to allow any id or path)."


def check_prompt(prompt: Any) -> Optional[str]:
    if not isinstance(prompt, str) or not prompt.strip():
        return "Type a prompt first (or pick an example)."
    if len(prompt) > MAX_PROMPT_CHARS:
        return f"The prompt is {len(prompt)} characters; this app accepts at most {MAX_PROMPT_CHARS}."
    return None


def gpu_duration(prompt: str, model_name: str, config: dict[str, Any], seed: int = 0) -> int:
    """Seconds to request from ZeroGPU, from the worst-case forward count of the request."""
    gen = int(config.get("gen_length", 64))
    block = max(1, int(config.get("block_length", 4)))
    forwards = 2 * gen + gen // block + 2  # draft + verify per token at worst, plus commits and prefill
    per_forward = 0.002 if model_name.startswith("tiny") else 0.04
    return int(min(MAX_RUN_SECONDS, 20 + forwards * per_forward))


_MODELS: dict[str, Any] = {}
_MODEL_LOCK = threading.Lock()


def get_model(name: str) -> Any:
    """Load (once per process) and return a model; raises ValueError with a readable message."""
    with _MODEL_LOCK:
        if name not in _MODELS:
            try:
                import s2d2

                _MODELS[name] = s2d2.load_model(name)
            except Exception as exc:  # ModelLoadError, missing files, no network, out of memory
                raise ValueError(f"Could not load model {name!r}: {str(exc)[:300]}") from None
        return _MODELS[name]


def preload_on_spaces(name: str = DEFAULT_MODEL) -> Optional[str]:
    """On a Space, load the default model at start-up (ZeroGPU runs `record` in a fork that would otherwise reload
    it every call). Returns an error message or None; local runs load lazily on the first Run."""
    if not os.environ.get("SPACE_ID"):
        return None
    try:
        get_model(name)
    except ValueError as exc:
        return str(exc)
    return None


def model_choices() -> list[str]:
    try:
        from s2d2.models import known_models

        names = [n for n in known_models() if isinstance(n, str)]
    except Exception:
        names = []
    return [DEFAULT_MODEL] + [n for n in names if n != DEFAULT_MODEL]


_END = object()


def record_stream(prompt: str, model_name: str, config: dict[str, Any], seed: int,
                  generate: Callable[..., Any], load: Callable[[str], Any],
                  max_seconds: float = MAX_RUN_SECONDS, min_interval: float = 0.2) -> Iterator[dict[str, Any]]:
    """Run `generate` in a thread; yield {"kind": "progress"|"done"|"error", ...} plain dicts."""
    try:
        cfg = DecodeConfig.from_dict(config)
        model = load(model_name)
    except ValueError as exc:
        yield {"kind": "error", "message": str(exc)}
        return
    events: "queue.Queue[Any]" = queue.Queue()
    stop = threading.Event()
    start = time.monotonic()

    def on_block(steps: list[Any], *_: Any, **__: Any) -> None:
        commits = [[c.position, c.text, c.how] for s in steps for c in s.commits]
        events.put({"kind": "progress", "steps": len(steps), "commits": commits,
                    "elapsed": round(time.monotonic() - start, 2)})

    def work() -> None:
        try:
            result = generate(model, prompt, cfg, seed=seed, on_block=on_block, should_stop=stop.is_set,
                              max_seconds=max_seconds)
            events.put({"kind": "done", "trace": result.trace.to_dict(), "text": result.text,
                        "elapsed": round(time.monotonic() - start, 2)})
        except ValueError as exc:
            events.put({"kind": "error", "message": str(exc)[:500]})
        except Exception as exc:  # the UI shows a message, never a traceback
            events.put({"kind": "error", "message": f"The run failed: {type(exc).__name__}: {str(exc)[:300]}"})
        finally:
            events.put(_END)

    thread = threading.Thread(target=work, name="s2d2-record", daemon=True)
    thread.start()
    last = 0.0
    try:
        while True:
            item = events.get()
            if item is _END:
                break
            if item["kind"] == "progress":
                now = time.monotonic()
                if now - last < min_interval:
                    continue
                last = now
            yield item
    finally:  # a closed generator (Stop button, client gone) stops the decode at the next block
        stop.set()


@_GPU(duration=gpu_duration)
def record(prompt: str, model_name: str, config: dict[str, Any], seed: int = 0) -> Iterator[dict[str, Any]]:
    """The only GPU function: decode one prompt and stream progress, then the trace as a plain dict."""
    import s2d2

    yield from record_stream(prompt, model_name, config, seed, s2d2.generate, get_model)


def config_dict(cfg: DecodeConfig) -> dict[str, Any]:
    return dataclasses.asdict(cfg)
