"""The two model-side work savers, measured side by side in one run:

* query masks: the decoder passes `QueryMask` patterns (cache columns implicitly attended, cached per shape)
  instead of `[q, cache_len + q]` bool masks built on the host for every forward;
* row picks: the decoder passes the device index of the logit rows it reads, so only those rows are copied to
  float32 (the draft reads the mask rows, the verifier the span rows).

    python -m benchmarks.model_savers --threads 1

Arm "without" wraps the model so that every mask is widened on the host before the forward and every forward
returns all its rows in float32 (the rows are picked afterwards): exactly the work the decoder did before. Both
arms produce the same tokens (checked). Runs are interleaved (alternating which arm goes first); figures are totals.
Wall per token is the measure: the share outside forwards moves between the arms because the saved work sat partly
inside and partly outside the timed forward. Nothing is asserted.
"""
from __future__ import annotations

import argparse
import os
from typing import Any


import torch  # noqa: E402

import s2d2  # noqa: E402
from s2d2.models import HFModel  # noqa: E402
from s2d2.models.base import QueryMask  # noqa: E402
from s2d2.models.masks import widen  # noqa: E402

from benchmarks.decode_speed import load, task_prompts


class WithoutSavers:
    """An HFModel as the decoder used it before: full masks from the host, all rows returned in float32."""

    def __init__(self, model: HFModel) -> None:
        self._model = model

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)

    def forward(self, cache: Any, ids: torch.Tensor, positions: torch.Tensor, attention: Any, keep: int,
                last: int | None = None) -> torch.Tensor:  # no `rows`: the recorder picks them afterwards
        if isinstance(attention, QueryMask):
            attention = widen(attention.pattern, cache.get_seq_length())
        return self._model.forward(cache, ids, positions, attention, keep, last)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="tiny")
    ap.add_argument("--preset", default="sdar-config-b")
    ap.add_argument("--gen-length", type=int, default=96)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--backends", default="dynamic,static")
    ap.add_argument("--threads", type=int, default=int(os.environ.get("S2D2_THREADS", "2")))
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    base, random_weights = load(args.model)
    prompts = [[5 + i for i in range(12)], [40 + i for i in range(20)]] if random_weights else task_prompts()
    cfg = s2d2.preset(args.preset, gen_length=args.gen_length)
    arms: dict[tuple[str, str], Any] = {}
    for backend in args.backends.split(","):
        model = HFModel(base.model, base.tokenizer, base.spec, backend=backend)
        arms[("with", backend)], arms[("without", backend)] = model, WithoutSavers(model)
    for model in arms.values():
        s2d2.generate(model, prompts[0], cfg, detailed=False)  # warm-up
    totals = {key: [0.0, 0.0, 0] for key in arms}
    tokens: dict[tuple[str, str], list] = {key: [] for key in arms}
    order = list(arms.items())
    for r in range(args.repeats):
        for prompt in prompts:
            order.reverse()  # alternate which arm runs first
            for key, model in order:
                m = s2d2.generate(model, prompt, cfg, seed=0, detailed=False)
                tokens[key].append(m.token_ids)
                totals[key][0] += m.metrics["wall_seconds"]
                totals[key][1] += m.metrics["forward_seconds"]
                totals[key][2] += m.metrics["generated_tokens"]
    print(f"model: {base.spec.name}, preset {args.preset}, threads {args.threads}, {len(prompts)} prompts x "
          f"{args.repeats} repeats, lean traces")
    print(f"{'savers':8s} {'backend':8s} {'wall ms/token':>14s} {'outside forwards':>17s}")
    for (arm, backend), (wall, fwd, n) in totals.items():
        print(f"{arm:8s} {backend:8s} {wall / max(1, n) * 1000:14.2f} {1 - fwd / wall:17.1%}")
    for backend in args.backends.split(","):
        same = tokens[("with", backend)] == tokens[("without", backend)]
        ratio = totals[("without", backend)][0] / totals[("with", backend)][0]
        print(f"[{backend}] wall without / with savers: {ratio:.3f}; same tokens: {same}")


if __name__ == "__main__":
    main()
