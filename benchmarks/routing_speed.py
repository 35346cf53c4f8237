"""Routing that pays in seconds: tokens/s and accuracy on held-out questions, every arm in one interleaved run.

    python -m benchmarks.routing_speed --threads 1                      # both bundled models
    python -m benchmarks.routing_speed --models tiny --problems 100 --repeats 2
    python -m benchmarks.routing_speed --query-tokens                   # query tokens per token, every preset

Arms per bundled model: AR; the dynamic-threshold baselines (the sweep's best at AR's accuracy and its fastest
within a point, each with and without the fused commit); the paper presets; our forward-saving options (KV reuse,
fused commit, the trimmed verifier); and the cost-aware policy (`cost_aware`: verify when the expected tokens per
second beat a skip's, from this machine's measured forward costs). Decodes are interleaved (problem by problem, arm
by arm, repeat by repeat) so load from other jobs hits every arm alike; problem i decodes with seed i in every arm.

Printed per arm: accuracy over the problems (every repeat counted: only the cost-aware arm can differ between
repeats, as its costs are measured), tokens/s (generated tokens / decode wall time, all repeats) and the same in
this thread's CPU time (benchmarks/cpu_clock.py: other jobs' time slices on a shared machine do not count), NFE and
query tokens per generated token, the verify rate, the wall, CPU-time and NFE speedups over AR and the ratios of
the first two to the third; then, for each S2D2 arm, its wall (and CPU-time) speedup over the fastest baseline at
least as accurate. The measured cost table of each model and the
machine's load average before and after are printed too. Nothing is asserted.

`--query-tokens` prints, instead, NFE and query tokens per generated token of every preset the model runs (SDAR and
baseline presets on `tiny`, the LLaDA2 presets on `tiny-llada2`), with the verifier trimmed (`trim_verify`) and
without: counts, not timings, so they are exact (the cost-aware preset's decisions rest on measured costs).
"""
from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field
from typing import Any


import torch  # noqa: E402

import s2d2  # noqa: E402
from benchmarks.cpu_clock import CpuClock
from s2d2.tasks.arithmetic import heldout, messages_for, score  # noqa: E402


def arms_for(model_name: str, gen: int) -> dict[str, Any]:
    """Arm name -> DecodeConfig. Names starting with "dynamic" are the baselines the S2D2 arms are compared to."""
    p = s2d2.preset
    if model_name == "tiny-llada2":  # block 32, the LLaDA2.x loop for the paper's settings (fused is block-loop)
        dyn = dict(gen_length=gen, method="diffusion", block_length=32, confidence_threshold=0.7)
        return {
            "AR": p("ar", gen_length=gen),
            "dynamic B32 τ0.7 (llada2-dynamic)": p("llada2-dynamic", gen_length=gen),
            "dynamic B32 τ0.7 + edits (llada2-dynamic-edit)": p("llada2-dynamic-edit", gen_length=gen),
            "dynamic B32 τ0.7 block loop": s2d2.DecodeConfig(**dyn),
            "dynamic B32 τ0.7 block loop +fused": s2d2.DecodeConfig(**dyn, fused_commit=True),
            "llada2-quality": p("llada2-quality", gen_length=gen),
            "llada2-conservative": p("llada2-conservative", gen_length=gen),
            "llada2-quality, cost_aware": p("llada2-quality", gen_length=gen, policy="cost_aware"),
        }
    base = p("dynamic-baseline", gen_length=gen)
    return {
        "AR": p("ar", gen_length=gen),
        "dynamic B4 τ0.8": base.replace(confidence_threshold=0.8),
        "dynamic B4 τ0.8 +fused": base.replace(confidence_threshold=0.8, fused_commit=True),
        "dynamic B8 τ0.95": base.replace(block_length=8, confidence_threshold=0.95),
        "dynamic B8 τ0.95 +fused": base.replace(block_length=8, confidence_threshold=0.95, fused_commit=True),
        "sdar-config-a": p("sdar-config-a", gen_length=gen),
        "sdar-config-b": p("sdar-config-b", gen_length=gen),
        "sdar-config-b+reuse+fused+trim": p("sdar-config-b+reuse+fused+trim", gen_length=gen),
        "sdar-config-b+cost-aware": p("sdar-config-b+cost-aware", gen_length=gen),
    }


@dataclass
class Tally:
    correct: int = 0
    decodes: int = 0
    tokens: int = 0
    wall: float = 0.0
    nfe: int = 0
    queries: int = 0
    decided: int = 0
    verified: int = 0
    per_repeat: list[int] = field(default_factory=list)
    clock: CpuClock = field(default_factory=CpuClock)

    def add(self, res: Any, ok: bool) -> None:
        m, steps = res.metrics, [s for s in res.trace.steps if s.decision is not None]
        self.correct += ok
        self.decodes += 1
        self.tokens += m["generated_tokens"]
        self.wall += m["wall_seconds"]
        self.nfe += m["nfe"]
        self.queries += m["query_tokens"]
        self.decided += len(steps)
        self.verified += sum(s.decision.verify for s in steps)

    @property
    def accuracy(self) -> float:
        return self.correct / max(1, self.decodes)

    @property
    def rate(self) -> float:
        """Tokens per wall second."""
        return self.tokens / max(self.wall, 1e-12)

    @property
    def cpu_rate(self) -> float:
        """Tokens per CPU second of the decode loop."""
        return self.tokens / max(self.clock.loop, 1e-12)

    def per_token(self, total: float) -> float:
        return total / max(1, self.tokens)


def run_model(name: str, problems: list[Any], repeats: int, gen: int) -> None:
    model = s2d2.load_model(name)
    arms = arms_for(name, gen)
    prompts = [messages_for(p)[0]["content"] for p in problems]
    for cfg in arms.values():  # first-call costs and the cost-aware arm's calibration, before anything is timed
        s2d2.generate(model, prompts[0], cfg, detailed=False)
    tallies = {arm: Tally() for arm in arms}
    for r in range(repeats):
        for i, (prompt, problem) in enumerate(zip(prompts, problems)):
            for arm, cfg in arms.items():
                with tallies[arm].clock.watching(model):
                    res = s2d2.generate(model, prompt, cfg, seed=i, detailed=False)
                tallies[arm].add(res, score(res.text, problem))
        for t in tallies.values():
            t.per_repeat.append(t.correct - sum(t.per_repeat))
    report(name, tallies, len(problems), model)


def report(name: str, tallies: dict[str, Tally], n: int, model: Any) -> None:
    ar = tallies["AR"]
    ar_nfe = ar.per_token(ar.nfe)
    print(f"\n== {name}: {n} held-out problems x {len(ar.per_repeat)} repeats, load average now "
          f"{os.getloadavg()[0]:.1f}", flush=True)
    print(f"{'arm':48s} {'accuracy':>9s} {'tokens/s':>9s} {'CPU tok/s':>10s} {'NFE/tok':>8s} {'query/tok':>10s} "
          f"{'verify':>7s} {'wall x AR':>10s} {'CPU x AR':>9s} {'NFE x AR':>9s} {'wall/NFE':>9s} {'CPU/NFE':>8s}")
    for arm, t in tallies.items():
        wall_x, cpu_x, nfe_x = t.rate / ar.rate, t.cpu_rate / ar.cpu_rate, ar_nfe / t.per_token(t.nfe)
        rate = f"{t.verified / t.decided:.2f}" if t.decided else "–"
        print(f"{arm:48s} {t.accuracy:9.1%} {t.rate:9.1f} {t.cpu_rate:10.1f} {t.per_token(t.nfe):8.3f} "
              f"{t.per_token(t.queries):10.2f} {rate:>7s} {wall_x:9.2f}x {cpu_x:8.2f}x {nfe_x:8.2f}x "
              f"{wall_x / nfe_x:9.2f} {cpu_x / nfe_x:8.2f}")
    baselines = {a: t for a, t in tallies.items() if a.startswith("dynamic")}
    for arm, t in tallies.items():
        if arm == "AR" or arm in baselines:
            continue
        fair = {a: b for a, b in baselines.items() if b.accuracy >= t.accuracy}
        if not fair:
            print(f"{arm}: no baseline arm is as accurate ({t.accuracy:.1%})")
            continue
        best = max(fair, key=lambda a: fair[a].rate)
        best_cpu = max(fair, key=lambda a: fair[a].cpu_rate)
        print(f"{arm}: over the fastest baseline at >= its accuracy: wall {t.rate / fair[best].rate:.2f}x ({best}, "
              f"{fair[best].accuracy:.1%}), CPU time {t.cpu_rate / fair[best_cpu].cpu_rate:.2f}x ({best_cpu})")
    table = getattr(model, "cost_table", None)
    if table is not None:
        fits = ", ".join(f"{f.kind} {f.base_s * 1e3:.2f} ms + {f.per_query_s * 1e6:.1f} us/query"
                         for f in table().kinds)
        print(f"measured forward costs ({name}): {fits}", flush=True)


def query_tokens(name: str, problems: list[Any], gen: int) -> None:
    """NFE and query tokens per generated token for every preset this model runs, trimmed verifier or not."""
    from s2d2.config import presets

    model = s2d2.load_model(name)
    family = ("llada2-",) if name == "tiny-llada2" else ("sdar-", "dynamic-")
    names = ["ar"] + [n for n in presets() if n.startswith(family)]
    prompts = [messages_for(p)[0]["content"] for p in problems]
    print(f"\n== {name}: {len(problems)} held-out problems, gen_length {gen}")
    print(f"{'preset':34s} {'NFE/tok':>8s} {'query/tok':>10s} {'trimmed':>8s} {'saved':>6s}")
    for preset in names:
        cfg = s2d2.preset(preset, gen_length=gen)
        counts = {}
        for trim in (False, True) if cfg.method == "s2d2" else (False,):
            run = cfg.replace(trim_verify=trim) if cfg.method == "s2d2" else cfg
            got = [s2d2.generate(model, q, run, seed=i, detailed=False).metrics for i, q in enumerate(prompts)]
            tokens = sum(m["generated_tokens"] for m in got)
            counts[trim] = (sum(m["nfe"] for m in got) / tokens, sum(m["query_tokens"] for m in got) / tokens)
        nfe, q = counts[False]
        trimmed = f"{counts[True][1]:8.2f} {1 - counts[True][1] / q:6.1%}" if True in counts else f"{'–':>8s} {'':6s}"
        print(f"{preset:34s} {nfe:8.3f} {q:10.2f} {trimmed}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="tiny,tiny-llada2")
    ap.add_argument("--problems", type=int, default=40, help="held-out questions per arm (the first N)")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--gen-length", type=int, default=96)
    ap.add_argument("--threads", type=int, default=int(os.environ.get("S2D2_THREADS", "2")))
    ap.add_argument("--query-tokens", action="store_true", help="query tokens per token of every preset instead")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    if args.query_tokens:
        for name in args.models.split(","):
            query_tokens(name, heldout(args.problems), args.gen_length)
        return
    print(f"torch threads {args.threads}, gen_length {args.gen_length}, load average {os.getloadavg()[0]:.1f} "
          f"(a shared machine: wall figures move with other jobs; ratios are side by side)", flush=True)
    for name in args.models.split(","):
        run_model(name, heldout(args.problems), args.repeats, args.gen_length)


if __name__ == "__main__":
    main()
