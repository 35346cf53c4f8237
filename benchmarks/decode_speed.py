"""Decode speed, side by side in one run: S2D2 vs AR (wall and NFE), trace on vs off, time outside forwards.

    python benchmarks/decode_speed.py                 # bundled tiny model (random tiny Qwen3 if absent)
    python benchmarks/decode_speed.py --model PATH --gen-length 128 --repeats 3

Runs are interleaved (AR, S2D2, S2D2 without trace detail, ...) and each figure is the median over repeats, so
machine noise hits every arm alike. Ratios are printed; nothing is asserted.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

import s2d2  # noqa: E402

def task_prompts(n: int = 4) -> list[str]:
    """Held-out arithmetic questions: the bundled model's task, so acceptance is realistic."""
    from s2d2.tasks.arithmetic import heldout

    return [p.question for p in heldout(n)]


def load(name: str):
    if name == "random" or (name == "tiny" and not (Path(__file__).resolve().parents[1] / "assets/tiny").exists()):
        from transformers import Qwen3Config, Qwen3ForCausalLM

        torch.manual_seed(0)
        cfg = Qwen3Config(vocab_size=4096, hidden_size=256, intermediate_size=768, num_hidden_layers=6,
                          num_attention_heads=4, num_key_value_heads=2, head_dim=64, tie_word_embeddings=True)
        m = Qwen3ForCausalLM(cfg).eval()
        return s2d2.from_transformers(m, None, mask_token_id=4095, stop_token_ids=[], logits="aligned"), True
    return s2d2.load_model(name), False


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="tiny")
    ap.add_argument("--preset", default="sdar-config-b", help="the S2D2 arm (default: always verify, B=16)")
    ap.add_argument("--gen-length", type=int, default=96)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=int(os.environ.get("S2D2_THREADS", "2")))
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    model, random_weights = load(args.model)
    prompts = [[5 + i for i in range(12)], [40 + i for i in range(20)]] if random_weights else task_prompts()
    arms = {
        "ar": (s2d2.preset("ar", gen_length=args.gen_length), True),
        "s2d2": (s2d2.preset(args.preset, gen_length=args.gen_length), True),
        "s2d2_trace_off": (s2d2.preset(args.preset, gen_length=args.gen_length), False),
        "dynamic_baseline": (s2d2.preset("dynamic-baseline", gen_length=args.gen_length), True),
    }
    s2d2.generate(model, prompts[0], arms["ar"][0])  # warm-up
    runs: dict[str, list[dict]] = {k: [] for k in arms}
    for _ in range(args.repeats):
        for prompt in prompts:
            for name, (cfg, detailed) in arms.items():
                runs[name].append(s2d2.generate(model, prompt, cfg, seed=0, detailed=detailed).metrics)

    def med(name: str, key: str) -> float:
        return statistics.median(m[key] for m in runs[name])

    def per_token(name: str, key: str) -> float:
        return sum(m[key] for m in runs[name]) / max(1, sum(m["generated_tokens"] for m in runs[name]))

    print(f"model: {model.spec.name} ({'random weights' if random_weights else 'trained'}), device {model.device}, "
          f"dtype {model.dtype}, threads {args.threads}, gen_length {args.gen_length}, "
          f"{len(prompts)} prompts x {args.repeats} repeats")
    print(f"{'arm':18s} {'tokens':>7s} {'NFE/token':>10s} {'wall ms/token':>14s} {'outside forwards':>17s}")
    for name in arms:
        wall = per_token(name, "wall_seconds") * 1000
        outside = 1 - sum(m["forward_seconds"] for m in runs[name]) / sum(m["wall_seconds"] for m in runs[name])
        print(f"{name:18s} {med(name, 'generated_tokens'):7.0f} {per_token(name, 'nfe'):10.3f} {wall:14.2f} "
              f"{outside:17.1%}")
    ar_wall, sp_wall = per_token("ar", "wall_seconds"), per_token("s2d2", "wall_seconds")
    print()
    print(f"S2D2 vs AR  NFE speedup:   {per_token('ar', 'nfe') / per_token('s2d2', 'nfe'):.2f}x  "
          f"(AR accounting: 1 forward per token)")
    print(f"S2D2 vs AR  wall speedup:  {ar_wall / sp_wall:.2f}x")
    print(f"S2D2 vs dynamic baseline wall speedup: {per_token('dynamic_baseline', 'wall_seconds') / sp_wall:.2f}x")
    print(f"trace on / off wall ratio: {sp_wall / per_token('s2d2_trace_off', 'wall_seconds'):.3f}")


if __name__ == "__main__":
    main()
