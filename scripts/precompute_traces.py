"""Record the example traces the app opens with (assets/traces/*.json) from the bundled model.

    python scripts/precompute_traces.py                 # bundled "tiny" model, default presets and prompts
    python scripts/precompute_traces.py --model tiny --gen-length 48 --out assets/traces

CPU is enough for the tiny model. File names sort in the order the app lists them; the first is shown at start.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

# (file stem, preset, prompt index, seed, overrides). The first one opens the app, so it should skip some steps,
# verify others and reject a draft: a sampled run (T = 0.7) that verifies only when K̂ >= 3.
RUNS = [
    ("01-s2d2-sampled--apples", "sdar-config-a", 0, 1, {"temperature": 0.7, "score_threshold": 2.0, "block_length": 8}),
    ("02-sdar-config-b--apples", "sdar-config-b", 0, 0, {}),
    ("03-sdar-config-a--apples", "sdar-config-a", 0, 0, {}),
    ("04-dynamic-baseline--apples", "dynamic-baseline", 0, 0, {}),
    ("05-ar--apples", "ar", 0, 0, {}),
    ("06-s2d2-hysteresis--noah", "sdar-config-b", 1, 0, {"policy": "score_hysteresis", "hysteresis_on": 0.5,
                                                           "hysteresis_off": -0.5, "score_type": "difference_dynamic",
                                                           "penalty_coef": 1.0, "block_length": 8}),
]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="tiny")
    ap.add_argument("--gen-length", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0, help="added to every run's seed")
    ap.add_argument("--out", type=Path, default=ROOT / "assets" / "traces")
    args = ap.parse_args(argv)
    import s2d2
    from components.run_panel import EXAMPLE_PROMPTS

    try:
        model = s2d2.load_model(args.model)
    except Exception as exc:
        print(f"Could not load model {args.model!r}: {exc}", file=sys.stderr)
        return 1
    args.out.mkdir(parents=True, exist_ok=True)
    for stem, name, prompt_idx, seed, overrides in RUNS:
        cfg = s2d2.preset(name, gen_length=args.gen_length, **overrides)
        t0 = time.perf_counter()
        result = s2d2.generate(model, EXAMPLE_PROMPTS[prompt_idx], cfg, seed=seed + args.seed)
        path = args.out / f"{stem}.json"
        path.write_text(result.trace.to_json(), encoding="utf-8")
        m = result.metrics
        print(f"{path.name}: {m['nfe']} NFE, {m['generated_tokens']} tokens, verify rate {m['verify_rate']:.2f}, "
              f"{time.perf_counter() - t0:.1f} s, {path.stat().st_size / 1e3:.0f} kB: {result.text[:60]!r}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
