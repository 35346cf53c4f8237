"""Replay: everything shown for one step of a recorded trace. Pure functions of (trace, step); no model."""
from __future__ import annotations

import html
import math
import re
from collections import Counter
from typing import Any, Optional

import plotly.graph_objects as go

from s2d2.trace import Trace

from .canvas import render_canvas
from .figures import acceptance_histogram, commit_map, nfe_by_block, per_position_figure, routing_figure
from .mask_view import mask_figure
from .strip import render_strip
from .trace_index import clamp_step, index_of


def step_summary(trace: Trace, step: int) -> str:
    """One accessible sentence, e.g. "Block 3, step 2: verify ON, 5 drafted, 3 accepted, 1 resampled, NFE 14"."""
    idx = index_of(trace)
    s = clamp_step(trace, step)
    rec = idx.step_record(s)
    n = len(trace.steps)
    if rec is None:
        pre = sum(f.kind == "prefill" for f in trace.forwards)
        return (f"Start: prompt of {len(trace.header.prompt_ids)} tokens, {n} steps recorded, "
                f"NFE {pre} (prefill). Move the scrubber to replay.")
    d = rec.decision
    route = "no routing" if d is None else ("verify ON" if d.verify else "verify OFF")
    hows = Counter(c.how for c in rec.commits)
    nfe = trace.forwards[rec.forwards[-1]].nfe_after if rec.forwards else 0
    parts = [f"Block {rec.block}, step {rec.step + 1}: {route}", f"{len(rec.drafts)} drafted"]
    order = ("accepted", "resampled", "threshold", "fallback", "hiconf_extra", "ratio_extra", "ar", "ar_seed")
    parts += [f"{hows[h]} {h.replace('_', ' ')}" for h in order if hows.get(h)]
    if rec.edits:
        shown = ", ".join(f"'{e.old_text}' → '{e.new_text}'" for e in rec.edits[:3])
        parts.append(f"{len(rec.edits)} edited ({shown}{', …' if len(rec.edits) > 3 else ''})")
    parts.append(f"NFE {nfe}")
    text = ", ".join(parts)
    if d is not None:
        text += f" ({d.reason})"
    return text + f". Step {s} of {n}."


def render_step(trace: Trace, step: int, mask_which: str = "auto") -> tuple[str, str, go.Figure, go.Figure, str]:
    """(canvas_html, strip_html, routing_fig, mask_fig, summary_text) for scrubber value `step`."""
    s = clamp_step(trace, step)
    return (render_canvas(trace, s), render_strip(trace, s), routing_figure(trace, s),
            mask_figure(trace, s, mask_which), step_summary(trace, s))


def render_timelines(trace: Trace, step: Optional[int] = None) -> tuple[go.Figure, go.Figure, go.Figure, go.Figure]:
    """Whole-run figures: commit map, forwards per block, acceptance histogram, per-position acceptance."""
    return commit_map(trace, step), nfe_by_block(trace), acceptance_histogram(trace), per_position_figure(trace)


def basic_metrics(trace: Trace) -> dict[str, Any]:
    """Metrics computed locally from the trace; used when s2d2.metrics is unavailable."""
    kinds = Counter(f.kind for f in trace.forwards)
    nfe = len(trace.forwards)
    vsteps = [s for s in trace.steps if s.verification is not None]
    accepted = sum(s.verification.accepted_len for s in vsteps)  # type: ignore[union-attr]
    draft_tokens = sum(s.span[1] for s in vsteps)
    generated = trace.footer.generated_length if trace.footer else sum(len(s.commits) for s in trace.steps)
    return {
        "nfe": nfe, "nfe_by_kind": dict(kinds), "generated_tokens": generated,
        "tokens_per_forward": generated / nfe if nfe else 0.0,
        "mean_acceptance_length": 1 + accepted / len(vsteps) if vsteps else None,
        "draft_acceptance_rate": accepted / draft_tokens if draft_tokens else None,
        "verify_rate": len(vsteps) / len(trace.steps) if trace.steps else 0.0,
        "wall_seconds": trace.footer.wall_s if trace.footer else None,
        "query_tokens": sum(f.query_tokens for f in trace.forwards),
    }


METRIC_LABELS = [
    ("nfe", "NFE (forward passes)"), ("generated_tokens", "generated tokens"),
    ("tokens_per_forward", "tokens per forward (TPF)"), ("mean_acceptance_length", "mean acceptance length (vLLM)"),
    ("tokens_per_verify", "tokens per verify (S2D2-exact, no bonus token)"),
    ("draft_acceptance_rate", "draft acceptance rate (vLLM)"), ("num_drafts", "verify calls (vLLM num_drafts)"),
    ("verify_rate", "verify rate"), ("steps_per_block", "steps per block"),
    ("estimator_mae", "estimator MAE |K̂ − K|"), ("query_tokens", "query tokens"), ("wall_seconds", "wall time (s)"),
    ("finish_reason", "finish reason"),
    ("edits", "edits (self-correction)"), ("edits_per_token", "edits per token"),
]
OPTIONAL = {"tokens_per_verify", "num_drafts", "steps_per_block", "estimator_mae", "finish_reason"}
EDITING_ONLY = {"edits", "edits_per_token"}  # shown for traces of the editing loop (LLaDA2.x)


def metrics_of(trace: Trace) -> dict[str, Any]:
    try:
        return trace.metrics()
    except (ImportError, AttributeError, NotImplementedError):
        return basic_metrics(trace)


def metrics_table(trace: Trace) -> list[list[str]]:
    """Rows [metric, value] for a gr.Dataframe; NFE by kind listed after the main rows."""
    m = metrics_of(trace)
    editing = trace.header.config.get("loop") == "editing"
    rows = []
    for key, label in METRIC_LABELS:
        if (key in OPTIONAL and key not in m) or (key in EDITING_ONLY and not editing):
            continue
        value = m.get(key)
        rows.append([label, _show(value)])
    for kind, count in sorted((m.get("nfe_by_kind") or {}).items()):
        rows.append([f"NFE: {kind}", _show(count)])
    return rows


def _show(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return "–" if math.isnan(value) else f"{value:.3f}"
    return str(value)


def md_escape(value: Any, limit: int = 120) -> str:
    """Text from a trace file made inert for gr.Markdown: HTML escaped, Markdown punctuation backslashed."""
    text = re.sub(r"([\\`*_{}\[\]()#+!|~-])", r"\\\1", str(value)[:limit])
    return html.escape(text, quote=True)


def trace_title(trace: Trace) -> str:
    h = trace.header
    cfg = h.config
    method = md_escape(cfg.get("method", "?"), 20)
    policy = md_escape(cfg.get("policy", ""), 40) if method == "s2d2" else ""
    block = md_escape(cfg.get("block_length"), 10)
    if cfg.get("loop") == "editing":
        tau = cfg.get("editing_threshold")
        block += f" · editing {'τ_edit=' + md_escape(tau, 10) if tau is not None else 'off'}"
    return (f"**{md_escape(h.model.name, 80)}** · {method}{' / ' + policy if policy else ''} · B={block} · "
            f"seed {h.seed} · {md_escape(h.provenance, 20)} trace · {len(trace.steps)} steps, "
            f"{len(trace.forwards)} forwards")
