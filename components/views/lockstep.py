"""Lockstep replay of two runs of one prompt and seed (S2D2 and its diffusion-alone partner), scrubbed together.

The runs are aligned by block (s2d2/compare.py): moment k is "aligned block b, step j of that block" for both runs; a
run with fewer steps in a block waits at its block end. Steps inside a block are not equivalent across the runs
(the sync rule is said on screen). The first output token where the runs part is ringed in both canvases once it is
committed, and the sentence under the canvases says what each run did at that moment. Pure functions of the traces.
"""
from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any, Optional

from s2d2.compare import PREFILL_BLOCK, compare_traces
from s2d2.trace import Trace

from components.views.canvas import legend_for, render_canvas, visible_text
from components.views.describe import plain_title
from s2d2.compare import first_difference
from components.views.trace_index import index_of

@dataclass(frozen=True)
class Moment:
    block: int  # answer block number (1 = the first aligned block with answer tokens); 0 = the start
    step: int  # step within the aligned block (1-based); 0 = the start
    at: dict[str, int]  # lane -> scrubber value of that lane's trace at this moment


def moments(traces: dict[str, Trace]) -> list[Moment]:
    """Moment 0 is the start; then every step of every aligned block, the longer run setting the pace."""
    comp = compare_traces(traces)
    blocks = [b for b in comp.blocks if b.index != PREFILL_BLOCK]
    first = blocks[0].index if blocks else 0
    out = [Moment(0, 0, {n: 0 for n in traces})]
    last = {n: 0 for n in traces}
    for b in blocks:
        width = max(len(lb.steps) for lb in b.lanes.values())
        for j in range(width):
            at = {}
            for name, lb in b.lanes.items():
                if lb.steps:
                    at[name] = lb.steps[min(j, len(lb.steps) - 1)] + 1
                else:
                    at[name] = last[name]
            out.append(Moment(b.index - first + 1, j + 1, at))
        last = dict(out[-1].at)
    return out


def parting_moment(traces: dict[str, Trace]) -> int:
    """The first moment at which both runs have written the position where they part (0 when they never part)."""
    part = parting(traces)
    if part is None:
        return 0
    for k, m in enumerate(moments(traces)):
        hits = [index_of(t).commit_of.get(part) for t in traces.values()]
        if all(h is not None and h[0] < m.at[n] for h, n in zip(hits, traces)):
            return k
    return 0


def parting(traces: dict[str, Trace]) -> Optional[int]:
    """Absolute position of the first output token where the runs differ (None when they write the same)."""
    a, b = (t.footer.output_ids if t.footer else t.replay() for t in traces.values())
    i = first_difference(list(a), list(b))
    return None if i is None else len(next(iter(traces.values())).header.prompt_ids) + i


def how_each_decides(traces: dict[str, Trace]) -> list[str]:
    """Each run's rule in plain words (describe.plain_title), with the τ_conf an S2D2 run's unverified steps use: the
    runs of a pair need not share it, and the text must not claim that only the verifier differs when they do not."""
    out = []
    for name, trace in traces.items():
        cfg = trace.header.config
        words = plain_title(cfg).rsplit(", block ", 1)[0]
        if cfg.get("method") == "s2d2" and cfg.get("remasking") == "low_confidence_dynamic":
            words += f"; its unverified steps commit drafts with p > {float(cfg.get('confidence_threshold')):g}"
        out.append(words if words.lower().startswith(name.lower()) else f"{name}: {words}")
    return out


def same_things(traces: dict[str, Trace]) -> str:
    (_, a), (_, b) = traces.items()
    same = ["model" if a.header.model.name == b.header.model.name else "",
            "question" if a.header.prompt_ids == b.header.prompt_ids else "",
            "seed" if a.header.seed == b.header.seed else "",
            "block size" if a.header.config.get("block_length") == b.header.config.get("block_length") else ""]
    return ", ".join(s for s in same if s)


def _what(trace: Trace, step: int) -> str:
    """What a run's step did, in a few words."""
    rec = index_of(trace).step_record(step)
    if rec is None:
        return "has not started"
    v = rec.verification
    if v is not None:
        extra = f" + ↻ {visible_text(v.resampled_text)}" if v.resampled is not None else ""
        return f"verified: {v.accepted_len} accepted{extra}"
    return f"committed {len(rec.commits)} without a verifier"


def lockstep_html(traces: dict[str, Trace], k: Any) -> str:
    """Both runs at moment `k` (clamped), side by side, the parting token ringed once it is committed."""
    ms = moments(traces)
    try:
        k = max(0, min(len(ms) - 1, int(round(float(k)))))
    except (TypeError, ValueError, OverflowError):
        k = 0
    m = ms[k]
    part = parting(traces)
    cols = []
    for name, trace in traces.items():
        step = m.at[name]
        done = part is not None and part in index_of(trace).commit_of and index_of(trace).commit_of[part][0] < step
        head = f"{name} — step {step} of {len(trace.steps)}: {_what(trace, step)}"
        cols.append(f'<div class="s2d2-lane" data-step="{step}"><h4>{html.escape(head)}</h4>'
                    f"{render_canvas(trace, step, highlight=part if done else None)}</div>")
    where = "the start" if m.block == 0 else f"step {m.step} within answer block {m.block}"
    note = (f"Moment {k} of {len(ms) - 1}: {where}. The runs are aligned by block: both show the same block, and a "
            "run with fewer steps there waits at its block end (steps inside a block are not equivalent).")
    lanes = "".join(cols)  # keyed under both lanes: what either draws (the red ring is the parting line's)
    return (f'<div class="s2d2-lockstep" data-moment="{k}"><p>{html.escape(note)}</p>'
            f'<div class="s2d2-lanes">{lanes}</div>{legend_for(lanes)}'
            f'<p>{html.escape(parting_line(traces, m))}</p></div>')


def parting_line(traces: dict[str, Trace], m: Moment) -> str:
    """Where the runs part, once both have committed that position by moment `m`."""
    part = parting(traces)
    if part is None:
        return "The two runs write the same answer."
    texts = []
    for name, trace in traces.items():
        hit = index_of(trace).commit_of.get(part)
        if hit is None or hit[0] >= m.at[name]:
            return f"They part at position {part}; ringed once both have written it."
        texts.append(f"{name} wrote {visible_text(hit[1].text)!r} ({hit[1].how}, step {hit[0] + 1})")
    return f"They part at position {part} (ringed): " + "; ".join(texts) + "."
