"""Pipeline (D2F) traces in the views: which blocks were in flight at a step and each block's lifecycle (joined,
complete, finished, cached), read from the steps' `in_flight` rows and `events` alone (pure, no model).

The canvas outlines every block in flight with a tag naming its state (canvas.py); `lifecycle_figure` draws one
row per block over the steps — in flight, complete (its predecessor far enough along: it decodes a token every
step), finished and waiting for an earlier block, cached — with the tokens each step decoded in it, so several
blocks visibly overlap in time.
"""
from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Optional

import plotly.graph_objects as go

from s2d2.trace import Trace
from components.views.plural import plural

ACTIVE = "fully active"  # the trace's "complete" event (D2F's word), in words that do not read as "finished"
PHASES = (  # (name, colour, what it means)
    ("in flight", "#bfdbfe", "joined the pipeline: decodes only drafts above the threshold"),
    (ACTIVE, "#60a5fa", "its predecessor is far enough along: at least one token every step"),
    ("finished", "#cbd5e1", "every mask decoded; waits until every earlier block is finished"),
    ("cached", "#475569", "its keys and values are in the cache"),
)


@dataclass
class Lifecycle:
    """Step indices (0-based, into trace.steps) of a block's events; None when it never happened."""

    added: Optional[int] = None
    complete: Optional[int] = None
    finished: Optional[int] = None
    cached: Optional[int] = None


def is_pipeline(trace: Trace) -> bool:
    return trace.header.config.get("loop") == "pipeline"


def lifecycles(trace: Trace) -> dict[int, Lifecycle]:
    out: dict[int, Lifecycle] = {b.index: Lifecycle() for b in trace.blocks}
    for s in trace.steps:
        for e in s.events:
            life = out.setdefault(e.block, Lifecycle())
            if getattr(life, e.event) is None:
                setattr(life, e.event, s.index)
    return out


def status_at(life: Lifecycle, step: int) -> str:
    """A block's state after `step` steps (the scrubber's value): "waiting to join", "in flight", "fully active"
    (the trace's "complete"), "finished" or "cached"."""
    done = [name for name in ("cached", "finished", "complete", "added")
            if getattr(life, name) is not None and getattr(life, name) < step]
    if not done:
        return "waiting to join"
    return {"added": "in flight", "complete": ACTIVE}.get(done[0], done[0])


def in_flight_spans(trace: Trace, step: int) -> list[tuple[int, int, int]]:
    """(start, end, block) of every block the current step (steps[step - 1]) worked in."""
    if not 1 <= step <= len(trace.steps):
        return []
    starts = {b.index: (b.start, b.start + b.length) for b in trace.blocks}
    return [(*starts[r.block], r.block) for r in trace.steps[step - 1].in_flight if r.block in starts]


def block_tag(trace: Trace, block: int, step: int, lives: Optional[dict[int, Lifecycle]] = None) -> str:
    """The small label before a block on the canvas: "block 2 · joined at step 3 · fully active"."""
    life = (lives or lifecycles(trace)).get(block, Lifecycle())
    number = block - (trace.blocks[0].index if trace.blocks else 1) + 1
    parts = [f"block {number}"]
    if life.added is not None:
        parts.append(f"joined at step {life.added + 1}")
    state = status_at(life, step)
    if state == "cached":
        parts.append(f"cached at step {life.cached + 1}")  # type: ignore[operator]
    elif state != "in flight":
        parts.append(state)
    return f'<span class="blk-tag">{html.escape(" · ".join(parts))}</span>'


def _phase_bars(trace: Trace, lives: dict[int, Lifecycle]) -> dict[str, tuple[list, list, list]]:
    """Per phase: (block labels, bar starts, bar lengths) on the step axis (step j spans [j - 0.5, j + 0.5])."""
    last = len(trace.steps) + 0.5
    bars: dict[str, tuple[list, list, list]] = {name: ([], [], []) for name, _, _ in PHASES}
    for b in trace.blocks:
        life = lives.get(b.index, Lifecycle())
        if life.added is None:
            continue
        a = life.added + 1  # step numbers, 1-based like the scrubber
        f = life.finished + 1 if life.finished is not None else None
        c = life.complete + 1 if life.complete is not None and (f is None or life.complete + 1 <= f) else None
        k = life.cached + 1 if life.cached is not None else None
        busy_end = f + 0.5 if f is not None else last
        spans = [("in flight", a - 0.5, (c - 0.5) if c is not None else busy_end)]
        if c is not None:
            spans.append((ACTIVE, c - 0.5, busy_end))
        if f is not None:
            spans.append(("finished", f + 0.5, (k - 0.5) if k is not None else last))
        if k is not None:
            spans.append(("cached", k - 0.5, last))
        for name, lo, hi in spans:
            if hi > lo:
                labels, starts, lengths = bars[name]
                labels.append(_label(trace, b.index))
                starts.append(lo)
                lengths.append(hi - lo)
    return bars


def _label(trace: Trace, block: int) -> str:
    return f"block {block - (trace.blocks[0].index if trace.blocks else 1) + 1}"


ROW_PX = 44  # height of one block's row in the lifecycle chart


def lifecycle_figure(trace: Trace, step: int) -> go.Figure:
    """One row per block over the steps: its phases as bars, the tokens each step decoded in it as dots, and the
    current step as a line."""
    fig = go.Figure()
    # Rows tall enough that every block keeps its label and its dots stay inside its row on a phone; the legend
    # below the step axis gets its own room (on a phone its four entries stack).
    rows = len(trace.blocks)
    fig.update_layout(template="plotly_white", height=max(260, 150 + ROW_PX * rows),
                      margin=dict(l=70, r=20, t=60, b=110), barmode="overlay",
                      legend=dict(orientation="h", yref="container", y=0, yanchor="bottom"))
    if not is_pipeline(trace) or not trace.blocks:
        fig.update_layout(title=dict(text="Blocks in flight: only pipeline (D2F) runs have several", font=dict(size=13)))
        return fig
    lives = lifecycles(trace)
    for (name, colour, meaning), (labels, starts, lengths) in zip(PHASES, _phase_bars(trace, lives).values()):
        fig.add_trace(go.Bar(y=labels, base=starts, x=lengths, orientation="h", name=name, marker_color=colour,
                             hovertemplate=f"%{{y}}: {name} ({meaning})<extra></extra>"))
    xs, ys, sizes, texts = [], [], [], []
    for s in trace.steps:
        for r in s.in_flight:
            if r.decoded:
                xs.append(s.index + 1)
                ys.append(_label(trace, r.block))
                sizes.append(min(ROW_PX - 12, 6 + 3 * r.decoded))  # a dot never spills into the next row
                texts.append(f"step {s.index + 1}: {plural(r.decoded, 'token')} in {_label(trace, r.block)}"
                             + ("" if r.complete else f" (before it was {ACTIVE})"))
    fig.add_trace(go.Scatter(x=xs, y=ys, mode="markers", name="tokens decoded", text=texts,
                             marker=dict(size=sizes, color="#f97316", line=dict(color="#7c2d12", width=1)),
                             hovertemplate="%{text}<extra></extra>"))
    fig.add_vline(x=step, line=dict(color="#dc2626", width=2, dash="dot"))
    most = max((len(s.in_flight) for s in trace.steps), default=0)
    fig.update_layout(title=dict(text=f"Blocks in flight over the run (up to {most} at once)<br>dotted line: "
                                      f"step {step}", font=dict(size=13)))
    fig.update_yaxes(autorange="reversed", categoryorder="array", tickmode="array",
                     categoryarray=[_label(trace, b.index) for b in trace.blocks],
                     tickvals=[_label(trace, b.index) for b in trace.blocks])
    fig.update_xaxes(title="step", range=[0.5, len(trace.steps) + 1])
    return fig
