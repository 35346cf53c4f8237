"""One short prepared GPU check. Every row is printed (flushed) the moment it is measured; the run stays inside
`--budget-s` (default 150 s) and says what it skipped to do so.

    python -m benchmarks.gpu_check                        # CUDA: SDAR-1.7B shapes (random bf16 weights) + bundled model
    python -m benchmarks.gpu_check --small --budget-s 30  # tiny shapes; also what runs when there is no CUDA

Rows, in order:
1. The 2L-vs-sequential invariant in float32 (max |dlogit| of row L+i against one MASK query after committing
   the drafts before i), on the dynamic and the static backend.
2. Per-forward wall (median, synchronized) and GPU kernel time (torch.profiler) by forward kind, for the dynamic
   backend, the static backend run eagerly, and the static backend replaying CUDA graphs (+ the capture time).
3. Decodes: tokens/s, NFE/token and the share of decode time outside model forwards (forwards timed with a device
   sync on both sides) for AR / the dynamic-threshold baseline / S2D2 (sdar-config-b) / S2D2 with KV reuse, fused
   commits and the trimmed verifier / the cost-aware policy (sdar-config-b+cost-aware: routing in seconds from the
   forward costs it measures on this device during warm-up), per backend, at SDAR-1.7B shapes and on the bundled
   model; then each S2D2 arm's wall speedup over AR against its NFE speedup (target >= 0.9), and the measured
   cost table (per-kind base + per-query cost) the cost-aware arm routed with.
4. Host syncs per S2D2 step on the bundled model, lean and traced: the engine's reads outside forwards
   (s2d2/host_syncs.py) and, on CUDA, every sync of the decode, forwards included (torch's sync debug mode); and
   S2D2's wall with and without the model-side savers (query masks, row picks: benchmarks/model_savers.py).
5. Batched static decoding (benchmarks/gpu_batch.py), on the bundled model in float32 and then at SDAR-1.7B shapes
   in bf16: the (batch bucket, row bucket) graph captures, each sequence of a batch of 8 against its batch-1 decode
   (tokens, NFE), decodes/s and tokens/s at batch 1 / 8 / 32 with the ratio to batch 1, and CUDA syncs per batch
   step. About 60-90 s at SDAR shapes on an H200; every row is skipped with a note when the budget is spent.

On an H200 (the image has transformers 5.17 and no registry access, so a 5.24 wheel travels in `.whl/`: see
`python3 -m pip download` in .library/device/README.md; `regex` too, transformers 5.24 wants >= 2025.10.22), one
device call, `carry: [".whl"]`, `timeout_s: 600`:

    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site || exit; PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 python3 -m benchmarks.gpu_check --budget-s 300 2>&1 | tee $OUT/gpu_check.txt
"""
from __future__ import annotations

import time

T0 = time.perf_counter()  # the budget counts from here: imports included

import argparse  # noqa: E402
import statistics  # noqa: E402
from typing import Any, Callable  # noqa: E402


import torch  # noqa: E402

import s2d2  # noqa: E402
from s2d2.host_syncs import HostSyncCounter  # noqa: E402
from s2d2.models import masks  # noqa: E402

from benchmarks.device_timing import Budget, SyncedForwards, kernel_ms, row, sync  # noqa: E402
from benchmarks.gpu_batch import batch_rows  # noqa: E402

SDAR_MASK = 151669
# Qwen3-1.7B geometry (SDAR-1.7B is a Qwen3ForCausalLM; untied head, rope theta 1e6: docs/model-families.md,
# 'Tokens the decoder needs').
SDAR_1_7B = dict(vocab_size=151936, hidden_size=2048, intermediate_size=6144, num_hidden_layers=28,
                 num_attention_heads=16, num_key_value_heads=8, head_dim=128, max_position_embeddings=32768,
                 tie_word_embeddings=False, rope_parameters={"rope_type": "default", "rope_theta": 1e6})
SMALL = dict(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, head_dim=16, max_position_embeddings=4096, tie_word_embeddings=False)
KINDS = [("ar, 1 query", 1), ("ar, 2 queries", 2), ("draft B=4", 4), ("draft B=16", 16), ("commit B=16", 16),
         ("verify_2l B=16", 32)]
ARMS = [("AR", "ar"), ("dynamic baseline", "dynamic-baseline"), ("S2D2 sdar-config-b", "sdar-config-b"),
        ("S2D2 reuse+fused+trim", "sdar-config-b+reuse+fused+trim"), ("S2D2 cost-aware", "sdar-config-b+cost-aware")]


def build(shape: dict, dtype: torch.dtype, device: str) -> Any:
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    with torch.device(device):  # random init on the device: seconds, not minutes, at 2B parameters
        model = Qwen3ForCausalLM._from_config(Qwen3Config(**shape), attn_implementation="sdpa", dtype=dtype)
    return model.eval()


def wrap(model: Any, backend: str, mask_id: int, **options: Any) -> Any:
    hf = s2d2.from_transformers(model, None, mask_token_id=mask_id, stop_token_ids=[], logits="aligned",
                                backend="dynamic", name="random Qwen3")
    if backend != "dynamic":
        hf.set_backend("static", graphs=backend == "static+graphs", **options)
    return hf


def check_2l(model: Any, block: int = 16, cache_len: int = 48) -> float:
    """Max |dlogit| between row L+i of the 2L pass and a single MASK query at i after causally committing x~[:i]."""
    dev, mask_id = model.device, model.spec.mask_id
    gen = torch.Generator(device="cpu").manual_seed(0)
    ids = torch.randint(0, mask_id, (cache_len + block,), generator=gen).to(dev)
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


def forward_call(model: Any, cache: Any, label: str, rows: int) -> Callable[[], None]:
    """One forward of kind `label` after the cached tokens; stored rows are cropped again (length unchanged)."""
    dev, c, mask_id = model.device, cache.get_seq_length(), model.spec.mask_id
    ids = (torch.arange(rows, device=dev) * 7 + 11) % mask_id
    pos = torch.arange(c, c + rows, device=dev)
    if label.startswith("ar"):  # commit the previous token (or the whole query, shifted family), query the next
        ids[-1] = mask_id if rows > 1 else ids[-1]
        return lambda: (model.forward(cache, ids, pos, "causal", keep=1, last=1), cache.crop(-1))
    if label.startswith("draft"):
        return lambda: model.forward(cache, ids, pos, "full", keep=0)
    if label.startswith("commit"):
        return lambda: (model.forward(cache, ids, pos, "causal", keep=rows, last=1), cache.crop(-rows))
    half = rows // 2
    ids[half:] = mask_id
    two_pos = torch.cat([pos[:half], pos[:half]])
    mask = masks.verify_2l_mask(c, half, dev)
    return lambda: model.forward(cache, ids, two_pos, mask, keep=0, last=half)


def time_forwards(models: dict[str, Any], cache_len: int, reps: int, budget: Budget,
                  kinds: list[tuple[str, int]] = KINDS) -> dict[tuple[str, str], float]:
    """The per-forward table; returns median wall seconds by (kind, backend)."""
    print(f"\n{'forward (cache ' + str(cache_len) + ')':<22} {'backend':<15} {'wall ms (median)':>17} {'kernel ms':>10}",
          flush=True)
    walls: dict[tuple[str, str], float] = {}
    for backend, model in models.items():
        dev = model.device
        prompt = (torch.arange(cache_len, device=dev) * 3 + 1) % model.spec.mask_id
        for label, rows in kinds:
            cache = call = None  # drop the last handle first, or the static storage stays leased
            cache = model.new_cache()
            model.forward(cache, prompt, torch.arange(cache_len, device=dev), "causal", keep=cache_len)
            call = forward_call(model, cache, label, rows)
            call()
            sync(dev)
            t0 = time.perf_counter()
            call()
            sync(dev)
            one = time.perf_counter() - t0
            n = max(3, min(reps, int((budget.left() - 5) / max(one, 1e-4) / 3)))
            if not budget.allows(f"{label:<22} {backend}", one * (n + 8)):
                continue
            samples = []
            for _ in range(n):
                sync(dev)
                t0 = time.perf_counter()
                call()
                sync(dev)
                samples.append(time.perf_counter() - t0)
            walls[(label, backend)] = statistics.median(samples)
            kern = kernel_ms(call, dev)
            kern_text = "n/a (CPU)" if kern is None else f"{kern:10.2f}"
            print(f"{label:<22} {backend:<15} {walls[(label, backend)] * 1000:12.2f} (n={n:2d}) {kern_text:>10}",
                  flush=True)
    return walls


def decode_rows(tag: str, models: dict[str, Any], prompt: Any, gen_length: int, budget: Budget,
                forward_s: dict[str, float]) -> None:
    """tokens/s, NFE/token and time outside forwards for each arm and backend; then wall vs NFE speedup."""
    from s2d2.api import check_fits, encode_prompt

    print(f"\n{'decode ' + tag:<34} {'backend':<15} {'tokens/s':>9} {'NFE/token':>10} {'outside fwd':>12}", flush=True)
    results: dict[tuple[str, str], tuple[float, float]] = {}
    for backend, model in models.items():
        s2d2.generate(model, prompt, s2d2.preset("ar", gen_length=2), detailed=False)  # first-call costs
        for arm, name in ARMS:
            cfg = s2d2.preset(name, gen_length=gen_length)
            guess = forward_s.get(backend, 0.05) * gen_length * (1.0 if name == "ar" else 2.0)
            if not budget.allows(f"{tag} {arm} [{backend}]", 2.5 * guess + 1):
                continue
            total = check_fits(model, cfg, len(encode_prompt(model, prompt)[0]))
            model.warmup(block_lengths=[1 if name == "ar" else cfg.block_length], max_length=total)  # as generate
            if cfg.policy == "cost_aware":  # its warm-up times the forwards it routes with (outside the timer)
                row(f"{tag} cost calibration [{backend}]", f"{model.calibrate_costs([cfg.block_length]):.2f} s")
            limit = max(1.0, budget.left() - 2)
            sync(model.device)
            t0 = time.perf_counter()
            res = s2d2.generate(model, prompt, cfg, seed=0, detailed=False, max_seconds=limit)
            sync(model.device)
            wall = time.perf_counter() - t0
            tokens, nfe = res.metrics["generated_tokens"], res.metrics["nfe"]
            forward_s[backend] = wall / max(1, nfe)
            outside = "skipped"
            if budget.left() > 2 * wall + 1:
                synced = SyncedForwards(model)
                again = s2d2.generate(synced, prompt, cfg, seed=0, detailed=False, max_seconds=limit)
                outside = f"{1 - synced.seconds / again.metrics['wall_seconds']:12.1%}"
            results[(name, backend)] = (wall / max(1, tokens), nfe / max(1, tokens))
            cut = " (time limit)" if res.trace.footer.finish_reason == "time_limit" else ""
            print(f"{tag + ' ' + arm:<34} {backend:<15} {tokens / wall:9.1f} {nfe / max(1, tokens):10.3f} "
                  f"{outside:>12}{cut}", flush=True)
    for backend, model in models.items():
        ar = results.get(("ar", backend))
        for arm, name in ARMS[2:]:
            s2 = results.get((name, backend))
            if ar and s2:
                wall_x, nfe_x = ar[0] / s2[0], ar[1] / s2[1]
                label = "S2D2" if name == "sdar-config-b" else arm
                row(f"{tag} {label} vs AR [{backend}]", f"wall x{wall_x:.2f}, NFE x{nfe_x:.2f}, wall/NFE speedup "
                    f"{wall_x / nfe_x:.2f} (target >= 0.9)")
        cost_row(f"{tag} cost table [{backend}]", model)


def cost_row(label: str, model: Any) -> None:
    """The forward costs the cost-aware arm routed with (measured during its warm-up on this device)."""
    table = getattr(model, "cost_table", None)
    fits = [f for f in table().kinds if f.kind in ("draft", "verify_2l", "commit", "commit+draft")] if table else []
    if fits and table().source == "measured":
        row(label, "; ".join(f"{f.kind} {f.base_s * 1e3:.2f} ms + {f.per_query_s * 1e3:.4f} ms/query" for f in fits))


def invariant_rows(model32: Any, backends: list[str], mask_id: int, budget: Budget, small: bool) -> None:
    for backend in backends:
        if budget.allows(f"2L vs sequential, fp32 [{backend}]", 5 if small else 20):
            hf = wrap(model32, backend, mask_id)
            hf.warmup(block_lengths=[16], max_length=64)
            row(f"2L vs sequential, fp32 [{backend}]", f"max |dlogit| {check_2l(hf):.2e}")


def capture_row(backend: str, hf: Any, spent: float) -> None:
    if hf.static is not None and hf.static.graphs:
        st = hf.static.stats
        row(f"capture [{backend}]", f"{st.graphs_captured} graphs in {spent:.1f} s; failed: "
            f"{st.capture_failures or 'none'}; cache {hf.static.capacity} positions, "
            f"{hf.static.kv.nbytes / 2**20:.0f} MiB")


def compile_rows(model: Any, mask_id: int, cache_len: int, reps: int, budget: Budget) -> dict:
    """torch.compile'd kernels under the same graphs, for two shapes only (compilation costs ~30-60 s a shape)."""
    if not budget.allows("static+graphs+compile (2 shapes)", 150):
        return {}
    hf = wrap(model, "static+graphs", mask_id, compile=True)
    try:
        spent = hf.warmup(shapes=[2, 32], max_length=cache_len + 64)
    except Exception as exc:  # report, never abort the check
        row("static+graphs+compile", f"failed: {type(exc).__name__}: {str(exc)[:200]}")
        return {}
    capture_row("static+graphs+compile", hf, spent)
    kinds = [k for k in KINDS if k[0] in ("ar, 2 queries", "verify_2l B=16")]
    return time_forwards({"graphs+compile": hf}, cache_len, reps, budget, kinds)


def synthetic_rows(args: Any, budget: Budget, cuda: bool, small: bool, gen_length: int) -> None:
    """Sections 1-3 at SDAR-1.7B shapes (random weights), or tiny shapes."""
    device = "cuda" if cuda else "cpu"
    shape, mask_id = (SMALL, SMALL["vocab_size"] - 1) if small else (SDAR_1_7B, SDAR_MASK)
    backends = ["dynamic", "static"] + (["static+graphs"] if cuda else [])
    if not budget.allows("build float32 model", 2 if small else 30):
        return
    t0 = time.perf_counter()
    model = build(shape, torch.float32, device)
    row("build float32 model", f"{time.perf_counter() - t0:.1f} s")
    invariant_rows(model, backends, mask_id, budget, small)
    if cuda:  # a fresh bf16 build, as a bf16 checkpoint loads (a cast would also cast RoPE's inv_freq)
        del model
        model = build(shape, torch.bfloat16, device)
    models = {b: wrap(model, b, mask_id) for b in backends}
    cache_len = 64 if small else 512
    for backend, hf in models.items():
        capture_row(backend, hf, hf.warmup(block_lengths=[16], max_length=cache_len + 64))
    walls = time_forwards(models, cache_len, args.reps, budget)
    if cuda and not small:
        walls.update(compile_rows(model, mask_id, cache_len, args.reps, budget))
    for label, _ in KINDS:
        base = walls.get((label, "dynamic"))
        for backend in backends[1:] + ["graphs+compile"]:
            if base and walls.get((label, backend)):
                row(f"speedup {label} [{backend} vs dynamic]", f"x{base / walls[(label, backend)]:.1f}")
    per_backend = {b: walls.get(("ar, 2 queries", b), 0.05) for b in backends}
    decode_rows("tiny-shape" if small else "SDAR-1.7B", models, list(range(100, 164)), gen_length, budget,
                per_backend)


def bundled_rows(budget: Budget, cuda: bool, gen_length: int) -> None:
    if not budget.allows("bundled model", 10):
        return
    from s2d2.tasks.arithmetic import heldout

    backends = ["dynamic", "static"] + (["static+graphs"] if cuda else [])
    models = {}
    for backend in backends:
        models[backend] = s2d2.load_model("tiny", device="cuda" if cuda else "cpu", backend="dynamic")
        if backend != "dynamic":
            models[backend].set_backend("static", graphs=backend == "static+graphs")
    decode_rows("bundled", models, heldout(1)[0].question, gen_length, budget, {})
    sync_rows("bundled", models, heldout(1)[0].question, budget)
    savers_rows("bundled", models, heldout(1)[0].question, budget)


def sync_rows(tag: str, models: dict[str, Any], prompt: Any, budget: Budget) -> None:
    """Host syncs per S2D2 step (sdar-config-b), lean and with the full trace."""
    cfg = s2d2.preset("sdar-config-b", gen_length=32)
    for backend, model in models.items():
        for detailed in (False, True):
            label = f"{tag} syncs/step [{backend}{', traced' if detailed else ''}]"
            if not budget.allows(label, 5):
                continue
            with HostSyncCounter(model) as counter:
                steps = max(1, len(s2d2.generate(model, prompt, cfg, seed=0, detailed=detailed).trace.steps))
            on_gpu = model.device.type == "cuda"
            cuda = f"; all CUDA syncs {cuda_syncs(model, prompt, cfg, detailed) / steps:.2f}" if on_gpu else ""
            row(label, f"engine reads {counter.reads / steps:.2f}, uploads {counter.uploads / steps:.2f}, "
                f"waits {counter.waits / steps:.2f}{cuda}")


def savers_rows(tag: str, models: dict[str, Any], prompt: Any, budget: Budget, runs: int = 3) -> None:
    """S2D2 (sdar-config-b, lean) wall per token with the model-side savers and without them, interleaved."""
    from benchmarks.model_savers import WithoutSavers

    cfg = s2d2.preset("sdar-config-b", gen_length=32)
    for backend, model in models.items():
        if not budget.allows(f"{tag} savers [{backend}]", 10):
            continue
        walls = {"with": 0.0, "without": 0.0}
        for arm, m in [("with", model), ("without", WithoutSavers(model))] * runs:
            sync(model.device)
            t0 = time.perf_counter()
            s2d2.generate(m, prompt, cfg, seed=0, detailed=False)
            sync(model.device)
            walls[arm] += time.perf_counter() - t0
        row(f"{tag} savers [{backend}]", f"wall without / with query masks + row picks: "
            f"{walls['without'] / walls['with']:.3f}")


def cuda_syncs(model: Any, prompt: Any, cfg: Any, detailed: bool) -> int:
    """Every synchronizing CUDA call of one decode, forwards included (torch.cuda.set_sync_debug_mode)."""
    import warnings

    torch.cuda.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            s2d2.generate(model, prompt, cfg, seed=0, detailed=detailed)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    return sum("synchroniz" in str(w.message) for w in caught)


def batched_rows(budget: Budget, cuda: bool, small: bool, gen_length: int) -> None:
    """Section 5: batched static decoding, bundled model (float32) then SDAR-1.7B shapes (bf16)."""
    from s2d2.tasks.arithmetic import heldout

    device = "cuda" if cuda else "cpu"
    cfg = s2d2.preset("sdar-config-b", gen_length=gen_length)
    if budget.allows("batched bundled model", 20):
        tiny = s2d2.load_model("tiny", device=device, backend="dynamic")
        tiny.set_backend("static", graphs=cuda, max_slots=32)
        batch_rows("bundled fp32", tiny, [p.question for p in heldout(32)], cfg, budget.allows, row,
                   per_decode_s=0.5)
        del tiny
    if not budget.allows("batched build bf16 model", 2 if small else 40):
        return
    shape, mask_id = (SMALL, SMALL["vocab_size"] - 1) if small else (SDAR_1_7B, SDAR_MASK)
    model = build(shape, torch.bfloat16 if cuda else torch.float32, device)
    hf = wrap(model, "static+graphs" if cuda else "static", mask_id, max_slots=32)
    prompts = [list(range(100 + i, 148 + 3 * i)) for i in range(32)]  # 48 .. 141 tokens
    batch_rows("tiny-shape" if small else "SDAR-1.7B bf16", hf, prompts, cfg, budget.allows, row,
               per_decode_s=0.5 if small else 3.0)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", action="store_true", help="tiny shapes (automatic without CUDA)")
    ap.add_argument("--budget-s", type=float, default=150.0, help="stay inside this many seconds (default 150)")
    ap.add_argument("--gen-length", type=int, default=None, help="decode length (default 128; 32 with --small)")
    ap.add_argument("--reps", type=int, default=20, help="timed calls per forward kind (median)")
    args = ap.parse_args(argv)
    budget = Budget(args.budget_s, T0 if argv is None else time.perf_counter())
    cuda = torch.cuda.is_available()
    small = args.small or not cuda
    gen_length = args.gen_length or (32 if small else 128)
    import transformers

    row("device", torch.cuda.get_device_name(0) if cuda else "cpu (no CUDA: --small shapes, no graphs)")
    row("versions", f"torch {torch.__version__}, transformers {transformers.__version__}, s2d2 {s2d2.__version__}")
    row("budget", f"{args.budget_s:.0f} s; shapes {'tiny' if small else 'SDAR-1.7B (random weights)'}")
    synthetic_rows(args, budget, cuda, small, gen_length)
    if cuda:
        torch.cuda.empty_cache()
    bundled_rows(budget, cuda, gen_length)
    if cuda:
        torch.cuda.empty_cache()
    batched_rows(budget, cuda, small, gen_length)
    row("done", f"{budget.seconds - budget.left():.1f} s of {budget.seconds:.0f} s")


if __name__ == "__main__":
    main()
