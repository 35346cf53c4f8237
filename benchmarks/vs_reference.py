"""Our SDAR decoder against the paper's own (phymhan/S2D2, `SDAR/generate_ssd_policy.py`), side by side.

    S2D2_REFERENCE=/path/to/S2D2 python -m benchmarks.vs_reference --threads 1
    S2D2_REFERENCE=... python -m benchmarks.vs_reference --settings sdar-config-b,sdar-config-b+reuse+fused

Point S2D2_REFERENCE at a local checkout of https://github.com/phymhan/S2D2 (nothing of it is vendored here; its
file is imported from there at run time). Without it the script says so in one line and exits 0.

The reference decoder is driven on our bundled model through `ReferenceAdapter`: the reference calls
`model(ids, attention_mask=[1, q, kv] 0/1 mask, position_ids, past_key_values, use_cache, store_kv)` on its SDAR
remote-code class; the adapter runs the native Qwen3 class with that mask as a bool mask (nonzero = attend) and,
for `store_kv=False`, crops the appended keys again, and counts the forwards. Both sides get the same chat-templated
prompt ids, the same seed (the reference draws from torch's global generator, we from a generator seeded alike, in
the same order) and the paper setting's options. A setting `PRESET+reuse+fused` (or `+trim`, `+reuse`, `+fused`)
runs that preset with our forward-saving options on our side only: the reference always runs the paper preset.

Decodes are interleaved (ours, reference, prompt by prompt, repeat by repeat) so machine noise hits both alike.
Printed per setting: how many decodes gave identical tokens (the first gen_length generated ids), forwards per
decode on each side, the wall ratio ours / reference (total, and the median of the per-decode ratios) and the same
ratio in this thread's CPU time (which other jobs on a shared machine do not inflate).
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any


ENV = "S2D2_REFERENCE"
SCRIPT = Path("SDAR") / "generate_ssd_policy.py"
OPTIONS = {"reuse": dict(kv_reuse=True), "fused": dict(fused_commit=True), "trim": dict(trim_verify=True)}


def reference_module(root: str) -> Any:
    """The reference's SDAR decoder module, imported from the user's checkout."""
    path = Path(root).expanduser() / SCRIPT
    if not path.is_file():
        raise SystemExit(f"{ENV}={root}: no {SCRIPT} there (expected a checkout of github.com/phymhan/S2D2)")
    spec = importlib.util.spec_from_file_location("s2d2_reference_sdar", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class ReferenceAdapter:
    """Our bundled model behind the call signature the reference SDAR decoder uses."""

    def __init__(self, hf_model: Any) -> None:
        self.inner = hf_model  # a transformers causal LM (native class)
        self.forwards = 0

    @property
    def device(self) -> Any:
        return next(self.inner.parameters()).device

    def eval(self) -> "ReferenceAdapter":
        self.inner.eval()
        return self

    def __call__(self, input_ids: Any, attention_mask: Any = None, position_ids: Any = None,
                 past_key_values: Any = None, use_cache: bool = True, store_kv: bool = False, **_: Any) -> Any:
        import torch

        self.forwards += 1
        before = past_key_values.get_seq_length() if past_key_values is not None else 0
        mask = None
        if attention_mask is not None:  # [1, q, kv] 0/1 (or bool): the SDAR class reads nonzero as "attend"
            mask = (attention_mask != 0)[:, None] if attention_mask.dim() == 3 else attention_mask != 0
        with torch.inference_mode():
            out = self.inner(input_ids=input_ids, attention_mask=mask, position_ids=position_ids,
                             cache=past_key_values, use_cache=use_cache)
        added = int(input_ids.shape[-1])
        if not store_kv and past_key_values is not None and past_key_values.get_seq_length() > before:
            past_key_values.crop(-added)
        return SimpleNamespace(logits=out.logits)


def reference_kwargs(cfg: Any, stop_ids: list[int], mask_id: int) -> dict[str, Any]:
    """The reference's option names for one of our SDAR configurations (its README and argparse names)."""
    return dict(
        mask_id=mask_id, gen_length=cfg.gen_length, block_length=cfg.block_length, denoising_steps=cfg.steps,
        temperature=cfg.temperature, top_k=cfg.top_k, top_p=cfg.top_p, do_sample=cfg.do_sample,
        remasking_strategy=cfg.remasking, confidence_threshold=cfg.confidence_threshold, eb_threshold=cfg.eb_gamma,
        stopping_criteria_idx=list(stop_ids), cache_ver=cfg.cache_ver, draft_ver=cfg.draft_ver,
        min_ssd_span_length=cfg.min_span_length, ssd_ratio_tempering_factor=cfg.ratio_gamma,
        allow_resample=cfg.allow_resample, do_verify_policy=cfg.policy,
        do_verify_score_threshold=cfg.score_threshold, hysteresis_threshold_on=cfg.hysteresis_on,
        hysteresis_threshold_off=cfg.hysteresis_off, token_acceptance_estimator=cfg.estimator,
        ssd_confidence_margin_threshold=cfg.margin_threshold, ssd_confidence_power=cfg.confidence_power,
        ssd_entropy_threshold=cfg.entropy_threshold, ssd_confidence_margin_coef=cfg.margin_scale,
        ssd_entropy_temperature=cfg.negexp_beta, ucb_beta=cfg.ucb_beta, ucb_span_length_bins=cfg.ucb_span_bins,
        ucb_block_progress_bins=cfg.ucb_progress_bins, ucb_entropy_bins=cfg.ucb_entropy_bins,
        ucb_entropy_source="masked" if cfg.ucb_entropy_scope == "masks" else "span",
        do_verify_score_type=cfg.score_type, score_penalty_coef=cfg.penalty_coef,
    )


def setting(name: str, gen_length: int) -> tuple[Any, Any]:
    """(our config, the paper config the reference runs) for "PRESET" or "PRESET+opt+opt"."""
    import s2d2

    preset, *opts = name.split("+")
    extra: dict[str, Any] = {}
    for opt in opts:
        if opt not in OPTIONS:
            raise SystemExit(f"--settings: unknown option +{opt} (known: {', '.join('+' + o for o in OPTIONS)})")
        extra.update(OPTIONS[opt])
    paper = s2d2.preset(preset, gen_length=gen_length)
    if paper.method != "s2d2" or paper.loop != "block" or paper.sub_block_length is not None:
        raise SystemExit(f"--settings: {preset} is not an SDAR S2D2 preset (the reference file decodes SDAR)")
    return paper.replace(**extra), paper


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--settings", default="sdar-config-a,sdar-config-b,sdar-config-b+reuse+fused")
    ap.add_argument("--prompts", type=int, default=3, help="held-out questions (decodes per setting: x repeats)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--gen-length", type=int, default=96)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=int(os.environ.get("S2D2_THREADS", "2")))
    return ap


def main() -> None:
    args = _parser().parse_args()
    root = os.environ.get(ENV)
    if not root:
        print(f"vs_reference: skipped (set {ENV} to a local checkout of github.com/phymhan/S2D2 to compare)")
        return
    import torch

    import s2d2
    from s2d2.api import encode_prompt
    from s2d2.tasks.arithmetic import heldout, messages_for

    torch.set_num_threads(args.threads)
    ref = reference_module(root)
    model = s2d2.load_model("tiny", backend="dynamic")
    adapter = ReferenceAdapter(model.model)
    spec = model.spec
    prompts = [encode_prompt(model, messages_for(p)[0]["content"])[0] for p in heldout(args.prompts)]
    settings = [(name, *setting(name, args.gen_length)) for name in args.settings.split(",")]
    print(f"reference: {Path(root).expanduser() / SCRIPT}; model tiny ({spec.name}), torch threads {args.threads}, "
          f"gen_length {args.gen_length}, {len(prompts)} prompts x {args.repeats} repeats, load average "
          f"{os.getloadavg()[0]:.1f}", flush=True)
    print(f"{'setting':34s} {'same tokens':>11s} {'NFE ours':>9s} {'NFE ref':>8s} {'wall ours/ref':>14s} "
          f"{'median pair':>12s} {'CPU ours/ref':>13s}", flush=True)
    for name, ours, paper in settings:
        kwargs = reference_kwargs(paper, spec.stop_ids, spec.mask_id)
        s2d2.generate(model, prompts[0], ours, seed=args.seed, detailed=False)  # first-call costs, both sides
        ref.block_diffusion_generate(adapter, torch.tensor([prompts[0]]), **kwargs)
        same = n = 0
        walls = {"ours": 0.0, "ref": 0.0}
        cpu = {"ours": 0.0, "ref": 0.0}
        nfe = {"ours": 0, "ref": 0}
        ratios = []
        for _ in range(args.repeats):
            for ids in prompts:
                c0, t0 = time.thread_time(), time.perf_counter()
                mine = s2d2.generate(model, ids, ours, seed=args.seed, detailed=False)
                c1, t1 = time.thread_time(), time.perf_counter()
                torch.manual_seed(args.seed)
                adapter.forwards = 0
                x = ref.block_diffusion_generate(adapter, torch.tensor([ids]), **kwargs)
                c2, t2 = time.thread_time(), time.perf_counter()
                cpu["ours"] += c1 - c0
                cpu["ref"] += c2 - c1
                theirs = x[0, len(ids):].tolist()[: args.gen_length]
                same += mine.token_ids == theirs
                n += 1
                walls["ours"] += t1 - t0
                walls["ref"] += t2 - t1
                nfe["ours"] += mine.metrics["nfe"]
                nfe["ref"] += adapter.forwards
                ratios.append((t1 - t0) / (t2 - t1))
        print(f"{name:34s} {same:>5d} / {n:<3d} {nfe['ours'] / n:9.1f} {nfe['ref'] / n:8.1f} "
              f"{walls['ours'] / walls['ref']:14.2f} {statistics.median(ratios):12.2f} "
              f"{cpu['ours'] / cpu['ref']:13.2f}", flush=True)


if __name__ == "__main__":
    main()
