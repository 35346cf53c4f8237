"""Measure the LLaDA2 tiny model's card table: static, dynamic, dynamic + editing, S2D2 and S2D2 + editing at
B = 8 / 16 / 32 on held-out arithmetic (accuracy, NFE per token, edits per token), plus an AR reference row and
B = 32 rows for editing after the block's last mask and for the paper's Conservative setting.

    python -m s2d2.tiny.report_llada2 --model assets/tiny-llada2 --n 100 --out runs/tiny-llada2/card.json
    python -m s2d2.tiny.report_llada2 --table runs/tiny-llada2/card.json [more.json ...]   # the markdown table
    python -m s2d2.tiny.report_llada2 --example-trace assets/traces/08-editing-fixes-a-wrong-digit--LLaDA2.json

The last writes the app's LLaDA2 example (a run that edits one of its own tokens).

Rows are written as they finish (a partial run leaves a usable file); `--rows` picks row indices, so two
processes can split the table into two files that `--table` merges.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .report import card_args, measure_rows

BLOCKS = (8, 16, 32)
# The S2D2 rows use the paper's Quality setting (docs/algorithm.md, 'Paper configurations as presets').
DECODERS = [  # (label, preset)
    ("static", "llada2-static"),
    ("dynamic (τ_mask 0.7)", "llada2-dynamic"),
    ("dynamic + editing (τ_edit 0.5)", "llada2-dynamic-edit"),
    ("S2D2 Quality, no editing", "llada2-quality-noedit"),
    ("S2D2 Quality + editing", "llada2-quality"),
]
POST = 4  # editing steps after the last mask (the eval scripts use 0; LLaDA2.1's own default is larger)
ROWS: list[tuple[str, str, dict[str, Any]]] = [("AR greedy (B = 1)", "ar", {})] + [
    (label, name, {"block_length": b}) for b in BLOCKS for label, name in DECODERS
] + [
    (f"dynamic + editing, {POST} post-mask steps", "llada2-dynamic-edit", {"block_length": 32, "max_post_steps": POST}),
    (f"S2D2 Quality + editing, {POST} post-mask steps", "llada2-quality", {"block_length": 32, "max_post_steps": POST}),
    ("S2D2 Conservative, no editing", "llada2-conservative-noedit", {"block_length": 32}),
    ("S2D2 Conservative + editing", "llada2-conservative", {"block_length": 32}),
]


def _row_line(i: int, r: dict[str, Any], res: dict[str, Any]) -> str:
    return (f"{i:2d} {r['label']:32s} B={r['block_length']:2d} acc {r['accuracy']:.2f} "
            f"NFE/tok {r['nfe_per_token']:.3f} edits/tok {r['edits_per_token']:.4f}")


def main(argv: list[str] | None = None) -> int:
    ap = card_args("python -m s2d2.tiny.report_llada2", "tiny-llada2", "runs/tiny-llada2/card.json")
    ap.add_argument("--table", nargs="+", default=None, help="print the markdown table of these result files")
    ap.add_argument("--example-trace", default=None, help="write the app's example trace (a run with an edit)")
    a = ap.parse_args(argv)
    if a.table:
        print(markdown_table(merge(a.table)))
        return 0
    if a.example_trace:
        return write_example(a.model, Path(a.example_trace))
    measure_rows(a, ROWS, _row_line)
    return 0


EXAMPLE = ("Tom has 12 apples. He buys 7 more. He doubles the apples. How many apples does Tom have now?",
           "llada2-dynamic-edit", {"gen_length": 64, "max_post_steps": 4})


def write_example(model_name: str, dest: Path) -> int:
    """A recorded run in which the model edits a token it decoded ("29 * 2" becomes "19 * 2")."""
    import s2d2

    prompt, name, overrides = EXAMPLE
    res = s2d2.generate(s2d2.load_model(model_name), prompt, s2d2.preset(name, **overrides), seed=0)
    edits = res.metrics["edits"]
    if not edits:
        print("the example run made no edit; pick another prompt", flush=True)
        return 1
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(res.trace.to_json())
    print(f"{dest}: {edits} edit(s); {res.text!r}")
    return 0


def merge(paths: list[str]) -> dict[str, Any]:
    res: dict[str, Any] = {"rows": {}}
    for p in paths:
        data = json.loads(Path(p).read_text())
        res["rows"].update(data.get("rows", {}))
        res.update({k: v for k, v in data.items() if k != "rows"})
    return res


def markdown_table(res: dict[str, Any]) -> str:
    lines = ["| Decoder | B | Accuracy | NFE per token | Tokens per forward | Edits per token |",
             "|---|---|---|---|---|---|"]
    for i in sorted(res["rows"], key=int):
        r = res["rows"][i]
        lines.append(f"| {r['label']} | {r['block_length']} | {100 * r['accuracy']:.0f} % ({r['correct']}/{r['n']}) | "
                     f"{r['nfe_per_token']:.3f} | {r['tokens_per_forward']:.2f} | {r['edits_per_token']:.4f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
