"""The lm-evaluation-harness model `s2d2`: generation with any S2D2 / baseline / AR decoder, scoring in AR mode.

    import s2d2.harness.backend  # registers "s2d2" with lm-eval's model registry
    lm_eval.simple_evaluate(model="s2d2", model_args="pretrained=tiny,preset=sdar-config-b", tasks=[...])

or `python -m s2d2 lm-eval --model_args ... --tasks ...` (s2d2/harness/cli.py), which also writes the per-request
records and prints NFE/token and acceptance beside the metric. lm-eval 0.4.13 discovers no entry points, so the
model is registered when this module is imported (its registry's own decorator; no fork, no remote code).

* `generate_until` decodes every request with the model_args config (s2d2/harness/model_args.py), gen_length =
  the request's max_gen_toks (capped by a model_args gen_length), seed = seed + doc_id, ending at the block where a
  stop string (`until`) appears; the text is cut before it. Other gen_kwargs (do_sample, temperature, ...) do not
  change the decoder: the config under study comes from model_args alone (a differing value is warned about once).
* `loglikelihood` / `loglikelihood_rolling` score in the model's AR mode (s2d2/harness/loglik.py), so
  multiple-choice and perplexity tasks run too.
* Contexts are lm-eval's final strings: no chat template unless lm-eval applies one (`--apply_chat_template`).
"""
from __future__ import annotations

import logging
import re
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Optional

import lm_eval.models  # noqa: F401  (the built-in backends first: get_model imports them only into an empty registry)
from lm_eval.api.model import TemplateLM
from lm_eval.api.registry import register_model
from lm_eval.models.utils import handle_stop_sequences, normalize_gen_kwargs
from lm_eval.utils import get_rolling_token_windows, make_disjoint_window
from tqdm import tqdm

from ..chat import render_chat
from ..limits import SEED_MAX
from .loglik import score_continuations
from .model_args import check_backend_args
from .records import generation_record, scoring_record, summarize
from .stops import StopWatch, cut_at_stops

log = logging.getLogger(__name__)
REPEAT_STRIDE = 1_000_003  # repeat k of a document decodes with seed + doc_id + k * REPEAT_STRIDE
DECODER_KWARGS = ("until", "max_gen_toks", "do_sample", "temperature")
GENERATE_CHUNK = 1024  # requests per generate_batch call (bounds the results, and traces, held at once)


@register_model("s2d2")
class S2D2LM(TemplateLM):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__()
        args = check_backend_args({k: v for k, v in kwargs.items() if v is not None})
        from ..models.loading import load_model

        self._setup(args, load_model(args.pretrained, device=args.device, dtype=args.dtype, backend=args.backend))

    @classmethod
    def from_model(cls, model: Any, **kwargs: Any) -> "S2D2LM":
        """The backend over an already loaded `HFModel` (model_args as keywords; `pretrained` only names it)."""
        lm = cls.__new__(cls)
        TemplateLM.__init__(lm)
        lm._setup(check_backend_args({"pretrained": model.spec.name, **kwargs}), model)
        return lm

    def _setup(self, args: Any, model: Any) -> None:
        self.args, self.model = args, model
        if model.tokenizer is None:
            raise ValueError(f"model_args pretrained: {args.pretrained!r} has no tokenizer; lm-eval needs text")
        self.tokenizer = model.tokenizer
        self._device = self.model.device
        self.records: list[dict[str, Any]] = []
        self._repeats: Counter = Counter()
        self._warned: set[str] = set()
        self._instances: list[Any] = []
        self._templated = False  # lm-eval called apply_chat_template (--apply_chat_template)

    # -- facts lm-eval asks for ----------------------------------------------------------------------------------
    @property
    def eot_token_id(self) -> int:
        eos = self.tokenizer.eos_token_id
        return int(eos) if eos is not None else int(self.model.spec.stop_ids[0])

    @property
    def max_length(self) -> int:
        return self.args.max_length or int(self.model.spec.max_positions)

    @property
    def tokenizer_name(self) -> str:
        return re.sub(r"[^\w.-]+", "__", self.args.pretrained)

    def tok_encode(self, string: str, add_special_tokens: Optional[bool] = None, **kwargs: Any) -> list[int]:
        return self.tokenizer.encode(string, add_special_tokens=bool(add_special_tokens))

    def tok_decode(self, tokens: list[int]) -> str:
        return self.tokenizer.decode(tokens)

    def apply_chat_template(self, chat_history: list[dict[str, str]], add_generation_prompt: bool = True) -> str:
        self._templated = True
        return render_chat(self.tokenizer, chat_history, add_generation_prompt)

    def get_model_info(self) -> dict[str, Any]:
        """Merged into lm-eval's results["config"]: the decoder and its per-task NFE / acceptance summary."""
        return {"s2d2": {"model_args": self.args.to_dict(), "model": self.model.spec.name,
                         "summary": summarize(self.records)}}

    def _warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            log.warning(message)

    # -- generation --------------------------------------------------------------------------------------------
    def generate_until(self, requests: list[Any], disable_tqdm: bool = False) -> list[str]:
        """Every request with its own seed and stop strings: one at a time (`generate`), or with batch_size > 1
        `batch_size` at a time (s2d2.generate_batch, in chunks of GENERATE_CHUNK requests); records and answers in
        request order either way."""
        if (requests and not self._templated and self.model.spec.use_chat_template
                and getattr(self.tokenizer, "chat_template", None)):
            self._warn_once("chat", f"s2d2: {self.args.pretrained} has a chat template and these prompts do not use "
                            "it; a chat model then often decodes garbage to the length limit (add "
                            "--apply_chat_template)")
        bar = tqdm(total=len(requests), desc="s2d2 generate", disable=disable_tqdm)
        out: list[str] = []
        for lo in range(0, len(requests), GENERATE_CHUNK):
            chunk = requests[lo : lo + GENERATE_CHUNK]
            plans = [self._plan(req) for req in chunk]
            results = self._decode(plans, lambda: bar.update(1))
            out += [self._finish(req, plan, result) for req, plan, result in zip(chunk, plans, results)]
        bar.close()
        return out

    def _decode(self, plans: list[dict[str, Any]], tick: Any) -> list[Any]:
        from ..api import generate
        from ..batched import generate_batch

        detailed = self.args.trace_dir is not None
        if self.args.batch_size == 1:
            results = []
            for p in plans:
                results.append(generate(self.model, p["ids"], p["cfg"], seed=p["seed"], detailed=detailed,
                                        on_block=p["watch"].on_block, should_stop=p["watch"].should_stop))
                tick()
            return results
        return generate_batch(self.model, [p["ids"] for p in plans], [p["cfg"] for p in plans],
                              [p["seed"] for p in plans], detailed=detailed, batch_size=self.args.batch_size,
                              on_result=lambda i, r: tick(), on_block=[p["watch"].on_block for p in plans],
                              should_stop=[p["watch"].should_stop for p in plans])

    def _plan(self, req: Any) -> dict[str, Any]:
        """A request's config, prompt ids, seed (seed + doc_id, + a stride per repeat) and stop watch."""
        context, gen_kwargs = req.args
        kwargs = normalize_gen_kwargs(dict(gen_kwargs or {}), default_max_gen_toks=self.args.max_gen_toks)
        until = handle_stop_sequences(kwargs.get("until"), eos=self.tok_decode([self.eot_token_id]))
        self._check_sampling(kwargs)
        gen = kwargs["max_gen_toks"] if self.args.gen_cap is None else min(kwargs["max_gen_toks"], self.args.gen_cap)
        cfg = self.args.config.replace(gen_length=gen)
        ids = self._fit_prompt(self.tok_encode(context), gen, cfg.block_length)
        key = (req.task_name, req.doc_id)
        repeat = self._repeats[key]
        self._repeats[key] += 1
        seed = (self.args.seed + (req.doc_id or 0) + repeat * REPEAT_STRIDE) % (SEED_MAX + 1)
        watch = StopWatch(self.tokenizer, len(ids), until, self.model.spec.stop_ids)
        return {"cfg": cfg, "ids": ids, "seed": seed, "repeat": repeat, "until": until, "watch": watch}

    def _finish(self, req: Any, plan: dict[str, Any], result: Any) -> str:
        context, gen_kwargs = req.args
        reason = "stop_sequence" if plan["watch"].hit else result.metrics["finish_reason"]
        text = cut_at_stops(result.text, plan["until"])
        trace_file = self._write_trace(result, req.task_name, req.doc_id, plan["repeat"])
        self.records.append(generation_record(req.task_name, req.doc_id, plan["repeat"], plan["seed"], result, reason,
                                              trace_file))
        self.cache_hook.add_partial("generate_until", (context, gen_kwargs), text)
        return text

    def _check_sampling(self, kwargs: dict[str, Any]) -> None:
        cfg = self.args.config
        wants_sample = bool(kwargs.get("do_sample"))
        if wants_sample != cfg.do_sample or (wants_sample and kwargs.get("temperature") != cfg.temperature):
            self._warn_once("sampling", f"s2d2: the task asks do_sample={wants_sample}, temperature="
                            f"{kwargs.get('temperature')}; decoding uses model_args (temperature {cfg.temperature})")
        other = sorted(k for k in kwargs if k not in DECODER_KWARGS)
        if other:
            self._warn_once("kwargs", f"s2d2: gen_kwargs {other} are not decoder options; set DecodeConfig fields "
                            "in model_args instead")

    def _fit_prompt(self, ids: list[int], gen: int, block: int) -> list[int]:
        """Keep the prompt's last tokens when prompt + generation (padded to blocks) would pass the context."""
        budget = self.max_length - gen - 2 * block
        if budget < 1:
            raise ValueError(f"s2d2: max_gen_toks {gen} leaves no room for a prompt in {self.max_length} positions")
        if len(ids) > budget:
            self._warn_once("truncate", f"s2d2: prompts longer than {budget} tokens keep their last {budget}")
            ids = ids[-budget:]
        return ids

    def _write_trace(self, result: Any, task: Optional[str], doc_id: Optional[int], repeat: int) -> Optional[str]:
        if self.args.trace_dir is None:
            return None
        folder = Path(self.args.trace_dir) / re.sub(r"[^\w.-]+", "_", str(task))
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{doc_id if doc_id is not None else 'x'}-{repeat}.json"
        path.write_text(result.trace.to_json(), encoding="utf-8")
        return str(path)

    # -- scoring -------------------------------------------------------------------------------------------------
    def loglikelihood(self, requests: list[Any], disable_tqdm: bool = False) -> list[tuple[float, bool]]:
        self._instances = list(requests)  # _loglikelihood_tokens gets the tokenized pairs in this order
        try:
            return super().loglikelihood(requests, disable_tqdm=disable_tqdm)
        finally:
            self._instances = []

    def _loglikelihood_tokens(self, requests: list[Any], disable_tqdm: bool = False,
                              **kwargs: Any) -> list[tuple[float, bool]]:
        groups: dict[tuple[int, ...], list[int]] = defaultdict(list)
        fitted = []
        for i, (_, ctx, cont) in enumerate(requests):
            ctx, cont = self._fit_pair(list(ctx), list(cont))
            fitted.append(cont)
            groups[tuple(ctx)].append(i)
        out: list[Optional[tuple[float, bool]]] = [None] * len(requests)
        for ctx, members in tqdm(groups.items(), desc="s2d2 loglikelihood", disable=disable_tqdm):
            scores, forwards = score_continuations(self.model, list(ctx), [fitted[i] for i in members])
            for i, s in zip(members, scores):
                out[i] = (s.logprob, s.greedy)
                inst = self._instances[i] if i < len(self._instances) else None
                self.records.append(scoring_record("loglikelihood", getattr(inst, "task_name", None),
                                                   getattr(inst, "doc_id", None), forwards / len(members),
                                                   len(fitted[i])))
                self.cache_hook.add_partial("loglikelihood", requests[i][0], out[i])
        return [o for o in out if o is not None]

    def _fit_pair(self, ctx: list[int], cont: list[int]) -> tuple[list[int], list[int]]:
        """Left-truncate so context + continuation fit the context length (at least one context token stays)."""
        if len(ctx) + len(cont) <= self.max_length:
            return ctx, cont
        self._warn_once("truncate-ll", f"s2d2: loglikelihood inputs longer than {self.max_length} tokens are "
                        "left-truncated")
        whole = (ctx + cont)[-self.max_length:]
        keep = min(len(cont), self.max_length - 1)
        return whole[:-keep], whole[-keep:]

    def loglikelihood_rolling(self, requests: list[Any], disable_tqdm: bool = False) -> list[float]:
        out = []
        for req in tqdm(requests, desc="s2d2 rolling", disable=disable_tqdm):
            tokens = self.tok_encode(req.args[0])
            windows = [make_disjoint_window(w) for w in get_rolling_token_windows(
                token_list=tokens, prefix_token=self.prefix_token_id, max_seq_len=self.max_length, context_len=1)]
            total, forwards = 0.0, 0
            for ctx, cont in windows:
                scores, spent = score_continuations(self.model, list(ctx), [list(cont)])
                total, forwards = total + scores[0].logprob, forwards + spent
            self.records.append(scoring_record("loglikelihood_rolling", req.task_name, req.doc_id, forwards,
                                               len(tokens)))
            self.cache_hook.add_partial("loglikelihood_rolling", (req.args[0],), total)
            out.append(total)
        return out
