"""The guided tour: draft -> span -> route -> verify -> accept/reject -> residual -> skip, over one trace.

`tour_stops` is pure (which step of the trace illustrates each idea); `build_learn_tab` lays it out as a
gr.Walkthrough whose steps each show the canvas/strip at that step and a button that opens the Replay panel there.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import gradio as gr

from s2d2.trace import StepRecord, Trace

from .canvas import legend_html, render_canvas
from .strip import render_strip


@dataclass
class Stop:
    title: str
    text: str
    panel: str  # which Replay panel shows it
    step: int  # scrubber value (state after this many steps); 0 = start


def _first(trace: Trace, pred: Callable[[StepRecord], bool]) -> Optional[int]:
    return next((s.index + 1 for s in trace.steps if pred(s)), None)


def tour_stops(trace: Trace) -> list[Stop]:
    """The tour for this trace; ideas the trace does not illustrate are skipped."""
    stops: list[Stop] = [Stop(
        "1 · Draft", "The model fills **every masked position of the current block at once** (one *draft* forward, "
        "diffusion mode). Drafts are shown in italics with a `?`: they are proposals, not yet committed. Each has a "
        "draft probability **p** (hover a token to see p, entropy and the top candidates).",
        "token canvas", _first(trace, lambda s: bool(s.drafts)) or 1)]
    route = _first(trace, lambda s: s.decision is not None)
    if route:
        stops.append(Stop(
            "2 · Span and routing", "S2D2 looks at the **first run of consecutive masks** (the span) and estimates how "
            "many drafts a verifier would accept: **K̂ = Σₖ Πᵢ≤ₖ αᵢ** with αᵢ = exp(−entropy). The *routing policy* "
            "compares a score (e.g. s = K̂ − c) with a threshold, or a hysteresis band, and decides whether the extra "
            "verifier forward is worth it. *What to try:* raise the score threshold in Run and watch verify steps "
            "disappear from the routing panel.", "routing panel", route))
    ver = _first(trace, lambda s: s.verification is not None)
    if ver:
        stops.append(Stop(
            "3 · Verify with the same model", "On a verify step the **same model runs in AR mode**: for a block-"
            "aligned model the 2L layout appends a copy of all-MASK tokens with the same positions; each MASK copy "
            "sees the cache, the strictly earlier drafts and itself — exactly one left-to-right step, for every span "
            "position in one forward. That gives **q**, the verifier probability of each draft.",
            "attention mask + verification strip", ver))
    rej = _first(trace, lambda s: s.verification is not None and s.verification.first_reject is not None)
    if rej:
        stops.append(Stop(
            "4 · Accept or reject", "Each draft is accepted with probability **r = min(1, q/p)**: a uniform draw u "
            "(the black tick on the r bar) must fall below r. Acceptance stops at the **first rejection**: later "
            "drafts are discarded even if they would pass.", "verification strip", rej))
    res = _first(trace, lambda s: any(c.how == "resampled" for c in s.commits))
    if res:
        stops.append(Stop(
            "5 · Residual resampling", "The first rejected position is not wasted: a token is drawn from the "
            "**residual (q − p)+**, renormalised (↻ in the canvas). If the residual is empty it is drawn from q. With "
            "a sampled draft this makes every verified token an exact sample of the verifier.",
            "token canvas + verification strip", res))
    skip = _first(trace, lambda s: s.decision is not None and not s.decision.verify)
    if skip:
        stops.append(Stop(
            "6 · Skipping verification", "When the policy says *skip*, the step is a plain diffusion step: confident "
            "drafts (p > τ, ▲) or the single most confident one (•) are committed without a verifier forward. Cheap, "
            "but not checked.", "routing panel + token canvas", skip))
    edit = _first(trace, lambda s: bool(s.edits))
    if edit:
        stops.append(Stop(
            "6b · Self-correction (LLaDA2.1 editing)", "A LLaDA2.1-style model re-reads the whole block at every step. "
            "Where it now predicts a **different token for a position it already decoded**, with p > τ_edit, it "
            "*edits* it (✎, purple, the old token struck through). Edits are decided by the draft before any "
            "verification: the verifier judges only drafts of masked positions, and it reads the edited block as "
            "context.", "token canvas", edit))
    stops.append(Stop(
        "7 · The whole run", "The Metrics tab sums it up: forwards per block by kind, tokens per forward, the "
        "accepted-length histogram and per-position acceptance (vLLM names). *What to try:* record the same prompt "
        "with the `dynamic-baseline` preset and compare NFE.", "metrics", len(trace.steps)))
    return stops


def build_learn_tab(trace: Optional[Trace]) -> list[tuple[gr.Button, int]]:
    """Lay out the tour (with its own Back/Next navigation); returns (button, step) pairs for app.py to wire
    "Show in Replay" to the Replay tab."""
    buttons: list[tuple[gr.Button, int]] = []
    if trace is None:
        gr.Markdown("## Learn S2D2\nNo example trace is available yet.")
        return buttons
    stops = tour_stops(trace)
    gr.Markdown(f"## Learn S2D2 in {len(stops)} steps\nA guided tour over a recorded example run. Each step shows "
                "the token canvas at the moment that illustrates it; **Show in Replay** opens the full panel there.")
    with gr.Walkthrough(selected=0, elem_id="tour") as tour:
        for i, stop in enumerate(stops):
            with gr.Step(stop.title, id=i):
                gr.Markdown(stop.text + f"\n\n*Shown in:* **{stop.panel}** (step {stop.step}).")
                gr.HTML(render_canvas(trace, stop.step) + legend_html())
                if "strip" in stop.panel:
                    gr.HTML(render_strip(trace, stop.step))
                with gr.Row():
                    back = gr.Button("◀ Back", size="sm", interactive=i > 0, elem_classes=["tour-back"])
                    show = gr.Button("Show in Replay", size="sm", elem_classes=["tour-show"])
                    nxt = gr.Button("Next ▶", size="sm", variant="primary", interactive=i + 1 < len(stops),
                                    elem_classes=["tour-next"])
                back.click(lambda j=i - 1: gr.Walkthrough(selected=max(0, j)), None, tour, api_visibility="private")
                nxt.click(lambda j=i + 1: gr.Walkthrough(selected=j), None, tour, api_visibility="private")
                buttons.append((show, stop.step))
    return buttons
