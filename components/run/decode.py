"""The Run panel: knobs -> validated DecodeConfig, and the GPU-decorated decodes (Run, Compare, what-if re-run).

`config_from_inputs` is pure (UI values -> DecodeConfig or one readable message, within s2d2/limits.py).
`record` runs s2d2.generate in a worker thread and yields plain dicts (ZeroGPU pickles results): progress after
every block, then the trace; `record_lanes` does the same for several configurations under one time budget
(Compare, what-if re-run). Every forward of a run first checks its job's stop flag (components/serve/gpu_slot.py: Stop
button, closed tab, closed stream), and a stopped or timed-out run still returns its trace up to the last complete
block. Which models may run: components/serve/model_pool.py.
"""
from __future__ import annotations

import dataclasses
import queue
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Optional

from s2d2.config import ACCEPTANCE, ESTIMATORS, METHODS, POLICIES, REMASKING, DecodeConfig, preset
from s2d2.decoding.layout import block_lengths
from s2d2.limits import (SEED_MAX, check_lengths, check_prompt_chars, check_prompt_tokens, check_seed, int_text,
                         limits)
from s2d2.policies import Knob as PolicyKnob
from s2d2.policies import editing_knobs, option_knobs, pipeline_knobs, routing_knobs

from components.views.canvas import live_rows
from components.serve.gpu_slot import cancelled, current_job
from components.run.lane_rounds import TIMED_ROUNDS, lane_rounds
from components.serve.model_pool import DEFAULT_MODEL, check_model, forget_model, get_model, model_choices, preload_on_spaces, register_model
from components.serve.input_numbers import as_float

try:  # a no-op decorator off Hugging Face Spaces (and when the package is missing)
    import spaces  # type: ignore

    _GPU = spaces.GPU
except Exception:  # pragma: no cover - depends on the environment
    def _GPU(*args: Any, **kwargs: Any) -> Any:
        if args and callable(args[0]) and not kwargs:
            return args[0]
        return lambda fn: fn

MAX_PROMPT_CHARS = limits().max_prompt_chars  # layout values; the checks read limits() at call time
MAX_GEN_LENGTH = limits().max_gen_tokens
MAX_BLOCK_LENGTH = limits().max_block_length
MAX_RUN_SECONDS = limits().max_run_seconds
DEFAULT_PRESET = "sdar-config-a"
# model family (registry) -> the preset it opens on: LLaDA2.x S2D2 + editing; D2F S2D2 on the pipeline (Dream: the
# reference's stability setting)
FAMILY_PRESETS = {"llada2": "llada2-quality", "d2f_llada": "d2f-s2d2", "d2f_dream": "d2f-s2d2-dream"}
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


def _knob(k: PolicyKnob, group: str) -> Knob:
    """A Run-panel knob from a policy's (or decoder option's) own declaration; an optional one shows None as 0."""
    lo, hi = k.slider
    return Knob(k.field, k.label, k.kind, k.choices, lo, hi, k.step, k.help, optional_zero=k.optional, group=group)


_B, _R, _P = "Blocks and length", "Baseline remasking (skipped steps)", "Routing policy"
_E, _S, _F = "Estimator and verification", "Sampling", "Fewer forwards (beyond the paper)"
_L = "Self-correction (LLaDA2.x editing loop)"
_D = "D2F pipeline (several blocks in flight)"
KNOBS: tuple[Knob, ...] = (
    Knob("method", "Method", "choice", METHODS, group=_B,
         info="ar: one token per forward; diffusion: the baseline, never verifies; s2d2: draft, route, verify"),
    Knob("block_length", "Block length B", "int", lo=1, hi=MAX_BLOCK_LENGTH, group=_B),
    Knob("denoising_steps", "Denoising steps S (0 = B)", "int", lo=0, hi=MAX_BLOCK_LENGTH, optional_zero=True,
         group=_B),
    Knob("sub_block_length", "Sub-block (shifted models; 0 = whole block)", "int", lo=0, hi=MAX_BLOCK_LENGTH,
         optional_zero=True, group=_B),
    Knob("gen_length", "Generation length", "int", lo=1, hi=MAX_GEN_LENGTH, group=_B),
    Knob("remasking", "Remasking rule", "choice", REMASKING, group=_R),
    Knob("confidence_threshold", "Confidence threshold τ", "float", lo=0.0, hi=1.0, step=0.01, group=_R),
    Knob("eb_gamma", "Entropy bound γ", "float", lo=0.01, hi=5.0, step=0.01, group=_R),
    Knob("policy", "Routing policy", "choice", POLICIES, group=_P,
         info="decides at each step whether the verifier forward is worth it"),
    *(_knob(k, _P) for k in routing_knobs() if not k.advanced),  # each policy declares its knobs
    Knob("estimator", "Acceptance estimator", "choice", ESTIMATORS, group=_E),
    Knob("negexp_beta", "neg-exp β", "float", lo=0.0, hi=10.0, step=0.1, group=_E),
    Knob("acceptance", "Acceptance mode", "choice", ACCEPTANCE, group=_E,
         info="paper: u < min(1, q/p); greedy_exact: draft == argmax q (AR-exact)"),
    Knob("ratio_gamma", "Ratio tempering γ", "float", lo=0.1, hi=5.0, step=0.1, group=_E),
    Knob("allow_resample", "Resample at first rejection", "bool", group=_E),
    Knob("cache_ver", "cache_ver (causal cache)", "bool", group=_E,
         info="causal prefill and commit: the verifier then equals exact AR"),
    Knob("draft_ver", "draft_ver (causal decoded prefix in drafts)", "bool", group=_E),
    *(_knob(k, _L) for k in editing_knobs()),  # the editing loop declares its own (s2d2/policies/self_correction.py)
    *(_knob(k, _D) for k in pipeline_knobs() if not k.advanced),  # and the pipeline (s2d2/policies/pipeline.py)
    Knob("temperature", "Temperature", "float", lo=0.0, hi=2.0, step=0.05, group=_S),
    Knob("seed", "Seed", "int", lo=0, hi=SEED_MAX, group=_S),
    *(_knob(k, _F) for k in option_knobs() if not k.advanced),
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


def preset_for_model(model_name: Any, loop: Any) -> Optional[str]:
    """The preset to switch to when the model changes: its family's (a LLaDA2.x model opens on S2D2 with editing, a
    D2F model on S2D2 over the pipeline) when the loop does not fit it yet, DEFAULT_PRESET when leaving the editing
    or pipeline loop for another model; None to keep the knobs as they are (same kind of model, or a folder the
    registry does not know)."""
    from s2d2.models.registry import lookup

    entry = lookup(model_name) if isinstance(model_name, str) else None
    if entry is None:
        return None
    family = FAMILY_PRESETS.get(entry.family)
    if family is not None:
        return family if loop != preset(family).loop else None
    return DEFAULT_PRESET if loop in ("editing", "pipeline") else None


def _coerce(knob: Knob, value: Any) -> Any:
    if value is None or (isinstance(value, str) and not value.strip() and knob.kind != "choice"):
        raise ValueError(f"{knob.name}: no value given")
    if knob.kind == "int":
        if isinstance(value, int) and not isinstance(value, bool):
            v: Any = value  # exact, however large: the bound check names it (limits.int_text)
        else:
            f = as_float(value)
            if f is None or f != int(f):
                raise ValueError(f"{knob.name}: expected a whole number, got {_shown(value)}")
            v = int(f)
        return None if knob.optional_zero and v == 0 else v
    if knob.kind == "float":
        f = as_float(value)
        if f is None:
            raise ValueError(f"{knob.name}: expected a number in [{knob.lo:g}, {knob.hi:g}], got {_shown(value)}")
        return None if knob.optional_zero and f == 0 else f
    if knob.kind == "bool":
        return bool(value)
    return str(value)[:100]


def _shown(value: Any) -> str:
    """A bad value as a message quotes it: short, and never a 4300-digit int (str() refuses those)."""
    return int_text(value) if isinstance(value, int) else repr(str(value)[:40])


def config_from_inputs(*values: Any) -> tuple[Optional[DecodeConfig], int, Optional[str]]:
    """UI values in KNOBS order -> (config, seed, None) or (None, 0, "one readable message")."""
    if len(values) != len(KNOBS):
        return None, 0, f"internal: expected {len(KNOBS)} settings, got {len(values)}"
    data: dict[str, Any] = {}
    try:
        for knob, value in zip(KNOBS, values):
            data[knob.name] = _coerce(knob, value)
        seed = check_seed(data.pop("seed"))
        cfg = check_config(DecodeConfig.from_dict(data))
    except (ValueError, TypeError, OverflowError) as exc:
        return None, 0, f"Invalid setting — {exc}"
    return cfg, int(seed), None


def check_config(cfg: DecodeConfig) -> DecodeConfig:
    """The app's caps on top of DecodeConfig's own ranges (ValueError naming the field and the bound)."""
    check_lengths(cfg.gen_length, cfg.block_length)
    top = limits().max_block_length
    if cfg.adaptive_block and cfg.adaptive_max_block > top:
        raise ValueError(f"adaptive_max_block: at most {top} (S2D2_MAX_BLOCK_LENGTH), got {cfg.adaptive_max_block}")
    return cfg


def check_prompt(prompt: Any) -> Optional[str]:
    if not isinstance(prompt, str) or not prompt.strip():
        return "Type a prompt first (or pick an example)."
    try:
        check_prompt_chars(prompt)
    except ValueError as exc:
        return f"The {exc}."
    return None


def generate_within_limits(model: Any, prompt: Any, cfg: DecodeConfig, **kwargs: Any) -> Any:
    """s2d2.generate, refusing a prompt over S2D2_MAX_PROMPT_TOKENS (counted after the chat template)."""
    from s2d2.api import encode_prompt, generate

    check_prompt_tokens(len(encode_prompt(model, prompt)[0]))
    return generate(model, prompt, cfg, **kwargs)


def gpu_duration(prompt: Any, model_name: str, config: dict[str, Any], seed: int = 0, job_id: str = "") -> int:
    """Seconds to request from ZeroGPU, from the worst-case forward count of the request."""
    gen = int(config.get("gen_length", 64))
    block = max(1, int(config.get("block_length", 4)))
    post = int(config.get("max_post_steps") or 0)  # the editing loop's mask-free steps, per block
    forwards = 2 * gen + (gen // block + 1) * (1 + post) + 1  # draft + verify per token at worst, commits, prefill
    per_forward = 0.002 if model_name.startswith("tiny") else 0.04
    return int(min(limits().max_run_seconds, 20 + forwards * per_forward))


class RunStopped(Exception):
    """Compare lanes or a what-if re-run that the visitor stopped; the message says what was kept."""


class _Stoppable:
    """The model as one run sees it: every forward first checks the run's stop flag and, once it is up, raises
    s2d2's StopDecoding instead, so a stopped run frees the GPU within one forward and still returns its trace up to
    the last complete block. Everything else is the model's."""

    def __init__(self, model: Any, stopped: Callable[[], bool]) -> None:
        from s2d2.api import StopDecoding

        self._model, self._stopped, self._stop = model, stopped, StopDecoding

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        if self._stopped():
            raise self._stop()
        return self._model.forward(*args, **kwargs)


_END = object()
WARMUP_STATUS = ("Preparing the GPU fast path: capturing CUDA graphs for this block length (a few seconds, once per "
                 "model and block length)…")


def record_stream(prompt: Any, model_name: str, config: dict[str, Any], seed: int,
                  generate: Callable[..., Any], load: Callable[[str], Any],
                  max_seconds: Optional[float] = None, min_interval: float = 0.2,
                  cancel: Callable[[], bool] = lambda: False) -> Iterator[dict[str, Any]]:
    """Run `generate` in a thread; yield {"kind": "progress"|"done"|"error", ...} plain dicts. The run ends early
    with its partial trace as "done": after `max_seconds` (default: S2D2_MAX_RUN_SECONDS; finish_reason
    "time_limit"), and within one forward once `cancel()` turns true ("cancelled": the blocks completed before it).
    Closing this generator stops the decode within one forward too."""
    try:
        cfg = check_config(DecodeConfig.from_dict(config))
        model = load(model_name)
    except ValueError as exc:
        yield {"kind": "error", "message": str(exc)}
        return
    events: "queue.Queue[Any]" = queue.Queue()
    stop = threading.Event()
    start = time.monotonic()
    seconds = limits().max_run_seconds if max_seconds is None else max_seconds

    def stopped() -> bool:
        return stop.is_set() or cancel()

    def on_block(steps: list[Any], *_: Any, **__: Any) -> None:
        events.put({"kind": "progress", "steps": len(steps), "commits": live_rows(steps),
                    "stop_ids": list(getattr(getattr(model, "spec", None), "stop_ids", ())),
                    "elapsed": round(time.monotonic() - start, 2)})

    def work() -> None:
        try:
            blocks = block_lengths(cfg)
            if getattr(model, "needs_warmup", lambda _: False)(blocks):  # static backend on a GPU: once per shape
                events.put({"kind": "progress", "steps": 0, "commits": [], "elapsed": 0.0, "status": WARMUP_STATUS})
                model.warmup(block_lengths=blocks)
            result = generate(_Stoppable(model, stopped), prompt, cfg, seed=seed, on_block=on_block,
                              should_stop=stopped, max_seconds=seconds)
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
    finally:  # a closed generator (Stop button, client gone) stops the decode before its next forward
        stop.set()


def record(prompt: str, model_name: str, config: dict[str, Any], seed: int = 0) -> Iterator[dict[str, Any]]:
    """Decode one prompt and stream progress, then the trace as a plain dict (through the GPU function)."""
    return _record_on_gpu(prompt, model_name, config, seed, current_job())


@_GPU(duration=gpu_duration)
def _record_on_gpu(prompt: str, model_name: str, config: dict[str, Any], seed: int,
                   job_id: str) -> Iterator[dict[str, Any]]:
    yield from record_stream(prompt, model_name, config, seed, generate_within_limits, get_model,
                             cancel=lambda: cancelled(job_id))


def record_lanes(prompt: Any, model_name: str, configs: dict[str, dict[str, Any]], seed: int,
                 timed_rounds: int = TIMED_ROUNDS) -> Iterator[dict[str, Any]]:
    """Decode several configurations in interleaved rounds (a warm-up round, then `timed_rounds` timed ones:
    components/run/lane_rounds.py), all within one S2D2_MAX_RUN_SECONDS budget; yields progress (with "lane"), then
    {"kind": "done", "traces": {name: trace dict}, "walls": {name: [seconds]}}, or one "error", or one "stopped"
    (the job's Stop: its lane ends within one forward and nothing more starts)."""
    return _lanes_on_gpu(prompt, model_name, configs, seed, current_job(), timed_rounds)


def lanes_seconds(prompt: Any, model_name: str, configs: dict[str, dict[str, Any]], seed: int = 0,
                  job_id: str = "", timed_rounds: int = TIMED_ROUNDS) -> int:
    rounds = 1 + max(0, timed_rounds)
    return int(min(limits().max_run_seconds, rounds * sum(gpu_duration("", model_name, c) for c in configs.values())))


@_GPU(duration=lanes_seconds)
def _lanes_on_gpu(prompt: Any, model_name: str, configs: dict[str, dict[str, Any]], seed: int,
                  job_id: str, timed_rounds: int = TIMED_ROUNDS) -> Iterator[dict[str, Any]]:
    def run(name: str, config: dict[str, Any], left: float) -> Iterator[dict[str, Any]]:
        return record_stream(prompt, model_name, config, seed, generate_within_limits, get_model, max_seconds=left,
                             cancel=lambda: cancelled(job_id))

    yield from lane_rounds(configs, run, limits().max_run_seconds, timed_rounds)


def config_dict(cfg: DecodeConfig) -> dict[str, Any]:
    return dataclasses.asdict(cfg)
