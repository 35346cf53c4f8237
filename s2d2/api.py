"""`generate`: one decode of one prompt, returning text, ids, metrics and the full trace."""
from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable, Sequence

import torch

from . import __version__
from .chat import render_chat
from .config import DecodeConfig
from .decoding.ar import ar_loop
from .decoding.decoder import block_loop, make_check
from .decoding.draws import Source, make_generator
from .decoding.editing import editing_loop
from .decoding.pipeline import pipeline_loop
from .decoding.layout import block_lengths, block_plan
from s2d2.decoding.forwards import Recorder
from .decoding.result import LoopResult, StopDecoding  # noqa: F401 (public: a model's forward raises it to stop a run)
from .metrics import trace_metrics
from .output import trim_output
from .policies import uses_costs
from .trace import SCHEMA_VERSION, CostTable, Footer, Header, ModelInfo, StepRecord, Trace

MAX_PROMPT_TOKENS = 8192


@dataclass
class GenerateResult:
    text: str
    token_ids: list[int]
    metrics: dict[str, Any]
    trace: Trace
    batch: Any = None  # generate_batch: the BatchLedger of the batch this decode ran in (shared by its results)


def encode_prompt(model: Any, prompt: str | Sequence[int], chat: bool | None = None) -> tuple[list[int], str]:
    """Token ids and display text of a prompt; a string goes through the chat template when the model uses one."""
    spec = model.spec
    if isinstance(prompt, str):
        if not prompt.strip():
            raise ValueError("prompt: empty; type a question or some text to continue")
        tok = model.tokenizer
        if tok is None:
            raise ValueError("prompt: this model has no tokenizer; pass token ids instead of text")
        use_chat = spec.use_chat_template if chat is None else chat
        if use_chat and getattr(tok, "chat_template", None):
            text = render_chat(tok, [{"role": "user", "content": prompt}])
        else:
            text = prompt
        ids = tok.encode(text, add_special_tokens=False)
    else:
        ids = [int(t) for t in (prompt.tolist() if isinstance(prompt, torch.Tensor) else prompt)]
        text = model.tokenizer.decode(ids) if model.tokenizer is not None else ""
    if not ids:
        raise ValueError("prompt: empty after tokenization")
    if len(ids) > MAX_PROMPT_TOKENS:
        raise ValueError(f"prompt: {len(ids)} tokens; at most {MAX_PROMPT_TOKENS} are allowed")
    bad = [t for t in ids if not 0 <= t < spec.vocab_size]
    if bad:
        raise ValueError(f"prompt: token id {bad[0]} outside the vocabulary [0, {spec.vocab_size})")
    if spec.mask_id in ids:
        raise ValueError(f"prompt: contains the mask token id {spec.mask_id}")
    return ids, text


def check_fits(model: Any, cfg: DecodeConfig, prompt_len: int) -> int:
    """Total positions the run needs (block padding included); ValueError if over the model's context, or for a
    block plan the model cannot run (the editing loop on a right-shifted model)."""
    if cfg.method == "ar":
        total = prompt_len + cfg.gen_length
    else:
        total = block_plan(cfg, prompt_len, model.spec.alignment == "shifted").total
    if total > model.spec.max_positions:
        raise ValueError(
            f"gen_length: prompt ({prompt_len} tokens) + gen_length ({cfg.gen_length}), padded to blocks, needs "
            f"{total} positions; the model's context is {model.spec.max_positions}"
        )
    return total


def generate(
    model: Any,
    prompt: str | Sequence[int],
    cfg: DecodeConfig | None = None,
    seed: int = 0,
    *,
    detailed: bool = True,
    chat: bool | None = None,
    on_block: Callable[[list[StepRecord]], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    max_seconds: float | None = None,
    costs: CostTable | None = None,
) -> GenerateResult:
    """Decode `prompt` with `cfg` (AR, a diffusion baseline or S2D2; block loop or, with loop="editing", the
    LLaDA2.x loop with self-correction, or with loop="pipeline" the D2F pipeline) and record the trace.

    `detailed=False` records the forward and step skeleton only (what metrics need), not per-mask drafts,
    top-k candidates or token strings. `on_block` receives the steps so far after every block;
    `should_stop` / `max_seconds` end the run early with the partial output (finish_reason says why); a
    `StopDecoding` raised by the model's forward ends it at once, at its last complete block ("cancelled").
    `seed` seeds the generator of every draw (drafts of masked positions only, acceptance, residuals); the reference
    draws for every row of the window, so sampled runs match it only with its draw restricted to masked rows.
    A cost-aware policy routes with `costs` (a recorded `header.costs` replays a run exactly), else with the model's
    measured forward costs (`routing_costs`), frozen for the decode and recorded in the header; every decode's exact
    per-forward timings then refine the model's cost fits.
    """
    prep = prepare(model, prompt, cfg, chat, costs)
    result, rec = run_prepared(model, prep, seed, detailed, make_check(should_stop, max_seconds, on_block))
    observe = getattr(model, "observe_forwards", None)
    if observe is not None and rec.timed:  # online refinement of the cost fits (exact timings only)
        observe(rec.forwards)
    return result


@dataclass
class Prepared:
    """A prompt checked and encoded for one configuration, before any decode work: what `run_prepared` needs."""

    cfg: DecodeConfig
    ids: list[int]
    text: str
    total: int
    table: CostTable | None


def prepare(model: Any, prompt: str | Sequence[int], cfg: DecodeConfig | None, chat: bool | None,
            costs: CostTable | None, table: CostTable | None = None, checked: bool = False) -> Prepared:
    """Validate `cfg`, encode `prompt`, check it fits, warm a static backend and freeze the routing costs
    (`table`, when given, is used as they are: a batch freezes them once for all its sequences). `checked`: `cfg`
    was validated already (a batch validates each distinct config once, not once per prompt; a config is frozen,
    so it stays valid)."""
    cfg = cfg if checked and cfg is not None else (cfg or DecodeConfig()).validate()
    ids, text = encode_prompt(model, prompt, chat)
    total = check_fits(model, cfg, len(ids))
    warmup = getattr(model, "warmup", None)
    if warmup is not None:  # static backend: cache room and CUDA graphs, once, before the timer starts
        warmup(block_lengths=block_lengths(cfg), max_length=total)
    if table is None and uses_costs(cfg):
        table = routing_costs(model, cfg, costs)
    return Prepared(cfg, ids, text, total, table if uses_costs(cfg) else None)


def run_prepared(model: Any, prep: Prepared, seed: int, detailed: bool,
                 check: Callable[[list[StepRecord]], str | None],
                 loop_model: Any = None) -> tuple[GenerateResult, Recorder]:
    """One decode of a prepared prompt. `loop_model` is what the loop calls for its forwards (a batch's
    `SequenceModel`; default `model` itself): everything else, from the generator to the trace, is the same."""
    runner = model if loop_model is None else loop_model
    cfg, ids = prep.cfg, prep.ids
    t0 = time.perf_counter()
    device = model.device
    generator = make_generator(cfg.rng, seed, device)
    rec = Recorder(runner, detailed, prep.table)
    prompt_t = torch.tensor(ids, dtype=torch.long, device=device)
    loop = run_loop(runner, cfg, prompt_t, rec, generator, check)
    wall = time.perf_counter() - t0
    settle = getattr(runner, "settle_forwards", None)
    if settle is not None:  # a batch: each forward record gets the wall of the batch forward that served it
        settle(rec.forwards)
    return finish_result(model, prep, seed, rec, loop, wall), rec


def finish_result(model: Any, prep: Prepared, seed: int, rec: Recorder, loop: LoopResult,
                  wall: float) -> GenerateResult:
    """The result of a finished loop: output cut at its stop, header, footer, trace and metrics (shared by
    `run_prepared` and the batch-first engine, s2d2/decoding/lockstep.py, so both build it one way)."""
    cfg, ids, detailed = prep.cfg, prep.ids, rec.detailed
    out, stop_pos = trim_output(loop.x[len(ids):].tolist(), cfg.gen_length, model.spec.mask_id, model.spec.stop_ids)
    reason = "stop_token" if stop_pos is not None else loop.finish_reason
    tok = model.tokenizer
    header = Header(
        schema_version=SCHEMA_VERSION, library_version=__version__, provenance="measured",
        model=model_info(model), config=cfg.to_dict(), seed=int(seed), prompt_text=prep.text, prompt_ids=ids,
        prompt_tokens=rec.texts(ids) if detailed else [], gen_length=cfg.gen_length,
        total_length=int(loop.x.shape[0]), created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        costs=prep.table,
    )
    footer = Footer(
        output_ids=out, output_text=tok.decode(out) if tok is not None else "",
        output_tokens=rec.texts(out) if detailed else [], generated_length=len(out), stop_position=stop_pos,
        wall_s=wall, forward_wall_s=sum([f.wall_s for f in rec.forwards]), finish_reason=reason,
    )
    trace = Trace(header, loop.blocks, rec.forwards, loop.steps, footer, detailed)
    return GenerateResult(footer.output_text, out, trace_metrics(trace), trace)


def run_loop(model: Any, cfg: DecodeConfig, prompt: torch.Tensor, rec: Recorder, generator: Source,
             check: Callable[[list[StepRecord]], str | None]) -> LoopResult:
    """The decode loop cfg names: the editing loop (LLaDA2.x), the pipeline (D2F), honest AR, or the block loop
    (AR with the reference accounting is B = 1 diffusion: a query and a commit per token)."""
    if cfg.loop == "editing":
        return editing_loop(model, cfg, prompt, rec, generator, check)
    if cfg.loop == "pipeline":
        return pipeline_loop(model, cfg, prompt, rec, generator, check)
    if cfg.method == "ar" and cfg.ar_accounting == "fused":
        return ar_loop(model, cfg, prompt, rec, generator, check)
    run_cfg = cfg
    if cfg.method == "ar":
        run_cfg = cfg.replace(method="diffusion", block_length=1, denoising_steps=None, sub_block_length=None)
    return block_loop(model, run_cfg, prompt, rec, generator, check)


def routing_costs(model: Any, cfg: DecodeConfig, given: CostTable | None) -> CostTable:
    """The cost table a cost-aware decode routes with: `given` as passed (a recorded header's: the replay then
    reproduces the run), else the model's measured one (calibrating the shapes this configuration uses first,
    outside the timer), else the nominal table (a model that measures nothing)."""
    if given is not None:
        return given
    calibrate, table = getattr(model, "calibrate_costs", None), getattr(model, "cost_table", None)
    if calibrate is None or table is None:
        return CostTable.nominal()
    calibrate(block_lengths(cfg))
    return table()


def model_info(model: Any) -> ModelInfo:
    spec = model.spec
    return ModelInfo(
        name=spec.name, alignment=spec.alignment, verifier=spec.verifier, mask_id=spec.mask_id,
        stop_ids=list(spec.stop_ids), vocab_size=spec.vocab_size, dtype=str(model.dtype).replace("torch.", ""),
        device=str(model.device), attn_implementation=str(model.attn_implementation), revision=spec.revision,
    )
