"""The decodes as the Space runs them: on Hugging Face ZeroGPU each is decorated with spaces.GPU and a duration bounded
before it starts (a no-op decorator elsewhere); `record` is one run (in the model's shared batch when sharing is
on), `record_lanes` several configurations under one
time budget (Compare, what-if re-run)."""
from __future__ import annotations

from typing import Any, Iterator

from s2d2.limits import limits
from components.serve.gpu_slot import cancelled, current_job
from components.run.lane_rounds import TIMED_ROUNDS, lane_rounds
from components.serve.model_pool import get_model
from components.run.shared_batch import shared_generate, sharing_on
from components.run.workers import generate_within_limits, record_stream


try:  # a no-op decorator off Hugging Face Spaces (and when the package is missing)
    import spaces  # type: ignore

    _GPU = spaces.GPU
except Exception:  # pragma: no cover - depends on the environment
    def _GPU(*args: Any, **kwargs: Any) -> Any:
        if args and callable(args[0]) and not kwargs:
            return args[0]
        return lambda fn: fn


def gpu_duration(prompt: Any, model_name: str, config: dict[str, Any], seed: int = 0, job_id: str = "") -> int:
    """Seconds to request from ZeroGPU, from the worst-case forward count of the request."""
    gen = int(config.get("gen_length", 64))
    block = max(1, int(config.get("block_length", 4)))
    post = int(config.get("max_post_steps") or 0)  # the editing loop's mask-free steps, per block
    forwards = 2 * gen + (gen // block + 1) * (1 + post) + 1  # draft + verify per token at worst, commits, prefill
    per_forward = 0.002 if model_name.startswith("tiny") else 0.04
    return int(min(limits().max_run_seconds, 20 + forwards * per_forward))


def record(prompt: str, model_name: str, config: dict[str, Any], seed: int = 0) -> Iterator[dict[str, Any]]:
    """Decode one prompt and stream progress, then the trace as a plain dict (through the GPU function)."""
    return _record_on_gpu(prompt, model_name, config, seed, current_job())


@_GPU(duration=gpu_duration)
def _record_on_gpu(prompt: str, model_name: str, config: dict[str, Any], seed: int,
                   job_id: str) -> Iterator[dict[str, Any]]:
    # Sharing on: the decode joins the model's shared batch (components/run/shared_batch.py); off: it runs alone.
    generate = shared_generate(model_name) if sharing_on() else generate_within_limits
    yield from record_stream(prompt, model_name, config, seed, generate, get_model, cancel=lambda: cancelled(job_id))


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
