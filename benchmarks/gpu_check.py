"""One short prepared check for a GPU machine; prints one table.

    python benchmarks/gpu_check.py            # CUDA: SDAR-1.7B shapes, random weights
    python benchmarks/gpu_check.py --small    # the same script on a tiny config (CPU smoke run)

1. The 2L verifier invariant on CUDA in float32: row L+i of the 2L pass equals a single MASK query at i after
   causally committing the drafts before i (max abs logit difference).
2. S2D2 vs AR tokens/s in bfloat16 (random weights: acceptance is not meaningful, timing is): AR (1 forward
   per token), S2D2 always-verify greedy_exact (block 4 and 16), and the dynamic-threshold baseline.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
from transformers import Qwen3Config, Qwen3ForCausalLM  # noqa: E402

import s2d2  # noqa: E402
from s2d2.models import masks  # noqa: E402

SDAR_1_7B = dict(vocab_size=151936, hidden_size=2048, intermediate_size=6144, num_hidden_layers=28,
                 num_attention_heads=16, num_key_value_heads=8, head_dim=128, max_position_embeddings=32768,
                 tie_word_embeddings=False, rope_theta=1e6)
SMALL = dict(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, head_dim=16, max_position_embeddings=4096, tie_word_embeddings=False)


def build(shape: dict, dtype: torch.dtype, device: str):
    torch.manual_seed(0)
    model = Qwen3ForCausalLM._from_config(Qwen3Config(**shape), attn_implementation="sdpa", dtype=dtype)
    model = model.to(device).eval()
    mask_id = shape["vocab_size"] - 1
    return s2d2.from_transformers(model, None, mask_token_id=mask_id, stop_token_ids=[], logits="aligned")


def check_2l(model, block: int = 16, cache_len: int = 48) -> float:
    dev, mask_id = model.device, model.spec.mask_id
    ids = torch.randint(0, mask_id, (cache_len + block,), device=dev)
    pos = torch.arange(cache_len + block, device=dev)
    cache = model.new_cache()
    model.forward(cache, ids[:cache_len], pos[:cache_len], "causal", keep=cache_len)
    blk, bpos = ids[cache_len:], pos[cache_len:]
    two = torch.cat([blk, torch.full_like(blk, mask_id)])
    logits = model.forward(cache, two, torch.cat([bpos, bpos]), masks.verify_2l_mask(cache_len, block, dev), 0, block)
    worst = 0.0
    for i in range(block):
        seq = torch.cat([blk[:i], torch.tensor([mask_id], device=dev)])
        ref = model.forward(cache, seq, bpos[: i + 1], "causal", keep=0, last=1)
        worst = max(worst, float((ref[-1] - logits[i]).abs().max()))
    return worst


def tokens_per_second(model, cfg, prompt, repeats: int) -> tuple[float, float]:
    best, nfe = 0.0, 0.0
    for _ in range(repeats):
        if model.device.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        res = s2d2.generate(model, prompt, cfg, seed=0, detailed=False)
        if model.device.type == "cuda":
            torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        best = max(best, res.metrics["generated_tokens"] / dt)
        nfe = res.metrics["nfe_per_token"]
    return best, nfe


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--small", action="store_true", help="tiny shapes (CPU smoke run)")
    ap.add_argument("--gen-length", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    shape = SMALL if args.small else SDAR_1_7B
    rows = [("device", torch.cuda.get_device_name(0) if device == "cuda" else "cpu"),
            ("shapes", "tiny" if args.small else "SDAR-1.7B (random weights)")]
    model32 = build(shape, torch.float32, device)
    rows.append(("2L vs sequential, fp32 max |dlogit|", f"{check_2l(model32):.2e}"))
    del model32
    if device == "cuda":
        torch.cuda.empty_cache()
    model = build(shape, torch.bfloat16 if device == "cuda" else torch.float32, device)
    prompt = list(range(100, 164))
    arms = {
        "AR (1 fwd/token)": s2d2.preset("ar", gen_length=args.gen_length),
        "S2D2 always-verify B=4": s2d2.DecodeConfig(method="s2d2", policy="always", acceptance="greedy_exact",
                                                    cache_ver=True, block_length=4, gen_length=args.gen_length),
        "S2D2 always-verify B=16": s2d2.DecodeConfig(method="s2d2", policy="always", acceptance="greedy_exact",
                                                     cache_ver=True, block_length=16, gen_length=args.gen_length),
        "dynamic baseline B=4": s2d2.preset("dynamic-baseline", gen_length=args.gen_length),
    }
    s2d2.generate(model, prompt, arms["AR (1 fwd/token)"], detailed=False)  # warm-up (kernels, allocator)
    ar_tps = None
    for name, cfg in arms.items():
        tps, nfe = tokens_per_second(model, cfg, prompt, args.repeats)
        ar_tps = ar_tps or tps
        rows.append((f"{name}: tokens/s (NFE/token)", f"{tps:8.1f} ({nfe:.2f})  x{tps / ar_tps:.2f} vs AR"))
    width = max(len(r[0]) for r in rows)
    print("\n".join(f"{k:<{width}}  {v}" for k, v in rows))


if __name__ == "__main__":
    main()
