"""The guided tour over one recorded run: draft → span and routing → verify with the same model → accept / reject →
residual resample → skipped verification → (self-correction, for a run that edits) → the whole run.

`tour_stops` is pure: it picks the step that illustrates each idea (the tour centres on the first step whose
verifier rejected a draft and resampled it) and writes each text from that step's recorded numbers, so the words
and the pictures always describe the same moment. Stops a trace cannot illustrate are left out and the rest are
numbered by position. `build_learn_tab` lays the stops out as a gr.Walkthrough.
"""
from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any, Callable, Optional

import gradio as gr

from s2d2.trace import StepRecord, Trace

from .canvas import legend_html, render_canvas, visible_text
from .describe import decision_line
from .figures import routing_figure
from .mask_view import mask_figure
from .pipeline_view import is_pipeline, lifecycle_figure, lifecycles
from .story import Story
from .strip import render_strip
from .trace_index import fmt, index_of
from .ui import PRIVATE, Ctx

HOVER = '<span class="on-hover">hover over</span><span class="on-touch">tap</span>'
PICTURES = ("canvas_draft", "canvas", "canvas_edit", "routing", "mask", "strip", "pair", "lifecycle")
SHORT = {"draft": "Draft", "route": "Route", "verify": "Verify", "reject": "Accept / reject", "resample": "Resample",
         "skip": "Skip", "edit": "Self-correct", "pipeline": "Pipeline", "run": "Whole run"}


@dataclass(frozen=True)
class Stop:
    key: str  # draft | route | verify | reject | resample | skip | edit | run
    title: str
    text: str  # Markdown (may hold the hover/tap spans)
    step: int  # scrubber value the stop shows (state after this many steps)
    pictures: tuple[str, ...]  # what is drawn under the text, in order (PICTURES)

    @property
    def label(self) -> str:
        """The short name under the walkthrough's numbered circle."""
        return SHORT.get(self.key, self.title)


def _first(trace: Trace, pred: Callable[[StepRecord], bool]) -> Optional[StepRecord]:
    return next((s for s in trace.steps if pred(s)), None)


def _code(text: str) -> str:
    return "`" + visible_text(text, 16).replace("`", "ˋ") + "`"


def focus_step(trace: Trace) -> Optional[StepRecord]:
    """The step the tour is about: the first verifier rejection with a resample, else the first verify, else the
    first step that drafts."""
    return (_first(trace, lambda s: s.verification is not None and s.verification.first_reject is not None
                   and s.verification.resampled is not None)
            or _first(trace, lambda s: s.verification is not None)
            or _first(trace, lambda s: bool(s.drafts)))


def tour_stops(trace: Trace, story: Optional[Story] = None, baseline: Optional[Trace] = None) -> list[Stop]:
    """The tour for this trace (with its diffusion-alone partner and headline when there is one)."""
    f = focus_step(trace)
    if f is None:
        return [_whole_run(trace, story, baseline)]
    n = f.index + 1
    idx = index_of(trace)
    v = f.verification
    rej = v.positions[v.first_reject] if v is not None and v.first_reject is not None else None
    block = idx.answer_block(f.block)
    watch = (f" Watch position {rej.position}: the draft there is {_code(rej.draft_text)} with p = {fmt(rej.p)}, a "
             "confident guess." if rej is not None else "")
    stops = [Stop("draft", "Draft", (
        f"At step {n} (answer block {block}) the model fills **every masked position of the block at once**: one "
        f"*draft* forward in diffusion mode. The {len(f.drafts)} drafts (italic, **?**) are proposals, nothing is "
        f"committed yet. Each comes with its draft probability **p**; {HOVER} a token to see it.{watch}"),
        n, ("canvas_draft",))]
    if f.decision is not None and f.policy_inputs is not None:
        pi = f.policy_inputs
        stops.append(Stop("route", "Span and routing", (
            f"S2D2 looks at the **first run of consecutive masks** (the span: {pi.span_len} positions here) and "
            f"predicts how many drafts a verifier would accept, **K̂ = Σₖ Πᵢ≤ₖ αᵢ** with αᵢ = exp(−entropy): "
            f"K̂ = {fmt(pi.k_hat, 2)}. The routing policy turns that into a score and decides whether the extra "
            f"verifier forward pays: **{html.escape(decision_line(f.decision))}**. The routing plot shows that "
            f"decision at step {n} (the vertical line; the dashed red line is the threshold). *What to try:* in Run, "
            "raise the score threshold and watch verify steps disappear from this plot."), n, ("routing",)))
    stops += _verification_stops(f, n)
    stops += [s for s in (_skip_stop(trace), _edit_stop(trace), pipeline_stop(trace)) if s is not None]
    stops.append(_whole_run(trace, story, baseline))
    return stops


def _verification_stops(f: StepRecord, n: int) -> list[Stop]:
    """Verify, then accept/reject and residual resampling when the focus step has a rejection."""
    stops: list[Stop] = []
    v = f.verification
    rej = v.positions[v.first_reject] if v is not None and v.first_reject is not None else None
    if v is not None:
        where = (f" At position {rej.position}: p = {fmt(rej.p)} but q = {fmt(rej.q, 5)}: the verifier finds "
                 f"{_code(rej.draft_text)} very unlikely there." if rej is not None else "")
        stops.append(Stop("verify", "Verify with the same model", (
            "On a verify step the **same weights run in autoregressive mode**. The 2L layout appends a copy of the "
            "block made of MASK tokens with the same positions; each MASK copy sees the cache, the drafts strictly "
            "before it and itself (the mask below: drafts | MASK copies). That is one left-to-right step for every "
            f"span position, all in one forward, and it gives **q**, the verifier's probability of each draft.{where}"),
            n, ("mask", "strip")))
    if rej is not None and v is not None:
        u = f"u = {fmt(rej.u)}" if rej.u is not None else "argmax q differs"
        stops.append(Stop("reject", "Accept or reject", (
            f"Each draft passes if a uniform draw u falls below **r = min(1, q/p)** (the black tick on the r bar). "
            f"Here the first {v.accepted_len} drafts pass; the draft {_code(rej.draft_text)} has "
            f"r = {fmt(rej.ratio, 5)} and {u}: **rejected** (the orange column). Acceptance stops at the first "
            "rejection: the drafts after it are discarded even if they would pass."), n, ("strip",)))
    if rej is not None and v is not None and v.resampled is not None:
        source = "q (the residual was empty)" if v.fallback_to_q else "the residual (q − p)+, renormalised"
        stops.append(Stop("resample", "Residual resampling", (
            f"The rejected position is not wasted: a new token is drawn from {source}: {_code(v.resampled_text)} "
            f"(↻, the rejected {_code(rej.draft_text)} struck through). Step {n} commits {v.accepted_len} accepted "
            f"drafts + 1 resampled token for 2 forwards (draft + verify). With a sampled draft this makes every "
            "verified token an exact sample of the verifier."), n, ("canvas", "strip")))
    return stops


def _skip_stop(trace: Trace) -> Optional[Stop]:
    skip = _first(trace, lambda s: s.decision is not None and not s.decision.verify)
    if skip is None:
        return None
    k = skip.index + 1
    return Stop("skip", "Skipping verification", (
        f"At step {k} the policy said **skip** ({html.escape(decision_line(skip.decision))}): a plain "
        "diffusion step. "
        f"Confident drafts (p > τ, ▲) or the single most confident one (•) are committed without a verifier "
        f"forward: {len(skip.commits)} token(s) for 1 forward. Cheap, but not checked."), k, ("routing", "canvas"))


def _edit_stop(trace: Trace) -> Optional[Stop]:
    """Self-correction (LLaDA2.x editing loop), for a trace that has edits: the step of the first edit, its canvas
    ringing the edited position (old token struck through)."""
    rec = _first(trace, lambda s: bool(s.edits))
    if rec is None:
        return None
    k, e = rec.index + 1, rec.edits[0]
    total = sum(len(s.edits) for s in trace.steps)
    more = f" This run edits {total} tokens in all." if total > 1 else ""
    tau = trace.header.config.get("editing_threshold")
    bound = f" > τ_edit = {tau:g}" if isinstance(tau, (int, float)) else ""
    return Stop("edit", "Self-correction", (
        f"A LLaDA2.1-style model re-reads its whole block at every step. At step {k} it predicts "
        f"{_code(e.new_text)} at position {e.position}, which it had already decoded as {_code(e.old_text)}, with "
        f"p = {fmt(e.p)}{bound}: it **edits** the token (✎, purple, the old one struck through).{more} Edits are "
        "decided by the draft before any verification: the verifier judges only drafts of masked positions, and "
        "reads the edited block as context."), k, ("canvas_edit",))


def pipeline_stop(trace: Trace) -> Optional[Stop]:
    """D2F's pipeline, for a trace decoded with loop="pipeline": the first step with the most blocks in flight,
    its canvas (each block outlined with its state) and the blocks' lifecycle over the run."""
    if not is_pipeline(trace) or not trace.steps:
        return None
    rec = max(trace.steps, key=lambda s: (len(s.in_flight), -s.index))
    if len(rec.in_flight) < 2:
        return None
    k, cfg, lives, first = rec.index + 1, trace.header.config, lifecycles(trace), trace.blocks[0].index
    newest = rec.in_flight[-1].block
    joined = lives[newest].added
    names = ", ".join(str(r.block - first + 1) for r in rec.in_flight)
    complete = sum(r.complete for r in rec.in_flight)
    return Stop("pipeline", "Blocks in flight", (
        f"This run decodes with D2F's **pipeline**: a block starts before the one before it is finished. At step {k} "
        f"blocks {names} are in flight, all drafted by one forward. Block {newest - first + 1} joined at step "
        f"{(joined or 0) + 1}, once the block before it was {fmt(cfg.get('block_add_threshold'), 2)} decoded. A "
        f"block counts as **complete** once its predecessor is {fmt(cfg.get('decoded_token_threshold'), 2)} decoded "
        f"({complete} of these {len(rec.in_flight)} are): it then decodes at least its most confident mask every "
        f"step; before that only drafts with p > {fmt(cfg.get('confidence_threshold'), 2)} (outlined dashed). A "
        f"finished block waits until every earlier block is finished; the next forward then caches it, so there is "
        f"no separate commit. Step {k} decoded {len(rec.commits)} tokens across those blocks for "
        f"{len(rec.forwards)} forward(s); the chart shows every block's life over the run."), k,
        ("canvas", "lifecycle"))


def _whole_run(trace: Trace, story: Optional[Story], baseline: Optional[Trace]) -> Stop:
    tokens = trace.footer.generated_length if trace.footer else 0
    text = f"The whole run: **{len(trace.forwards)} forwards for {tokens} tokens**. "
    if baseline is not None and story is not None:
        text += (f"{story.text} Below, both answers in full: same question, same seed, same block size. "
                 "The Compare tab runs any presets side by side; the Metrics tab sums a run up.")
        return Stop("run", "The whole run", text, len(trace.steps), ("pair",))
    text += ("The Metrics tab sums it up: forwards per block by kind, tokens per forward, the accepted-length "
             "histogram and per-position acceptance.")
    return Stop("run", "The whole run", text, len(trace.steps), ("canvas",))


def numbered(stops: list[Stop]) -> list[str]:
    """Stop headings numbered by position: "1 · Draft", "2 · Span and routing", … (the walkthrough's circles show
    the same numbers)."""
    return [f"{i + 1} · {s.title}" for i, s in enumerate(stops)]


def watched(trace: Trace, step: int) -> Optional[int]:
    """The position a stop's text points at: the first rejected draft of the step, if any."""
    rec = index_of(trace).step_record(step)
    v = rec.verification if rec is not None else None
    return v.positions[v.first_reject].position if v is not None and v.first_reject is not None else None


def picture(kind: str, trace: Trace, step: int, baseline: Optional[Trace] = None) -> Any:
    """The value drawn for one picture of a stop."""
    if kind == "canvas_draft":
        return render_canvas(trace, step, before_commit=True, highlight=watched(trace, step)) + legend_html(trace)
    if kind == "canvas":
        return render_canvas(trace, step, highlight=watched(trace, step)) + legend_html(trace)
    if kind == "canvas_edit":  # the step's first edit ringed
        rec = index_of(trace).step_record(step)
        at = rec.edits[0].position if rec is not None and rec.edits else None
        return render_canvas(trace, step, highlight=at) + legend_html(trace)
    if kind == "routing":
        return routing_figure(trace, step)
    if kind == "lifecycle":
        return lifecycle_figure(trace, step)
    if kind == "mask":
        return mask_figure(trace, step, "verify")
    if kind == "strip":
        return render_strip(trace, step)
    if kind == "pair":
        lanes = [("S2D2", trace)] + ([("Diffusion alone", baseline)] if baseline is not None else [])
        cols = "".join(f'<div class="s2d2-lane"><h4>{name}</h4>{render_canvas(t, len(t.steps), show_future=True)}'
                       "</div>" for name, t in lanes)
        return f'<div class="s2d2-lanes">{cols}</div>'
    raise ValueError(f"unknown picture {kind!r}")


def build_learn_tab(ctx: Ctx, trace: Optional[Trace], story: Optional[Story] = None,
                    baseline: Optional[Trace] = None) -> list[tuple[gr.Button, int]]:
    """Lay out the tour; returns (button, step) pairs for app.py to wire "Show in Replay"."""
    buttons: list[tuple[gr.Button, int]] = []
    if trace is None:
        gr.Markdown("## Learn S2D2\nNo example trace is available yet.")
        return buttons
    stops = tour_stops(trace, story, baseline)
    gr.Markdown(f"## Learn S2D2 in {len(stops)} steps\nA guided tour over the recorded example run that opens the "
                "app. Each step shows the moment its text describes; **Show in Replay** opens the full panel there.")
    with gr.Walkthrough(selected=0, elem_id="tour") as tour:
        for i, (stop, title) in enumerate(zip(stops, numbered(stops))):
            with gr.Step(stop.label, id=i, elem_classes=[f"tour-{stop.key}"]):
                # Not sanitised: the text holds the hover/tap spans; every trace string in it is escaped.
                gr.Markdown(f"### {title}\n{stop.text}", elem_classes=["tour-text"], sanitize_html=False)
                for kind in stop.pictures:
                    value = picture(kind, trace, stop.step, baseline)
                    if kind in ("routing", "mask", "lifecycle"):
                        gr.Plot(value, show_label=False, elem_classes=[f"tour-{kind}"])
                    else:
                        gr.HTML(value, elem_classes=[f"tour-{kind}"])
                with gr.Row():
                    back = gr.Button("◀ Back", size="sm", interactive=i > 0, elem_classes=["tour-back"])
                    show = gr.Button(f"Show step {stop.step} in Replay", size="sm", elem_classes=["tour-show"])
                    nxt = gr.Button("Next ▶", size="sm", variant="primary", interactive=i + 1 < len(stops),
                                    elem_classes=["tour-next"])
                back.click(lambda j=i - 1: gr.Walkthrough(selected=max(0, j)), None, tour, **PRIVATE)
                nxt.click(lambda j=i + 1: gr.Walkthrough(selected=j), None, tour, **PRIVATE)
                buttons.append((show, stop.step))
    ctx["tour"] = tour
    return buttons
