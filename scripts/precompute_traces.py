"""Record the example traces the app opens with (assets/traces/*.json) from the bundled model.

    python scripts/precompute_traces.py                 # bundled "tiny" model, default presets and prompts
    python scripts/precompute_traces.py --model tiny --gen-length 48 --out assets/traces

    python scripts/precompute_traces.py --only tour/lossless-s2d2 tour/lossless-ar   # some files only

CPU is enough for the tiny model. File names sort in the order the app lists them; the first is shown at start.
A `*.baseline.json` file is the diffusion baseline on its example's prompt and seed (the Replay tab's toggle).
Files under `tour/` are the Learn tour's material, not listed as examples: the lossless S2D2 run and the AR run on
the opening question (the exactness stop). A run with a model of its own (the LLaDA2 example where an edit and a
verification meet, found by scripts/find_edit_and_verify.py) loads that model instead of `--model`.
The LLaDA2 example 08-editing-fixes-a-wrong-digit--LLaDA2.json comes from the bundled LLaDA2 model:
`python -m s2d2.tiny.report_llada2 --example-trace assets/traces/08-editing-fixes-a-wrong-digit--LLaDA2.json`.
The D2F pipeline pair: `--only 10-pipeline--blocks-in-flight--D2F 10-pipeline--blocks-in-flight--D2F.baseline`.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any, Union

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

# A prompt: an index into components.run_panel.EXAMPLE_PROMPTS, ("heldout", i) for held-out arithmetic question i, or
# ("prose", i) for EXAMPLE_PROMPTS[i] continued as free text (no chat template).
Prompt = Union[int, tuple[str, int]]
# The first example opens the app. It is the pair scripts/find_catch.py found (held-out question 8, seed 8): at
# B = 16 the dynamic-threshold baseline (τ 0.9, the sweep's 88.5 % cell) writes "33 + 20 = 53"; S2D2 at the same B
# (verify iff K̂ − 1 ≥ 1.5, the sweep's 96.5 % cell) drafts the same wrong "2", its verifier rejects it and
# resamples "3": "#### 63". It also skips verification once, so one trace shows every idea of the tour.
CATCH_PROMPT: Prompt = ("heldout", 8)
# The exactness stop's S2D2 run: the AR-exact setting of docs/algorithm.md, 'Acceptance modes and AR-exactness'
# (greedy_exact, always verify, cache_ver, k_s = 1) at the opening's B = 16, with the forward-saving options on
# (benchmarks/exactness.py measures the same setting on 40 held-out questions).
LOSSLESS = {"block_length": 16, "acceptance": "greedy_exact", "policy": "always", "kv_reuse": True,
            "fused_commit": True}
# The LLaDA2 example where an edit and a verification meet (scripts/find_edit_and_verify.py: held-out 17, seed 17):
# block 2's first step verifies (a rejected draft, resampled "4"), a later skipped step writes "#### 17" by threshold
# picks and the next step edits the "1" into "2": "#### 27".
EDIT_AND_VERIFY = ("heldout", 17)
# The D2F pipeline: on Austen prose (the arithmetic answers are so confident that every block is decoded in the step
# that drafts it, so no two blocks overlap) a block joins at 10 % of the last one and counts as complete at 50 %: up
# to three blocks in flight, S2D2 verifying the first span after the cache; the partner is D2F's own decoder.
PIPELINE = {"block_length": 8, "block_add_threshold": 0.1, "decoded_token_threshold": 0.5, "gen_length": 48}
# (file stem, preset, prompt, seed, overrides[, model: "" = --model])
RUNS: list[tuple[Any, ...]] = [
    ("01-verifier-catches-a-wrong-digit", "sdar-config-a", CATCH_PROMPT, 8,
     {"block_length": 16, "score_threshold": 1.5}),
    ("01-verifier-catches-a-wrong-digit.baseline", "dynamic-baseline", CATCH_PROMPT, 8,
     {"block_length": 16, "confidence_threshold": 0.9}),
    ("02-always-verify--block-16", "sdar-config-b", 0, 0, {}),
    ("03-verify-when-it-pays--block-4", "sdar-config-a", 0, 0, {}),
    ("04-diffusion-alone--block-4", "dynamic-baseline", 0, 0, {}),
    ("05-one-token-per-forward--autoregressive", "ar", 0, 0, {}),
    ("06-hysteresis-switches-verification-on", "sdar-config-b", 1, 0,
     {"policy": "score_hysteresis", "hysteresis_on": 0.5, "hysteresis_off": -0.5, "score_type": "difference_dynamic",
      "penalty_coef": 1.0, "block_length": 8}),
    ("07-sampled-drafts--temperature-0.7", "sdar-config-a", 0, 1,
     {"temperature": 0.7, "score_threshold": 2.0, "block_length": 8}),
    ("09-self-correction-meets-verification--LLaDA2", "llada2-quality", EDIT_AND_VERIFY, 17,
     {"score_threshold": 12.0, "max_post_steps": 4}, "tiny-llada2"),
    ("10-pipeline--blocks-in-flight--D2F", "d2f-s2d2", ("prose", 2), 0, PIPELINE),
    ("10-pipeline--blocks-in-flight--D2F.baseline", "d2f", ("prose", 2), 0, PIPELINE),
    ("tour/lossless-s2d2", "sdar-config-b", CATCH_PROMPT, 8, LOSSLESS),
    ("tour/lossless-ar", "ar", CATCH_PROMPT, 8, {}),
]


def prompt_text(prompt: Prompt) -> str:
    from components.run_panel import EXAMPLE_PROMPTS
    from s2d2.tasks.arithmetic import heldout

    if isinstance(prompt, tuple) and prompt[0] == "heldout":
        return heldout(prompt[1] + 1)[prompt[1]].question
    return EXAMPLE_PROMPTS[prompt[1] if isinstance(prompt, tuple) else prompt]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="tiny")
    ap.add_argument("--gen-length", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0, help="added to every run's seed")
    ap.add_argument("--out", type=Path, default=ROOT / "assets" / "traces")
    ap.add_argument("--only", nargs="+", default=None, metavar="STEM", help="record only these file stems")
    args = ap.parse_args(argv)
    import s2d2

    runs = [r for r in RUNS if args.only is None or r[0] in args.only]
    models: dict[str, Any] = {}
    for stem, name, prompt, seed, overrides, *own in runs:
        model_name = own[0] if own else args.model
        try:
            model = models.get(model_name) or models.setdefault(model_name, s2d2.load_model(model_name))
        except Exception as exc:
            print(f"Could not load model {model_name!r}: {exc}", file=sys.stderr)
            return 1
        # the pipeline decodes gen_length // B blocks: at least one
        settings = {"gen_length": max(args.gen_length, int(overrides.get("block_length", 1))), **overrides}
        cfg = s2d2.preset(name, **settings)
        t0 = time.perf_counter()
        chat = False if isinstance(prompt, tuple) and prompt[0] == "prose" else None
        result = s2d2.generate(model, prompt_text(prompt), cfg, seed=seed + args.seed, chat=chat)
        path = args.out / f"{stem}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(result.trace.to_json(), encoding="utf-8")
        m = result.metrics
        print(f"{path.name}: {m['nfe']} NFE, {m['generated_tokens']} tokens, verify rate {m['verify_rate']:.2f}, "
              f"{time.perf_counter() - t0:.1f} s, {path.stat().st_size / 1e3:.0f} kB: {result.text[:60]!r}")
    print_stories(args.out)
    return 0


def print_stories(directory: Path) -> None:
    """The headline each example pair will show (the app computes the same line from the same files)."""
    from components.examples import list_examples, load_pair
    from components.story import pair_story

    for label, example in list_examples(directory).items():
        main_trace, baseline = load_pair(example)
        if baseline is not None:
            print(f"{label}: {pair_story(main_trace, baseline).text}")


if __name__ == "__main__":
    raise SystemExit(main())
