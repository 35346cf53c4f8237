"""What a position is at a step (prompt, masked, drafted, discarded, committed how, edited) and the p / q / r of the
token it shows: the facts the canvas, the detail box and the tour draw, with no HTML. Pure functions of a trace
index (components/views/trace_index.py)."""
from __future__ import annotations

import unicodedata
from typing import Optional

from s2d2.trace import StepRecord

from components.views.trace_index import MASK_TEXT, TraceIndex

# state -> (glyph, label shown in the legend)
STATES: dict[str, tuple[str, str]] = {
    "prompt": ("", "prompt"),
    "masked": (MASK_TEXT, "masked"),
    "drafted": ("?", "drafted now (not committed)"),
    "discarded": ("✂", "discarded: drafted after the first rejection"),
    "accepted": ("✓", "accepted by verification"),
    "resampled": ("↻", "resampled at first rejection"),
    "threshold": ("▲", "confident diffusion pick (p > τ_conf)"),
    "fallback": ("•", "fallback diffusion pick"),
    "hiconf_extra": ("+", "high-confidence extra"),
    "ratio_extra": ("+", "ratio extra (r ≥ thr)"),
    "ar": ("→", "autoregressive"),
    "ar_seed": ("◆", "AR seed of the block"),
    "edited": ("✎", "edited (self-correction): old token struck through"),
}
AFTER_END = "after the end: generated after the stop token, not part of the answer"
PAST_LENGTH = "past the generation length: decoded with its whole block, not part of the answer"

def visible_text(text: str, limit: int = 40) -> str:
    """Escape-ready display form: newlines as ⏎, tabs as ⇥, other control/format chars as \\uXXXX."""
    out = []
    for ch in text[:limit]:
        if ch == "\n":
            out.append("⏎")
        elif ch == "\t":
            out.append("⇥")
        elif unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp", "Co", "Cs"):
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    if len(text) > limit:
        out.append("…")
    shown = "".join(out)
    if shown and not shown.strip():  # a whitespace-only token stays visible
        shown = shown.replace(" ", "␣")
    return shown or "∅"



def position_state(idx: TraceIndex, step: int, pos: int, before_commit: bool = False) -> tuple[str, bool]:
    """(state, committed in the current step) of `pos` after `step` steps; with `before_commit`, at the moment
    step `step` has drafted and not yet committed."""
    if pos < len(idx.trace.header.prompt_ids):
        return "prompt", False
    done = done_steps(step, before_commit)
    hit = idx.commit_of.get(pos)
    if hit is not None and hit[0] < done:
        edits = idx.edits_before(pos, done)
        if edits:  # a decoded token replaced later (LLaDA2.x editing)
            return "edited", edits[-1][0] == done - 1 and not before_commit
        return hit[1].how, hit[0] == done - 1 and not before_commit
    current = idx.step_record(step)
    if current is not None and not before_commit and discarded(current, pos):
        return "discarded", False
    if current is not None and idx.draft(current, pos) is not None:
        return "drafted", False
    return "masked", False


def discarded(step: StepRecord, pos: int) -> bool:
    """True when `pos` was verified after the step's first rejection: its draft was checked in the context of the
    rejected token, which is gone, so it is thrown away whatever its own test said."""
    v = step.verification
    if v is None or v.first_reject is None:
        return False
    return any(r.position == pos for r in v.positions[v.first_reject + 1:])


def done_steps(step: int, before_commit: bool) -> int:
    """Steps whose updates are on screen: `step`, or one fewer at the moment before a step commits."""
    return step - 1 if before_commit and step > 0 else step


def shade_value(idx: TraceIndex, step: int, pos: int, which: str) -> Optional[float]:
    """p, q or r of the token a position shows at `step`: from the step that committed it, else the current step.
    A committed token that is not the draft (resampled, or a fallback pick at a rejected position) takes its p and
    q from the recorded candidate lists (None when it is not among them) and has no r: it was never tested. An
    edited token shows its edit's p and no q or r (edits are never verified, docs/editing.md rule V1)."""
    edits = idx.edits_before(pos, step)
    if edits:
        return edits[-1][1].p if which == "p" else None
    hit = idx.commit_of.get(pos)
    committed = hit is not None and hit[0] < step
    rec: Optional[StepRecord] = idx.trace.steps[hit[0]] if committed else idx.step_record(step)  # type: ignore[index]
    if rec is None:
        return None
    d, row = idx.draft(rec, pos), idx.verify_row(rec, pos)
    token = hit[1].token if committed else (d.token if d is not None else None)  # type: ignore[index]
    if which == "p":
        return None if d is None else (d.p if d.token == token else prob_of(token, d.top))
    if row is None:
        return None
    if row.draft == token:
        return row.q if which == "q" else row.ratio
    return prob_of(token, row.top_q) if which == "q" else None


def prob_of(token: Optional[int], candidates: list) -> Optional[float]:
    return next((c.prob for c in candidates if c.token == token), None)
