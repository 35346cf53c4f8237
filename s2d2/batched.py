"""`generate_batch`: many prompts decoded together, each with the answer `generate` gives it alone.

Every sequence keeps its own generator, policy state, masks, drafts, acceptance and residual. Two engines run the
batch: the batch-first one (s2d2/decoding/lockstep.py: one step for every live sequence; honest AR, and the
diffusion baselines and S2D2 on position-aligned models) and the thread engine (s2d2/decoding/batch.py: every
sequence runs `generate`'s own decode, `run_prepared`, on its own thread and only the model forwards are shared;
every loop).
So sequence i with seed s_i gives `generate(model, prompts[i], cfg, seed=s_i)`'s trace apart from wall times and
float round-off in the shared forwards: in float64 the same tokens, NFE and decisions (tests/lib/test_batch_decode.py,
tests/lib/test_batch_first.py).

Both backends batch. On the static backend each live sequence leases one slot of the preallocated storage
(`generate_batch` first reserves min(batch_size, max_slots) slots, then warms the (batch bucket, row bucket) shapes
the batch can run: on CUDA one graph each), and a group's forward is one static forward at a shape fixed by the
group alone (s2d2/models/static_backend.py); a sequence that finds no free slot decodes over a dynamic cache.

Refused, with one readable message each:

* `batch_size > 1` with an attention implementation other than sdpa or eager (flash, flex): the batch needs an
  explicit per-row mask, which only those two read correctly.
* prompts that do not fit, empty prompts, bad seeds: checked for every prompt before any decode starts.

Differences from calling `generate` in a loop, by design: a cost-aware policy routes every sequence with one cost
table frozen before the batch (`costs`, else the model's measured table at the start), where a loop of `generate`
calls would refine the fits between decodes; and the batch's timings are not fed back to the cost fits (a shared
forward's wall is not one sequence's cost). Each forward record's `wall_s` is the wall of the batch forward that
served it; the batch's own forwards are in the `BatchLedger` on every result (`result.batch`).
"""
from __future__ import annotations

import time
from typing import Any, Callable, Optional, Sequence

from .api import GenerateResult, Prepared, finish_result, prepare, run_prepared
from .config import DecodeConfig
from .decoding.batch import Scheduler
from .decoding.decoder import make_check
from .decoding.lockstep import Job, Lockstep, refusal
from .decoding.layout import block_lengths
from .policies import uses_costs
from .trace import CostTable, StepRecord

MAX_BATCH_SIZE = 256  # live sequences (threads and caches) at once
MAX_PROMPTS = 100_000


def generate_batch(
    model: Any,
    prompts: Sequence[Any],
    cfg: DecodeConfig | Sequence[DecodeConfig] | None = None,
    seeds: Optional[Sequence[int]] = None,
    *,
    detailed: bool = True,
    batch_size: int = 32,
    chat: bool | None | Sequence[bool | None] = None,
    max_seconds: float | None = None,
    costs: CostTable | None = None,
    on_result: Callable[[int, GenerateResult], None] | None = None,
    on_block: Sequence[Callable[[list[StepRecord]], None] | None] | None = None,
    should_stop: Sequence[Callable[[], bool] | None] | None = None,
    engine: str = "auto",
) -> list[GenerateResult]:
    """Decode every prompt (text or token ids) with `cfg` (one config, or one per prompt) and `seeds` (default
    0, 1, 2, ...); at most `batch_size` decode at once, sharing forwards, and a finished sequence's place goes to
    the next prompt. Results in prompt order, each as `generate` returns it plus `batch`, the shared ledger.
    `chat` is one value or one per prompt; `max_seconds` bounds each sequence's own decode, as `generate`'s does;
    `on_result(i, result)` is called as each sequence finishes (result.batch is set once the batch ends);
    `on_block` / `should_stop`, one per prompt (or None), are `generate`'s hooks of that prompt's decode.
    `engine`: "auto" (the batch-first engine when it covers every prompt's config, which is every config that
    decodes, else the thread engine), "threads" or "batch-first" (refused for a config it does not cover); both
    give each sequence its batch-1 answer."""
    prompts = list(prompts)
    if not prompts:
        raise ValueError("prompts: empty; pass at least one prompt")
    if len(prompts) > MAX_PROMPTS:
        raise ValueError(f"prompts: {len(prompts)}; at most {MAX_PROMPTS} per call")
    if not isinstance(batch_size, int) or not 1 <= batch_size <= MAX_BATCH_SIZE:
        raise ValueError(f"batch_size: must be an integer in [1, {MAX_BATCH_SIZE}], got {batch_size!r}")
    why = batch_refusal(model, batch_size)
    if why is not None:
        raise ValueError(why)
    cfgs = _configs(cfg, len(prompts))
    first = _engine(engine, cfgs, model)
    seed_list = _seeds(seeds, len(prompts))
    live = min(batch_size, len(prompts))
    reserve = getattr(model, "reserve_slots", None)
    if reserve is not None and live > 1:  # static backend: a slot per live sequence, before any warm-up captures
        reserve(live)
    preps = _prepare_all(model, prompts, cfgs, chat, costs)
    _warm_batch(model, preps, live)
    blocks = _per_prompt(on_block, "on_block", len(prompts))
    stops = _per_prompt(should_stop, "should_stop", len(prompts))
    checks = [lambda b=block, s=stop: make_check(s, max_seconds, b) for block, stop in zip(blocks, stops)]
    results, ledger = _decode(model, preps, seed_list, checks, detailed, live, first, on_result)
    for r in results:
        r.batch = ledger
    return results


def _decode(model: Any, preps: list[Prepared], seeds: list[int], checks: list[Callable[[], Any]], detailed: bool,
            live: int, batch_first: bool, on_result: Any) -> tuple[list[GenerateResult], Any]:
    """Every prompt's result and the batch's ledger, from the engine chosen (`_engine`)."""
    if batch_first:
        engine = Lockstep(model, live, detailed)
        results = engine.run([Job(prep, seed, check) for prep, seed, check in zip(preps, seeds, checks)],
                             lambda row, loop: finish_result(model, row.prep, row.seed, row.rec, loop,
                                                             time.perf_counter() - row.t0), on_result)
        return results, engine.ledger
    scheduler = Scheduler(model, live)
    results = scheduler.run([_job(model, prep, seed, detailed, check)
                             for prep, seed, check in zip(preps, seeds, checks)], on_result)
    return results, scheduler.ledger


ENGINES = ("auto", "threads", "batch-first")


def _engine(engine: str, cfgs: list[DecodeConfig], model: Any) -> bool:
    """Whether the batch-first engine decodes this batch (a refusal names the first config it cannot)."""
    if engine not in ENGINES:
        raise ValueError(f"engine: one of {', '.join(ENGINES)}, got {str(engine)[:40]!r}")
    why = next((r for r in (refusal(c, model) for c in cfgs) if r is not None), None)
    if engine == "batch-first" and why is not None:
        raise ValueError(f"engine: 'batch-first' does not decode {why}; use engine='auto' or 'threads' for this "
                         "batch")
    covered = why is None
    return engine != "threads" and covered


def batch_refusal(model: Any, batch_size: int) -> Optional[str]:
    """Why this model cannot decode `batch_size` sequences at once, or None (batch 1 always can)."""
    check = getattr(model, "batch_unsupported", None)
    why = check() if batch_size > 1 and check is not None else None
    return f"batch_size > 1: {why}; or use batch_size=1" if why else None


def _warm_batch(model: Any, preps: list[Prepared], live: int) -> None:
    """Static backend: room for the longest prompt and, on CUDA, a graph per (batch bucket, row shape) the batch
    can run (each prompt's `prepare` warmed batch 1 only)."""
    warmup = getattr(model, "warmup", None)
    if warmup is not None and live > 1:
        blocks = sorted({b for p in preps for b in block_lengths(p.cfg)})
        warmup(block_lengths=blocks, max_length=max(p.total for p in preps), batch_size=live)


def _job(model: Any, prep: Prepared, seed: int, detailed: bool,
         check: Callable[[], Callable[[list[StepRecord]], str | None]]) -> Callable[[Any], GenerateResult]:
    """One sequence's decode; its check (and its max_seconds clock) starts when the sequence does."""
    def job(loop_model: Any) -> GenerateResult:
        return run_prepared(model, prep, seed, detailed, check(), loop_model)[0]

    return job


def _per_prompt(hooks: Optional[Sequence[Any]], name: str, n: int) -> list[Any]:
    if hooks is None:
        return [None] * n
    out = list(hooks)
    if len(out) != n or not all(h is None or callable(h) for h in out):
        raise ValueError(f"{name}: one callable (or None) per prompt, {n} in all")
    return out


def _configs(cfg: DecodeConfig | Sequence[DecodeConfig] | None, n: int) -> list[DecodeConfig]:
    if cfg is None or isinstance(cfg, DecodeConfig):
        return [cfg or DecodeConfig()] * n
    cfgs = list(cfg)
    if len(cfgs) != n or not all(isinstance(c, DecodeConfig) for c in cfgs):
        raise ValueError(f"cfg: one DecodeConfig, or a list of {n} (one per prompt)")
    return cfgs


def _seeds(seeds: Optional[Sequence[int]], n: int) -> list[int]:
    if seeds is None:
        return list(range(n))
    out = list(seeds)
    if len(out) != n:
        raise ValueError(f"seeds: {len(out)} given for {n} prompts")
    if not all(isinstance(s, int) and not isinstance(s, bool) and 0 <= s < 2**63 for s in out):
        raise ValueError("seeds: integers in [0, 2**63) only")
    return out


def _prepare_all(model: Any, prompts: list[Any], cfgs: list[DecodeConfig], chat: Any,
                 costs: CostTable | None) -> list[Prepared]:
    """Every prompt checked before any decode; each distinct config validated once (at its first prompt, whose
    index the error names) and one frozen cost table per distinct config that routes in seconds."""
    chats = list(chat) if isinstance(chat, (list, tuple)) else [chat] * len(prompts)
    if len(chats) != len(prompts):
        raise ValueError(f"chat: one value, or a list of {len(prompts)} (one per prompt)")
    tables: dict[int, CostTable] = {}
    checked: set[int] = set()
    preps = []
    for i, (prompt, cfg) in enumerate(zip(prompts, cfgs)):
        key = id(cfg)
        try:
            if key not in checked:
                cfg.validate()
                checked.add(key)
            prep = prepare(model, prompt, cfg, chats[i], costs, tables.get(key), checked=True)
        except ValueError as e:
            raise ValueError(f"prompts[{i}]: {e}") from None
        if prep.table is not None and uses_costs(prep.cfg):
            tables.setdefault(key, prep.table)
        preps.append(prep)
    return preps
