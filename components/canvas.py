"""The token canvas: every position of the sequence at a step, as escaped HTML for gr.HTML.

Each token carries a state class, a glyph (state is never colour alone) and a native tooltip (`title`) with
token, p, q, ratio, draw, entropy and the top candidates. All token text is escaped; control and bidi characters
are shown as visible escapes.
"""
from __future__ import annotations

import html
import unicodedata
from typing import Optional

from s2d2.trace import Trace

from .trace_index import MASK_TEXT, TraceIndex, clamp_step, fmt, index_of

# state -> (glyph, label shown in the legend)
STATES: dict[str, tuple[str, str]] = {
    "prompt": ("", "prompt"),
    "masked": (MASK_TEXT, "masked"),
    "drafted": ("?", "drafted now (not committed)"),
    "accepted": ("✓", "accepted by verification"),
    "resampled": ("↻", "resampled at first rejection"),
    "threshold": ("▲", "confident diffusion pick (p > τ)"),
    "fallback": ("•", "fallback diffusion pick"),
    "hiconf_extra": ("+", "high-confidence extra"),
    "ratio_extra": ("+", "ratio extra (r ≥ thr)"),
    "ar": ("→", "autoregressive"),
    "ar_seed": ("◆", "AR seed of the block"),
    "edited": ("✎", "edited (self-correction): old token struck through"),
}
MAX_PROMPT_SHOWN = 48


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


def _attr(text: str) -> str:
    return html.escape(text, quote=True)


def position_state(idx: TraceIndex, step: int, pos: int) -> tuple[str, bool]:
    """(state, committed in the current step) of `pos` after `step` steps."""
    if pos < len(idx.trace.header.prompt_ids):
        return "prompt", False
    hit = idx.commit_of.get(pos)
    if hit is not None and hit[0] < step:
        edits = idx.edits_before(pos, step)
        if edits:  # a decoded token replaced later (LLaDA2.x editing)
            return "edited", edits[-1][0] == step - 1
        return hit[1].how, hit[0] == step - 1
    current = idx.step_record(step)
    if current is not None and idx.draft(current, pos) is not None:
        return "drafted", False
    return "masked", False


def tooltip(idx: TraceIndex, step: int, pos: int, full: bool = True) -> str:
    """Plain-text details for one position (escaped later, as an attribute); `full=False`: token and how only."""
    trace = idx.trace
    lines = [f"position {pos}"]
    block = idx.block_of_position(pos)
    if block is not None:
        lines[0] += f" · block {block.index}"
    state, _ = position_state(idx, step, pos)
    if state == "prompt":
        tokens = trace.header.prompt_tokens
        lines.append(f"prompt token {visible_text(tokens[pos] if pos < len(tokens) else '')}")
        return "\n".join(lines)
    hit = idx.commit_of.get(pos)
    shown_step = None
    if hit is not None and hit[0] < step:
        s_idx, commit = hit
        shown_step = trace.steps[s_idx]
        label = STATES.get(commit.how, ("", commit.how))[1]
        lines.append(f"token '{visible_text(commit.text)}' (id {commit.token}) — {label}")
        lines.append(f"committed at step {s_idx + 1} (block {shown_step.block}, step {shown_step.step + 1} of block)")
        for e_idx, e in idx.edits_before(pos, step):
            lines.append(f"edited at step {e_idx + 1}: '{visible_text(e.old_text)}' → '{visible_text(e.new_text)}' "
                         f"(p={fmt(e.p)} > τ_edit)")
    else:
        shown_step = idx.step_record(step)
        lines.append("masked")
    if shown_step is None:
        return "\n".join(lines)
    d = idx.draft(shown_step, pos)
    row = idx.verify_row(shown_step, pos)
    if not full:  # compact form outside the current block: the numbers, no candidate lists
        nums = f"p={fmt(d.p)} H={fmt(d.entropy)}" if d is not None else ""
        if row is not None:
            nums += f" q={fmt(row.q)} r={fmt(row.ratio)} u={fmt(row.u)}"
        return "\n".join(lines + ([nums.strip()] if nums else []))
    if d is not None:
        lines.append(f"draft '{visible_text(d.text)}' p={fmt(d.p)} entropy={fmt(d.entropy)} margin={fmt(d.margin)}")
        if d.top:
            lines.append("top p: " + ", ".join(f"'{visible_text(c.text, 16)}' {c.prob:.2f}" for c in d.top[:5]))
    if row is not None:
        v = shown_step.verification
        first = v.first_reject if v is not None else None
        after = first is not None and v is not None and v.positions.index(row) > first
        verdict = "discarded (after the first rejection)" if after else ("accepted" if row.accepted else "rejected")
        lines.append(f"verify: q={fmt(row.q)} r={fmt(row.ratio)} u={fmt(row.u)} -> {verdict}")
        lines.append(f"argmax q '{visible_text(row.argmax_q_text)}' {row.argmax_q_prob:.2f}")
        if row.top_q:
            lines.append("top q: " + ", ".join(f"'{visible_text(c.text, 16)}' {c.prob:.2f}" for c in row.top_q[:5]))
    return "\n".join(lines)


def _token_html(idx: TraceIndex, step: int, pos: int, ids: list[int], full: bool = True) -> str:
    state, new = position_state(idx, step, pos)
    glyph, _ = STATES.get(state, ("", state))
    trace = idx.trace
    if state == "prompt":
        tokens = trace.header.prompt_tokens
        text = tokens[pos] if pos < len(tokens) else f"#{ids[pos]}"  # skeleton traces store no strings
    elif state == "masked":
        text = ""
    elif state == "drafted":
        d = idx.draft(idx.step_record(step), pos)  # type: ignore[arg-type]
        text = d.text if d else ""
    elif state == "edited":
        edit = idx.edits_before(pos, step)[-1][1]
        text = edit.new_text or f"#{edit.new}"
    else:
        commit = idx.commit_of[pos][1]
        text = commit.text or f"#{commit.token}"
    classes = f"tok st-{state}" + (" new" if new else "")
    body = html.escape(visible_text(text)) if text else ""
    if state == "edited":  # old → new: the replaced token struck through
        old = idx.edits_before(pos, step)[-1][1]
        body = f"<s>{html.escape(visible_text(old.old_text or f'#{old.old}'))}</s> " + body
    if state == "resampled" and new:
        row = idx.verify_row(trace.steps[step - 1], pos)
        if row is not None:
            body = f"<s>{html.escape(visible_text(row.draft_text))}</s> " + body
    glyph_html = f'<span class="g" aria-hidden="true">{html.escape(glyph)}</span>' if glyph else ""
    label = STATES.get(state, ("", state))[1]
    br = "<br>" if text.endswith("\n") and state != "masked" else ""
    return (f'<span class="{classes}" data-pos="{pos}" title="{_attr(tooltip(idx, step, pos, full))}" '
            f'aria-label="{_attr(label)}">{glyph_html}{body}</span>{br}')


def current_block_span(idx: TraceIndex, step: int) -> Optional[tuple[int, int]]:
    """[start, end) of the block the scrubber is in (the block of the current step, or the next one)."""
    rec = idx.step_record(step)
    if rec is None:
        rec = idx.trace.steps[0] if idx.trace.steps else None
    if rec is None:
        return None
    block = idx.block_of_step[rec.index]
    return (block.start, block.start + block.length) if block else None


def render_canvas(trace: Trace, step: int, show_future: bool = False) -> str:
    """HTML of the whole sequence after `step` steps, the current block outlined, later blocks collapsed."""
    idx = index_of(trace)
    step = clamp_step(trace, step)
    ids = trace.canvas_at(step)
    P = len(trace.header.prompt_ids)
    cur = current_block_span(idx, step)
    end = len(ids) if show_future or cur is None else cur[1]
    parts = []
    first = max(0, P - MAX_PROMPT_SHOWN)
    if first:
        parts.append(f'<span class="more">… {first} earlier prompt tokens</span> ')
    pos = first
    while pos < end:
        if cur and pos == cur[0]:
            inner = "".join(_token_html(idx, step, p, ids) for p in range(cur[0], min(cur[1], end)))
            parts.append(f'<span class="blk cur" aria-label="current block">{inner}</span>')
            pos = cur[1]
            continue
        block = idx.block_of_position(pos)
        if pos >= P and block is not None and block.start == pos:
            parts.append('<span class="sep" aria-hidden="true">│</span>')
        parts.append(_token_html(idx, step, pos, ids, full=False))
        pos += 1
    if not trace.detailed:
        parts.insert(0, '<p class="more">Skeleton trace: recorded without token strings, drafts or verification '
                        'rows, so tokens show as #id and hover details are limited.</p>')
    hidden = len(ids) - end
    if hidden > 0:
        parts.append(f' <span class="more">… {hidden} positions in later blocks</span>')
    return f'<div class="s2d2-canvas" role="group" aria-label="token canvas">{"".join(parts)}</div>'


def legend_html() -> str:
    items = "".join(
        f'<span class="tok st-{k}"><span class="g" aria-hidden="true">{html.escape(g)}</span>'
        f'{html.escape(label)}</span>'
        for k, (g, label) in STATES.items() if k not in ("ratio_extra",))
    return f'<div class="s2d2-legend">{items}<span class="tok new">bold underline = committed this step</span></div>'


CANVAS_CSS = """
.s2d2-canvas{font-family:ui-monospace,monospace;line-height:2.1;white-space:pre-wrap;word-break:break-word;}
.s2d2-canvas .tok,.s2d2-legend .tok{padding:1px 3px;margin:0 1px;border-radius:3px;color:#111;cursor:help;}
.s2d2-canvas .g,.s2d2-legend .g{font-size:0.75em;margin-right:2px;opacity:.85}
.s2d2-canvas .blk.cur{outline:2px solid #4f46e5;outline-offset:2px;border-radius:4px;padding:2px 0}
.s2d2-canvas .sep{color:#94a3b8;margin:0 2px}
.s2d2-canvas .more{color:#64748b;font-style:italic}
.s2d2-canvas .new,.s2d2-legend .new{font-weight:700;text-decoration:underline 2px;}
.st-prompt{background:#e5e7eb}
.st-masked{background:#f3f4f6;color:#9ca3af!important}
.st-drafted{background:#fef9c3;font-style:italic;text-decoration:underline dashed}
.st-accepted{background:#bbf7d0}
.st-resampled{background:#fed7aa}
.st-threshold{background:#bfdbfe}
.st-fallback{background:#dbeafe;text-decoration:underline dotted}
.st-hiconf_extra,.st-ratio_extra{background:#99f6e4}
.st-ar{background:#e9d5ff}
.st-ar_seed{background:#fff;outline:2px solid #111}
.st-edited{background:#d8b4fe;outline:1px dashed #7e22ce}
.st-edited s{color:#6b21a8;opacity:.8}
.s2d2-legend{display:flex;flex-wrap:wrap;gap:6px;font-size:0.85em;margin-top:6px}
"""


def render_live(commits: list[list], prompt: str = "") -> str:
    """Streaming preview during a run: the committed tokens so far ([position, text, how] rows), by position."""
    rows = sorted((int(p), str(t), str(h)) for p, t, h in commits)
    parts = []
    for pos, text, how in rows:
        glyph = STATES.get(how, ("", how))[0]
        g = f'<span class="g" aria-hidden="true">{html.escape(glyph)}</span>' if glyph else ""
        label = STATES.get(how, ("", how))[1]
        parts.append(f'<span class="tok st-{html.escape(how)}" data-pos="{pos}" aria-label="{_attr(label)}" '
                     f'title="position {pos}: {_attr(label)}">{g}{html.escape(visible_text(text))}</span>')
    head = f'<span class="tok st-prompt">{html.escape(visible_text(prompt, 200))}</span> ' if prompt else ""
    return f'<div class="s2d2-canvas" role="group" aria-label="live output">{head}{"".join(parts)}</div>'
