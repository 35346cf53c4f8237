"""Replay: everything shown for one step of a recorded trace. Pure functions of (trace, step, options); no model.

`STEP_VIEWS` is the registry of per-step views: name -> (trace, step, options) -> value. The app's wiring maps each
name to the component of the same name, so adding a view is one line here plus its component.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Optional

import plotly.graph_objects as go

from s2d2.metrics import trace_metrics
from s2d2.trace import Trace

from components.views.canvas import legend_html, render_canvas, visible_text
from components.views.decoded_in import decoded_words
from components.views.describe import decision_line
from components.views.plain_words import step_words
from components.escape import md_text
from components.views.figures import acceptance_histogram, commit_map, nfe_by_block, per_position_figure, routing_figure
from components.views.attention_mask import mask_figure
from components.views.residual import residual_html
from components.views.verify_strip import render_strip
from components.views.token_detail import detail_html
from components.views.trace_index import clamp_step, index_of, show_value
from components.views.plural import plural


def step_summary(trace: Trace, step: int) -> str:
    """One accessible sentence with one step numbering (the scrubber's), e.g. "Step 2 of 4 (answer block 2): verify
    ON — 16 drafted, 8 accepted, 1 resampled; 5 forwards so far. Score s = K̂ − c = …"; every symbol is named in
    the sentence that first uses it."""
    idx = index_of(trace)
    s = clamp_step(trace, step)
    rec = idx.step_record(s)
    n = len(trace.steps)
    if rec is None:
        pre = sum(f.kind == "prefill" for f in trace.forwards)
        read = (f"{_forwards(pre)} so far (the prefill, which reads the prompt)" if pre
                else "no forward yet (this trace records no separate prefill)")  # never "0 forwards (the prefill)"
        return (f"Start: a prompt of {plural(len(trace.header.prompt_ids), 'token')}, {read}. "
                f"{plural(n, 'step')} recorded: move the scrubber to replay them.")
    d = rec.decision
    method = trace.header.config.get("method")
    if d is None and method != "ar" and not rec.masks_before:  # the editing loop's mask-free steps
        route = "no masks left: the model re-reads the block for edits"
    elif d is None:
        route = "one autoregressive step" if method == "ar" else "no verifier (diffusion alone never verifies)"
    else:
        route = "verify ON" if d.verify else "verify OFF"
    hows = Counter(c.how for c in rec.commits)
    nfe = trace.forwards[rec.forwards[-1]].nfe_after if rec.forwards else 0
    parts = [f"{len(rec.drafts)} drafted"]
    order = ("accepted", "resampled", "threshold", "fallback", "hiconf_extra", "ratio_extra", "ar", "ar_seed")
    parts += [f"{hows[h]} {_how_words(h, trace)}" for h in order if hows.get(h)]
    if rec.edits:
        shown = ", ".join(f"'{visible_text(e.old_text)}' → '{visible_text(e.new_text)}'" for e in rec.edits[:3])
        parts.append(f"{len(rec.edits)} edited ({shown}{', …' if len(rec.edits) > 3 else ''})")
    where = f"answer block {idx.answer_block(rec.block)}"
    if len(rec.in_flight) > 1:  # a pipeline (D2F) step works in several blocks at once
        blocks = [idx.answer_block(r.block) for r in rec.in_flight]
        where = f"answer blocks {blocks[0]}–{blocks[-1]} in flight, {len(blocks)} at once"
    text = f"Step {s} of {n} ({where}): {route} — {', '.join(parts)}; {_forwards(nfe)} so far."
    if d is not None:
        text += f" {_routing_sentence(decision_line(d))}"
    return text


def _how_words(how: str, trace: Trace) -> str:
    tau = trace.header.config.get("confidence_threshold")
    if how == "threshold" and isinstance(tau, (int, float)):
        return f"confident (p > τ_conf = {tau:g}, the confidence threshold)"
    return HOW_WORDS.get(how, how.replace("_", " "))


HOW_WORDS = {"threshold": "confident (p > τ_conf)", "hiconf_extra": "high-confidence extra", "ar": "autoregressive",
             "ar_seed": "AR seed", "ratio_extra": "ratio extra"}


def _forwards(n: int) -> str:
    return f"{n} forward{'' if n == 1 else 's'}"


def _routing_sentence(line: str) -> str:
    """The policy's line, with its symbols named the first time the screen shows them."""
    names = [(sym, words) for sym, words in (
        ("K̂", "K̂ = drafts the estimator expects the verifier to accept"),
        ("c·N_hi", "c·N_hi = penalty c per confident draft"),
        ("− c", "c = penalty for the cost of the verify forward"),
        ("τ_score", "τ_score = the score threshold"),
        ("τ_on", "τ_on / τ_off = the band that switches verification on and off")) if sym in line]
    if "c·N_hi" in line:
        names = [nw for nw in names if nw[0] != "− c"]
    return f"Routing: {line}" + (f" ({'; '.join(w for _, w in names)})." if names else ".")


@dataclass(frozen=True)
class StepOptions:
    """The Replay tab's view switches: the mask viewer's forward, the canvas colouring, the selected position."""

    mask_which: str = "auto"
    color_by: str = "state"
    selected: Optional[int] = None


STEP_VIEWS: dict[str, Callable[[Trace, int, StepOptions], Any]] = {
    "canvas": lambda t, s, o: render_canvas(t, s, color_by=o.color_by),
    "strip": lambda t, s, o: render_strip(t, s),
    "routing": lambda t, s, o: routing_figure(t, s),
    "mask": lambda t, s, o: mask_figure(t, s, o.mask_which, o.selected),
    "step_words": lambda t, s, o: step_words(t, s),  # what happened, in words, before the numbers
    "summary": lambda t, s, o: step_summary(t, s),
    "legend": lambda t, s, o: legend_html(t, o.color_by),
    "detail": lambda t, s, o: detail_html(t, s, o.selected),
    "residual": lambda t, s, o: residual_html(t, s, o.selected),  # "" (nothing drawn) without a resample to show
}


def render_step(trace: Trace, step: Any, options: StepOptions = StepOptions()) -> dict[str, Any]:
    """Every per-step view (STEP_VIEWS) for scrubber value `step`, keyed by view name."""
    s = clamp_step(trace, step)
    return {name: view(trace, s, options) for name, view in STEP_VIEWS.items()}


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
        "edits": sum(len(s.edits) for s in trace.steps),
        "edits_per_token": sum(len(s.edits) for s in trace.steps) / generated if generated else 0.0,
    }


# (key, label, what it means): one line next to every metric whose meaning is not obvious
METRICS = [
    ("nfe", "forwards (NFE)", "model calls, i.e. network function evaluations: prefill + drafts + verifies + commits"),
    ("generated_tokens", "generated tokens", "answer tokens, up to the stop token"),
    ("tokens_per_forward", "tokens per forward (TPF)", "generated tokens ÷ forwards (higher is faster)"),
    ("edits", "edits (self-correction)", "decoded tokens the model replaced by a confident different draft (LLaDA2.x)"),
    ("edits_per_token", "edits per token", "edits ÷ generated tokens"),
    ("mean_acceptance_length", "mean acceptance length (vLLM)",
     "1 + accepted drafts per verify call: vLLM counts a bonus token per call, which S2D2 never makes"),
    ("tokens_per_verify", "tokens per verify (S2D2)",
     "tokens a verify step really commits: its accepted drafts + the resampled one"),
    ("draft_acceptance_rate", "draft acceptance rate (vLLM)", "accepted drafts ÷ drafts sent to the verifier"),
    ("num_drafts", "verify calls (vLLM num_drafts)", "steps that ran the verifier"),
    ("verify_rate", "verify rate", "verify steps ÷ steps where the policy decided"),
    ("steps_per_block", "steps per block", "draft steps per block (diffusion denoising steps)"),
    ("estimator_mae", "estimator MAE |K̂ − K|", "how far the predicted accepted length was from the real one"),
    ("query_tokens", "query tokens", "tokens fed through the model (a 2L verify feeds 2B)"),
    ("wall_seconds", "wall time (s)", "time the recorded run took on its machine"),
    ("finish_reason", "finish reason", "stop token, length, cancelled (Stop) or time limit"),
]
METRIC_LABELS = [(key, label) for key, label, _ in METRICS]
OPTIONAL = {"tokens_per_verify", "num_drafts", "steps_per_block", "estimator_mae", "finish_reason"}
EDITING_ONLY = {"edits", "edits_per_token"}  # shown for traces of the editing loop (LLaDA2.x)
METRIC_HEADERS = ["metric", "value", "what it means"]


def metrics_of(trace: Trace) -> dict[str, Any]:
    try:
        return trace_metrics(trace)
    except (ImportError, AttributeError, NotImplementedError):
        return basic_metrics(trace)


def metrics_table(trace: Trace) -> list[list[str]]:
    """Rows [metric, value, what it means] for a gr.Dataframe; NFE by kind listed after the main rows."""
    m = metrics_of(trace)
    editing = trace.header.config.get("loop") == "editing"
    rows = []
    for key, label, meaning in METRICS:
        if (key in OPTIONAL and key not in m) or (key in EDITING_ONLY and not editing):
            continue
        rows.append([label, show_value(m.get(key)), meaning])
    for kind, count in sorted((m.get("nfe_by_kind") or {}).items()):
        rows.append([f"forwards: {kind}", show_value(count), "forwards of this kind"])
    return rows


def trace_title(trace: Trace) -> str:
    h = trace.header
    cfg = h.config
    method = md_text(cfg.get("method", "?"), 20)
    policy = md_text(cfg.get("policy", ""), 40) if method == "s2d2" else ""
    block = md_text(cfg.get("block_length"), 10)
    if cfg.get("loop") == "editing":
        tau = cfg.get("editing_threshold")
        block += f" · editing {'τ_edit=' + md_text(tau, 10) if tau is not None else 'off'}"
    return (f"**{md_text(h.model.name, 80)}** · {method}{' / ' + policy if policy else ''} · B={block} · "
            f"seed {h.seed} · {md_text(h.provenance, 20)} trace, {md_text(decoded_words(h), 120)} · "
            f"{plural(len(trace.steps), 'step')}, "
            f"{plural(len(trace.forwards), 'forward')}")
