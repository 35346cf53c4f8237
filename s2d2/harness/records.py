"""What the `s2d2` backend records per lm-eval request, and the per-task summary printed next to the metric.

A generation record holds the decoder's counts (the same fields as a `bench` row: NFE, generated tokens, drafts,
draft tokens, accepted tokens, verify steps, edits); a scoring record holds the AR-mode forwards spent. The summary
aggregates over a task's requests the way `bench` aggregates over a cell's problems: NFE per token is total forwards
over total generated tokens; the mean acceptance length is 1 + accepted / drafts (vLLM's name).
"""
from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterable, Optional

COUNTS = ("nfe", "generated_tokens", "num_drafts", "num_draft_tokens", "num_accepted_tokens", "verify_steps",
          "edits")


def generation_record(task: Optional[str], doc_id: Optional[int], repeat: int, seed: int, result: Any,
                      finish_reason: str, trace_file: Optional[str]) -> dict[str, Any]:
    m, steps = result.metrics, result.trace.steps
    rec: dict[str, Any] = {
        "request": "generate_until", "task": task, "doc_id": doc_id, "repeat": repeat, "seed": seed,
        "nfe": m["nfe"], "generated_tokens": m["generated_tokens"], "num_drafts": m["num_drafts"],
        "num_draft_tokens": m["num_draft_tokens"], "num_accepted_tokens": m["num_accepted_tokens"],
        "verify_steps": sum(s.verification is not None for s in steps), "edits": m.get("edits", 0),
        "nfe_per_token": m["nfe_per_token"], "mean_acceptance_length": m["mean_acceptance_length"],
        "draft_acceptance_rate": m["draft_acceptance_rate"], "wall_s": round(m["wall_seconds"], 4),
        "finish_reason": finish_reason,
    }
    if trace_file is not None:
        rec["trace"] = trace_file
    return rec


def scoring_record(kind: str, task: Optional[str], doc_id: Optional[int], forwards: float, tokens: int) -> dict:
    """A loglikelihood request's share of the AR-mode forwards (a shared prefill is split among its requests)."""
    return {"request": kind, "task": task, "doc_id": doc_id, "forwards": round(forwards, 4), "tokens": tokens}


def summarize(records: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per task: request counts, summed decoder counts, NFE per token, mean acceptance length, acceptance rate."""
    by_task: dict[str, dict[str, Any]] = defaultdict(lambda: {"generate_until": 0, "scoring_requests": 0,
                                                               "scoring_forwards": 0.0, **{k: 0 for k in COUNTS}})
    for rec in records:
        row = by_task[str(rec.get("task"))]
        if rec["request"] == "generate_until":
            row["generate_until"] += 1
            for k in COUNTS:
                row[k] += rec[k]
        else:
            row["scoring_requests"] += 1
            row["scoring_forwards"] += rec["forwards"]
    out = {}
    for task, row in by_task.items():
        gen, nfe, drafts = row["generated_tokens"], row["nfe"], row["num_drafts"]
        row["scoring_forwards"] = round(row["scoring_forwards"], 2)
        row["nfe_per_token"] = nfe / gen if gen else None
        row["tokens_per_forward"] = gen / nfe if nfe else None
        row["mean_acceptance_length"] = 1 + row["num_accepted_tokens"] / drafts if drafts else None
        row["draft_acceptance_rate"] = (row["num_accepted_tokens"] / row["num_draft_tokens"]
                                        if row["num_draft_tokens"] else None)
        out[task] = row
    return out


def write_records(folder: Path, stamp: str, records: list[dict[str, Any]], summary: dict[str, Any]) -> list[Path]:
    """`s2d2_requests_<stamp>.jsonl` (one record per request) and `s2d2_summary_<stamp>.json` in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = folder / f"s2d2_requests_{stamp}.jsonl"
    lines.write_text("".join(json.dumps(r, allow_nan=False) + "\n" for r in records), encoding="utf-8")
    total = folder / f"s2d2_summary_{stamp}.json"
    total.write_text(json.dumps(summary, indent=1, allow_nan=False), encoding="utf-8")
    return [lines, total]


def format_summary(results: dict[str, Any], summary: dict[str, Any]) -> str:
    """One line per task and metric: lm-eval's value beside the decoder's NFE/token and acceptance."""
    header = f"{'task':<28} {'metric':<28} {'value':>8} {'NFE/token':>10} {'accept len':>10} {'accept rate':>11}"
    lines = [header, "-" * len(header)]
    for task, metrics in (results.get("results") or {}).items():
        s = summary.get(task, {})
        cols = [_num(s.get("nfe_per_token")), _num(s.get("mean_acceptance_length")),
                _num(s.get("draft_acceptance_rate"))]
        for name, value in metrics.items():
            if "," not in name or "stderr" in name or not isinstance(value, (int, float)) or isinstance(value, bool):
                continue
            lines.append(f"{task[:28]:<28} {name[:28]:<28} {value:>8.4f} {cols[0]:>10} {cols[1]:>10} {cols[2]:>11}")
    return "\n".join(lines)


def _num(v: Optional[float]) -> str:
    return "-" if v is None else f"{v:.3f}"
