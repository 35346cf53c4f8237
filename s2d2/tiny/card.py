"""Helpers for the model card: the loss curve of both stages as CSV and a compact markdown summary."""
from __future__ import annotations

import csv
import json
from pathlib import Path

FIELDS = ("stage", "step", "tokens", "elapsed_s", "lr", "loss", "val_arith", "val_text", "val_arith_armode",
          "val_text_armode", "val_arith_bd4", "arith_acc_greedy")
LLADA2_FIELDS = ("stage", "step", "tokens", "elapsed_s", "lr", "loss", "expert_load_max", "val_arith_armode",
                 "val_text_armode", "val_arith_bd4", "val_arith_bd32", "val_arith_edit", "arith_acc_greedy")


def read_log(stage_dir: str | Path) -> list[dict]:
    p = Path(stage_dir) / "log.jsonl"
    return [json.loads(ln) for ln in p.read_text().splitlines() if ln.strip()] if p.exists() else []


def write_loss_csv(run_dir: str | Path, dest: str | Path, stages: tuple[str, ...] = ("ar", "sdar")) -> Path:
    dest = Path(dest)
    with dest.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=LLADA2_FIELDS if stages == ("llada2",) else FIELDS, extrasaction="ignore")
        w.writeheader()
        for stage in stages:
            for rec in read_log(Path(run_dir) / stage):
                if "final" in rec:
                    continue
                w.writerow({"stage": stage, **rec})
    return dest


def eval_rows(run_dir: str | Path, stage: str) -> list[dict]:
    return [r for r in read_log(Path(run_dir) / stage) if any(k.startswith(("val", "arith")) for k in r)]


def summary_table(run_dir: str | Path) -> str:
    lines = ["| Stage | Step | Tokens | Wall (min) | Train loss | Val loss arith / text | Val BD loss (B=4, 50 %) "
             "| Greedy acc (n=50) |", "|---|---|---|---|---|---|---|---|"]
    for stage in ("ar", "sdar"):
        for r in eval_rows(run_dir, stage):
            if stage == "ar":
                va, vt = r.get("val_arith"), r.get("val_text")
            else:
                va, vt = r.get("val_arith_armode"), r.get("val_text_armode")
            bd = r.get("val_arith_bd4")
            acc = r.get("arith_acc_greedy")
            loss = r.get("loss")
            lines.append(
                f"| {stage} | {r['step']}{' (final)' if r.get('final') else ''} | {r['tokens'] / 1e6:.2f}M | "
                f"{r['elapsed_s'] / 60:.1f} | {'-' if loss is None else f'{loss:.3f}'} | "
                f"{'-' if va is None else f'{va:.3f}'} / {'-' if vt is None else f'{vt:.3f}'} | "
                f"{'-' if bd is None else f'{bd:.3f}'} | {'-' if acc is None else f'{100 * acc:.0f} %'} |")
    return "\n".join(lines)
