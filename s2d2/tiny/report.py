"""Measure the model card's table for a tiny checkpoint: held-out arithmetic accuracy and tokens per forward
for AR, diffusion at two thresholds and block sizes, and S2D2 presets; plus free-text samples.

    python -m s2d2.tiny.report --model assets/tiny --n 100 --out runs/tiny/card_eval.json

Results are written after every row, so a partial run still leaves a usable file.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any, Callable

ROWS: list[tuple[str, str, dict[str, Any]]] = [
    # (label, preset, overrides)
    ("AR greedy (B = 1)", "ar", {}),
    ("diffusion B = 4, τ = 0.9", "dynamic-baseline", {"confidence_threshold": 0.9}),
    ("diffusion B = 4, τ = 0.5", "dynamic-baseline", {"confidence_threshold": 0.5}),
    ("diffusion B = 8, τ = 0.9", "dynamic-baseline", {"block_length": 8, "confidence_threshold": 0.9}),
    ("diffusion B = 8, τ = 0.5", "dynamic-baseline", {"block_length": 8, "confidence_threshold": 0.5}),
    ("diffusion B = 16, τ = 0.9", "dynamic-baseline", {"block_length": 16, "confidence_threshold": 0.9}),
    ("diffusion B = 16, τ = 0.5", "dynamic-baseline", {"block_length": 16, "confidence_threshold": 0.5}),
    ("S2D2 `sdar-config-a` (B = 4)", "sdar-config-a", {}),
    ("S2D2 `sdar-config-b` (B = 16)", "sdar-config-b", {}),
    ("S2D2 greedy_exact, always verify, B = 4", "sdar-config-a", {"policy": "always", "acceptance": "greedy_exact"}),
    ("S2D2 greedy_exact, always verify, B = 8", "sdar-config-b",
     {"block_length": 8, "policy": "always", "acceptance": "greedy_exact"}),
    ("S2D2 greedy_exact, always verify, B = 16", "sdar-config-b", {"policy": "always", "acceptance": "greedy_exact"}),
]

PROSE_PROMPTS = [
    "It is a truth universally acknowledged, that",
    "Emma was sorry to find that",
    "\"My dear Mr. Bennet,\" said his lady to him one day,",
]


def card_args(prog: str, model: str, out: str) -> argparse.ArgumentParser:
    """The options every model-card report takes."""
    ap = argparse.ArgumentParser(prog=prog)
    ap.add_argument("--model", default=model)
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--gen-length", type=int, default=128)
    ap.add_argument("--out", default=out)
    ap.add_argument("--rows", default=None, help="comma-separated row indices to run (default: all)")
    ap.add_argument("--threads", type=int, default=1)
    return ap


def measure_rows(a: argparse.Namespace, rows: list[tuple[str, str, dict[str, Any]]],
                 finish: Callable[[int, dict[str, Any], dict[str, Any]], str]) -> tuple[Any, dict[str, Any]]:
    """Evaluate the chosen rows (label, preset, overrides) on a.n held-out problems, writing the results file after
    every row (a partial run leaves a usable file); `finish(i, row, results)` annotates a row and returns the line
    to print. Returns the model and the results."""
    import torch

    import s2d2
    from s2d2.tasks import arithmetic as A
    from s2d2.tasks.evaluate import evaluate

    torch.set_num_threads(a.threads)
    model = s2d2.load_model(a.model, device="cpu", dtype=torch.float32)
    problems = A.heldout(a.n)
    out = Path(a.out)
    res = json.loads(out.read_text()) if out.exists() else {"rows": {}}
    res.update(model=str(a.model), n=a.n, gen_length=a.gen_length)
    for i in ([int(r) for r in a.rows.split(",")] if a.rows else range(len(rows))):
        label, name, overrides = rows[i]
        t0 = time.time()
        cfg = s2d2.preset(name, gen_length=a.gen_length, **overrides)
        r = evaluate(model, cfg, problems, seed=0, progress=False)
        r.update(label=label, preset=name, overrides=overrides, block_length=1 if name == "ar" else cfg.block_length)
        res["rows"][str(i)] = r
        line = finish(i, r, res)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(res, indent=1, ensure_ascii=False))
        print(f"{line} ({time.time() - t0:.0f}s)", flush=True)
    return model, res


def _same_as_ar(i: int, r: dict[str, Any], res: dict[str, Any]) -> str:
    from s2d2.tasks.evaluate import agreement

    ar = res["rows"].get("0")
    if ar is not None and i != 0:
        r["identical_to_ar"] = agreement(r["texts"], ar["texts"])
    return (f"{r['label']:45s} acc {r['accuracy']:.3f}  tok/fwd {r['tokens_per_forward']:.2f}  "
            f"same-as-AR {r.get('identical_to_ar', '-')}")


def main(argv: list[str] | None = None) -> int:
    ap = card_args("python -m s2d2.tiny.report", "tiny", "runs/tiny/card_eval.json")
    ap.add_argument("--samples", action=argparse.BooleanOptionalAction, default=True)
    a = ap.parse_args(argv)
    model, res = measure_rows(a, ROWS, _same_as_ar)
    if a.samples:
        import s2d2

        samples = []
        for p in PROSE_PROMPTS:
            for name, ov in (("ar", {"temperature": 0.8, "top_p": 0.95}),
                             ("sdar-config-a", {"temperature": 0.8, "top_p": 0.95})):
                g = s2d2.generate(model, p, s2d2.preset(name, gen_length=64, **ov), seed=0, chat=False,
                                  detailed=False)
                samples.append({"prompt": p, "preset": name, "overrides": ov, "text": g.text,
                                "tokens_per_forward": g.metrics["tokens_per_forward"]})
        res["prose_samples"] = samples
        Path(a.out).write_text(json.dumps(res, indent=1, ensure_ascii=False))
    return 0


def markdown_table(res: dict) -> str:
    lines = ["| Decoder | Accuracy | Tokens per forward | NFE per problem | Identical to AR |",
             "|---|---|---|---|---|"]
    for i in sorted(res["rows"], key=int):
        r = res["rows"][i]
        same = r.get("identical_to_ar")
        lines.append(f"| {r['label']} | {100 * r['accuracy']:.0f} % ({r['correct']}/{r['n']}) | "
                     f"{r['tokens_per_forward']:.2f} | {r['mean_nfe']:.1f} | "
                     f"{'-' if same is None else f'{100 * same:.0f} %'} |")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
