"""Run the S2D2 authors' Fast-dLLM v2 decoder beside `s2d2.generate` on the same tiny random Qwen2 model and count
the runs that are identical on output tokens, NFE and every step's decoded positions.

    git clone https://github.com/phymhan/S2D2 /tmp/S2D2        # the reference: read from there, never copied here
    python scripts/compare_reference_fastdllm.py --reference /tmp/S2D2 --mode greedy
    python scripts/compare_reference_fastdllm.py --reference /tmp/S2D2 --mode sampled     # T = 1, as published
    python scripts/compare_reference_fastdllm.py --reference /tmp/S2D2 --mode restricted  # T = 1, masked-row draws

The reference (`Fast-dLLM-v2/generate_policy_utils.py`) calls its remote-code model with `(input_ids,
past_key_values, update_past_key_values, block_size, attention_mask)`. `RefModel` gives it that interface over the
native `Qwen2ForCausalLM`: the eval mask `q // bs >= kv // bs` on absolute positions (bs = 1 is causal), the cache
kept or cropped, and MASK's logit at -inf (our decoder never drafts MASK, docs/algorithm.md,
'Where we deviate from the reference code'; a model that never predicts it compares the two algorithms, not that
defect). Both run with top-p 1 (the reference applies top-p to q only at T = 0; the same page). Before comparing, the
reference's output is cut before its first stop id and, when it did not stop, loses the argmax seed it appends after its
last block (docs/faithfulness.md, 'Fast-dLLM v2: the stop rule and the reference check'). Each run seeds the global
generator (the reference's) and ours with the same seed.

`--mode restricted` replaces the reference's draft sampler by one that draws only for the rows whose input is MASK,
as ours does; `sampled` keeps its draw for every row of the sub-block window.
"""
from __future__ import annotations

import argparse
import importlib.util
import itertools
import json
import os
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, Iterator

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

import s2d2  # noqa: E402
from s2d2 import DecodeConfig  # noqa: E402

V, MASK, STOP, B = 300, 299, 298, 32
PROMPTS = [list(range(10, 17)), list(range(20, 33)), list(range(40, 80)), list(range(100, 164))]  # P = 7, 13, 40, 64
SEEDS = (0, 1, 2)
# Our option -> the reference's keyword.
REF_NAMES = dict(
    confidence_threshold="threshold", min_span_length="min_ssd_span_length", policy="do_verify_policy",
    score_threshold="do_verify_score_threshold", hysteresis_on="hysteresis_threshold_on",
    hysteresis_off="hysteresis_threshold_off", estimator="token_acceptance_estimator",
    margin_threshold="ssd_confidence_margin_threshold", negexp_beta="ssd_entropy_temperature", ucb_beta="ucb_beta",
    ucb_span_bins="ucb_span_length_bins", ucb_progress_bins="ucb_block_progress_bins",
    ucb_entropy_bins="ucb_entropy_bins", score_type="do_verify_score_type", penalty_coef="score_penalty_coef",
    allow_resample="allow_resample", ratio_gamma="ssd_ratio_tempering_factor", cache_ver="cache_ver",
    temperature="temperature",
)


def load_reference(path: Path) -> Any:
    file = path if path.is_file() else path / "Fast-dLLM-v2" / "generate_policy_utils.py"
    if not file.is_file():
        raise SystemExit(f"--reference: no Fast-dLLM-v2/generate_policy_utils.py under {path}")
    spec = importlib.util.spec_from_file_location("s2d2_reference_fastdllm_v2", file)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def build(seed: int) -> Any:
    from transformers import Qwen2Config, Qwen2ForCausalLM

    cfg = Qwen2Config(vocab_size=V, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, tie_word_embeddings=True, max_position_embeddings=512,
                      attn_implementation="sdpa")
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(cfg).float().eval()
    with torch.no_grad():  # sharper than a fresh init, so that some drafts are confident and some spans accepted
        model.model.embed_tokens.weight.mul_(8.0)
    return model


class RefModel:
    """The reference's model interface over a native Qwen2ForCausalLM."""

    def __init__(self, hf: Any) -> None:
        self.hf, self.device, self.last_ids = hf, torch.device("cpu"), None

    @torch.no_grad()
    def __call__(self, input_ids: torch.Tensor, use_cache: bool = True, past_key_values: Any = None,
                 update_past_key_values: bool = False, block_size: int | None = 32,
                 attention_mask: torch.Tensor | None = None, use_block_cache: bool = False, **_: Any) -> Any:
        from transformers import DynamicCache

        assert not use_block_cache, ("the block-cache path is not compared "
                                     "(docs/algorithm.md, 'Where we deviate from the reference code')")
        cache = past_key_values if past_key_values is not None else DynamicCache(config=self.hf.config)
        known, n = cache.get_seq_length(), int(input_ids.shape[1])
        if attention_mask is None:
            q, k = torch.arange(n) + known, torch.arange(known + n)
            mask = (q[:, None] // block_size) >= (k[None, :] // block_size)
        else:
            mask = attention_mask.bool()
        out = self.hf(input_ids=input_ids, position_ids=(torch.arange(n) + known)[None],
                      attention_mask=mask[None, None], cache=cache, use_cache=True)
        if not update_past_key_values:
            cache.crop(-n)
        logits = out.logits.float().clone()
        logits[..., MASK] = -torch.inf
        self.last_ids = input_ids
        return SimpleNamespace(logits=logits, past_key_values=cache)


def masked_rows_sampler(model: RefModel, original: Callable[..., Any]) -> Callable[..., Any]:
    """The reference's draft sampler (same transform), drawing only for the rows whose input is MASK; the other
    rows get their argmax, which the reference never reads."""
    def sample(logits: torch.Tensor, top_p: float = 0.95, temperature: float = 0.0) -> Any:
        if not temperature:
            return original(logits, top_p=top_p, temperature=temperature)
        probs = torch.softmax(logits / float(temperature), dim=-1)
        sorted_probs, order = torch.sort(probs, descending=True)
        drop = torch.cumsum(sorted_probs, dim=-1) > float(top_p)
        drop[..., 1:] = drop[..., :-1].clone()
        drop[..., 0] = False
        probs = probs.masked_fill(torch.zeros_like(drop).scatter_(-1, order, drop), 0)
        probs = probs / probs.sum(-1, keepdim=True).clamp_min(1e-12)
        tokens = probs.argmax(-1)
        # The rows are the current sub-block: the earlier ones are complete, so it holds the block's first mask.
        block, n = model.last_ids[0], int(logits.shape[1])
        start = int((block == MASK).nonzero()[0, 0]) // n * n
        rows = (block[start:start + n] == MASK).nonzero(as_tuple=True)[0]
        tokens[0, rows] = torch.multinomial(probs[0, rows], 1).squeeze(-1)
        return tokens, probs
    return sample


def ref_kwargs(cfg: DecodeConfig) -> dict[str, Any]:
    kw = {REF_NAMES[k]: getattr(cfg, k) for k in REF_NAMES}
    kw["ucb_entropy_source"] = {"span": "span", "masks": "masked"}[cfg.ucb_entropy_scope]
    if cfg.method == "diffusion":  # the reference's baseline is its decoder with a policy that never verifies
        kw.update(do_verify_policy="mask_span_length", min_ssd_span_length=cfg.block_length + 1)
    return dict(kw, small_block_size=cfg.sub_block_length or cfg.block_length, block_size=cfg.block_length,
                max_new_tokens=cfg.gen_length, mask_id=MASK, stop_token=STOP, top_p=1.0, return_decoding_order=True)


def our_order(res: Any) -> list[list[float]]:
    """Our trace in the reference's decoding-order code: a threshold/fallback pick -pos, an accepted draft +pos, a
    resample pos + 0.5, an AR seed -(pos + 0.5); one sorted list per step."""
    code = {"accepted": float, "resampled": lambda p: p + 0.5, "ar_seed": lambda p: -(p + 0.5)}
    return [sorted(code.get(c.how, lambda p: -float(p))(c.position) for c in s.commits)
            for s in res.trace.steps if s.commits]


def ref_as_ours(gen: list[int], order: list[list[float]], end: int) -> tuple[list[int], list[list[float]]]:
    """Cut before the first stop id; without a stop, drop the seed appended after the last block (at `end`)."""
    if STOP in gen:
        return gen[: gen.index(STOP)], order
    if order and order[-1] == [-(end + 0.5)]:
        return gen[:-1], order[:-1]
    return gen, order


def configs() -> Iterator[tuple[str, DecodeConfig]]:
    g = dict(block_length=B, gen_length=64)
    a = lambda **kw: s2d2.preset("fastdllm-config-a", **{**g, **kw})  # noqa: E731
    c = lambda **kw: s2d2.preset("fastdllm-config-c", **{**g, **kw})  # noqa: E731
    yield from [("fastdllm-config-a", a()), ("fastdllm-config-b", s2d2.preset("fastdllm-config-b", **g)),
                ("fastdllm-config-c", c())]
    for sb in (4, 8, 16):
        yield f"ucb-sb{sb}", a(policy="contextual_bandit_ucb", sub_block_length=sb)
    yield "ucb-sb8-masks", a(policy="contextual_bandit_ucb", sub_block_length=8, ucb_entropy_scope="masks")
    yield "always-sb8", c(min_span_length=1, sub_block_length=8)
    yield "score-dyn-sb16", a(policy="score_threshold", score_threshold=0.5, sub_block_length=16)
    yield "score-static-margin", a(policy="score_threshold", score_type="difference_static", penalty_coef=1.0,
                                   estimator="hard_margin_threshold", sub_block_length=8)
    yield "renyi-hysteresis", a(estimator="soft_renyi_2_entropy", hysteresis_on=0.0, hysteresis_off=-1.0,
                                sub_block_length=8)
    yield "always-cache-ver", c(min_span_length=1, sub_block_length=8, cache_ver=True)
    yield "no-resample-gamma", c(min_span_length=1, sub_block_length=8, allow_resample=False, ratio_gamma=0.5)
    yield "baseline-sb4", DecodeConfig(method="diffusion", block_length=B, sub_block_length=4,
                                       confidence_threshold=0.9, gen_length=64)
    yield "baseline-sb32-cache-ver", DecodeConfig(method="diffusion", block_length=B, sub_block_length=32,
                                                  confidence_threshold=0.5, cache_ver=True, gen_length=96)


def compare_one(ref: Any, hf: Any, ours: Any, cfg: DecodeConfig, prompt: list[int], seed: int,
                restricted: bool) -> dict[str, bool]:
    res = s2d2.generate(ours, prompt, cfg, seed=seed, detailed=True)
    shim = RefModel(hf)
    original = ref.sample_with_top_p
    ref.sample_with_top_p = masked_rows_sampler(shim, original) if restricted else original
    torch.manual_seed(seed)
    try:
        ids, stats = ref.generate_ssd_policy(shim, torch.tensor([prompt]), **ref_kwargs(cfg))
    finally:
        ref.sample_with_top_p = original
    end = res.trace.blocks[-1].start + res.trace.blocks[-1].length
    tokens, order = ref_as_ours(ids[0, len(prompt):].tolist(), stats["decoding_order"], end)
    return {"tokens": tokens == res.token_ids, "nfe": stats["total_forward_steps"] == res.metrics["nfe"],
            "decisions": [sorted(s) for s in order] == our_order(res)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reference", type=Path, required=True, help="a phymhan/S2D2 checkout (or the .py file)")
    p.add_argument("--mode", choices=("greedy", "sampled", "restricted"), default="greedy")
    p.add_argument("--configs", default="", help="comma-separated config names (default: all)")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    ref = load_reference(args.reference)
    from s2d2.models.loading import from_transformers

    hfs = {s: build(s) for s in (0, 1)}
    ours = {s: from_transformers(m, None, mask_token_id=MASK, stop_token_ids=[STOP], logits="shifted",
                                 block_size=B, name=f"tiny-qwen2-{s}") for s, m in hfs.items()}
    wanted = set(filter(None, args.configs.split(",")))
    runs, fails, t0 = 0, [], time.perf_counter()
    for (name, cfg), m, prompt, seed in itertools.product(list(configs()), hfs, PROMPTS, SEEDS):
        if (wanted and name not in wanted) or (args.mode != "greedy" and cfg.method == "diffusion"):
            continue
        cfg = cfg if args.mode == "greedy" else cfg.replace(temperature=1.0)
        got = compare_one(ref, hfs[m], ours[m], cfg, prompt, seed, args.mode == "restricted")
        runs += 1
        if not all(got.values()):
            fails.append({"config": name, "model": m, "prompt_len": len(prompt), "seed": seed, **got})
    print(json.dumps({"mode": args.mode, "identical": runs - len(fails), "runs": runs,
                      "seconds": round(time.perf_counter() - t0, 1), "first_failures": fails[:10]}, indent=1))
    return 0 if not fails else 1


if __name__ == "__main__":
    sys.exit(main())
