"""The token canvas: every position of the sequence at a step, as escaped HTML for gr.HTML.

Each token carries a state class, a glyph (state is never colour alone) and a native tooltip (`title`) with
token, p, q, ratio, draw, entropy and the top candidates. All token text is escaped; control and bidi characters
are shown as visible escapes. Positions after the stop token are greyed as "after the end" (the model keeps
filling its block, but those tokens are not part of the answer). `color_by` shades tokens by p, q or r instead of
their state; `before_commit` shows a step at the moment its drafts exist and nothing is committed yet.
"""
from __future__ import annotations

import html
import re
from typing import Collection, Optional

from s2d2.trace import StepRecord, Trace

from components.views.focus import focus_attr
from components.views.pipeline_blocks import block_tag, in_flight_spans, is_pipeline, lifecycles
from components.views.token_detail import tooltip
from components.views.token_state import (AFTER_END, PAST_LENGTH, STATES, discarded, done_steps, position_state,
                                          shade_value, visible_text)
from components.views.trace_index import TraceIndex, clamp_step, index_of
from components.views.plural import plural

MAX_PROMPT_SHOWN = 48
COLOR_BY = ("state", "p", "q", "r")  # the canvas colour switch
# position_state, tooltip and visible_text are re-exported: the canvas is where the views look for them.
__all__ = ["AFTER_END", "COLOR_BY", "STATES", "CANVAS_CSS", "index_of", "legend_html", "live_rows", "position_state",
           "render_canvas", "render_live", "shade_value", "tooltip", "visible_text"]


def _attr(text: str) -> str:
    return html.escape(text, quote=True)


def _token_html(idx: TraceIndex, step: int, pos: int, ids: list[int], full: bool = True, color_by: str = "state",
                before_commit: bool = False) -> str:
    state, new = position_state(idx, step, pos, before_commit)
    glyph, label = STATES.get(state, ("", state))
    trace = idx.trace
    if state == "prompt":
        tokens = trace.header.prompt_tokens
        text = tokens[pos] if pos < len(tokens) else f"#{ids[pos]}"  # skeleton traces store no strings
    elif state == "masked":
        text = ""
    elif state == "drafted":
        d = idx.draft(idx.step_record(step), pos)  # type: ignore[arg-type]
        text = d.text if d else ""
    elif state == "discarded":
        row = idx.verify_row(idx.step_record(step), pos)  # type: ignore[arg-type]
        text = row.draft_text if row else ""
    elif state == "edited":
        edit = idx.edits_before(pos, done_steps(step, before_commit))[-1][1]
        text = edit.new_text or f"#{edit.new}"
    else:
        commit = idx.commit_of[pos][1]
        text = commit.text or f"#{commit.token}"
    classes = f"tok st-{state}" + (" new" if new else "")
    style = ""
    if state not in ("prompt", "masked"):
        if idx.after_end(done_steps(step, before_commit), pos):
            classes += " after-end"
            label = AFTER_END
        elif pos == idx.end_position and state not in ("drafted", "discarded"):
            classes += " end-tok"
            label += " · the stop token: the answer ends here"
        if color_by in ("p", "q", "r"):
            value = shade_value(idx, step, pos, color_by)
            style = _shade_style(value)
            if value is not None and "after-end" not in classes:  # the ink is a class: a state's own grey ink (discarded) must yield to it
                classes += " shade-dark" if shade_is_dark(value) else " shade-light"
    body = html.escape(visible_text(text)) if text else ""
    if state == "edited":  # old → new: the replaced token struck through
        body = f"<s>{html.escape(visible_text(edit.old_text or f'#{edit.old}'))}</s> " + body
    if state == "resampled" and new:
        row = idx.verify_row(trace.steps[step - 1], pos)
        if row is not None:
            body = f"<s>{html.escape(visible_text(row.draft_text))}</s> " + body
    glyph_html = f'<span class="g" aria-hidden="true">{html.escape(glyph)}</span>' if glyph else ""
    br = "<br>" if text.endswith("\n") and state != "masked" else ""
    tip = tooltip(idx, step, pos, full, before_commit)
    return (f'<span class="{classes}"{style} data-pos="{pos}" title="{_attr(tip)}" '
            f'aria-label="{_attr(label)}">{glyph_html}{body}</span>{br}')


def _shade_style(value: Optional[float]) -> str:
    """Inline background for the p / q / r colouring: white (0) to indigo (1); hatched grey when there is none."""
    if value is None:
        return ' style="background:repeating-linear-gradient(45deg,#f1f5f9 0 3px,#e2e8f0 3px 6px)"'
    return f' style="background:rgba(79,70,229,{_alpha(value):.2f})"'


def _alpha(value: float) -> float:
    return round(0.08 + 0.87 * max(0.0, min(1.0, float(value))), 2)


def shade_is_dark(value: float) -> bool:
    """White ink or black on the shade of `value` (indigo at its alpha over the white page): whichever contrasts
    more (WCAG relative luminance), so no token falls below 4.5 : 1 (the two meet at about 4.6)."""
    a = _alpha(value)
    lin = [((a * c + (1 - a) * 255) / 255) for c in (79, 70, 229)]
    lum = sum(w * (v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4)
              for w, v in zip((0.2126, 0.7152, 0.0722), lin))
    return 1.05 / (lum + 0.05) > (lum + 0.05) / 0.05


def current_block_span(idx: TraceIndex, step: int) -> Optional[tuple[int, int]]:
    """[start, end) of the block the scrubber is in (the block of the current step, or the next one)."""
    rec = idx.step_record(step)
    if rec is None:
        rec = idx.trace.steps[0] if idx.trace.steps else None
    if rec is None:
        return None
    if rec.in_flight:  # a pipeline step: every block in flight
        return rec.window[0], rec.window[1]
    block = idx.block_of_step[rec.index]
    return (block.start, block.start + block.length) if block else None


def render_canvas(trace: Trace, step: int, show_future: bool = False, color_by: str = "state",
                  before_commit: bool = False, highlight: Optional[int | Collection[int]] = None,
                  focus: Optional[int] = None) -> str:
    """HTML of the whole sequence after `step` steps, the current block outlined, later blocks collapsed;
    `color_by` in COLOR_BY; `before_commit`: step `step` drafted, nothing of it committed yet; `highlight`: a
    position (or several) ringed in red (the one a text points at); `focus`: the position components/views/focus.py's
    FOCUS_JS keeps in view when the canvas sits in a scrolling box."""
    idx = index_of(trace)
    step = clamp_step(trace, step)
    ids = trace.canvas_at(step - 1 if before_commit and step > 0 else step)
    P = len(trace.header.prompt_ids)
    cur = current_block_span(idx, step)
    end = len(ids) if show_future or cur is None else cur[1]
    if show_future:  # the whole run: no current block, and the blocks never decoded collapse into one note
        last = max(idx.commit_of, default=P - 1)
        block = idx.block_of_position(last)
        end = max(P, block.start + block.length if block else last + 1)
        cur = None
    parts = []
    first = max(0, P - MAX_PROMPT_SHOWN)
    if first:
        parts.append(f'<span class="more">… {first} earlier prompt tokens</span> ')
    pipe = is_pipeline(trace)
    lives = lifecycles(trace) if pipe else None
    pos = first
    while pos < end:
        if cur and pos == cur[0]:
            if pipe:  # several blocks in flight: each outlined, with its state
                parts.append(_flight_html(idx, step, ids, color_by, before_commit, lives))
            else:
                inner = "".join(_token_html(idx, step, p, ids, True, color_by, before_commit)
                                for p in range(cur[0], min(cur[1], end)))
                parts.append(f'<span class="blk cur" aria-label="current block">{inner}</span>')
            pos = cur[1]
            continue
        block = idx.block_of_position(pos)
        if pos >= P and block is not None and block.start == pos:
            parts.append('<span class="sep" aria-hidden="true">│</span>')
            if pipe:
                parts.append(block_tag(trace, block.index, step, lives))
        parts.append(_token_html(idx, step, pos, ids, False, color_by, before_commit))
        pos += 1
    if not trace.detailed:
        parts.insert(0, '<p class="more">Skeleton trace: recorded without token strings, drafts or verification '
                        'rows, so tokens show as #id and hover details are limited.</p>')
    for at in ([highlight] if isinstance(highlight, int) else highlight or ()):  # one position or several
        parts = [p.replace(f'data-pos="{at}"', f'data-pos="{at}" data-watch="1"', 1) for p in parts]
    hidden = len(ids) - end
    if hidden > 0:
        ended = show_future or (trace.footer is not None and step >= len(trace.steps))  # (its last step: no more)
        never = "never decoded (the run had ended)" if ended else "in later blocks"
        parts.append(f' <span class="more">… {plural(hidden, "position")} {never}</span>')
    return (f'<div class="s2d2-canvas" role="group" aria-label="token canvas"{focus_attr(focus)}>{"".join(parts)}'
            '</div>')


def _flight_html(idx: TraceIndex, step: int, ids: list[int], color_by: str, before_commit: bool,
                 lives: Optional[dict]) -> str:
    """The blocks a pipeline step worked in, each outlined (dashed while incomplete) behind its tag."""
    out = []
    for start, stop, block in in_flight_spans(idx.trace, max(step, 1)):
        inner = "".join(_token_html(idx, step, p, ids, True, color_by, before_commit) for p in range(start, stop))
        row = next((r for r in idx.trace.steps[max(step, 1) - 1].in_flight if r.block == block), None)
        cls = "blk cur" + ("" if row is None or row.complete else " incomplete")
        tag = block_tag(idx.trace, block, step, lives)
        out.append(f'{tag}<span class="{cls}" data-block="{block}" aria-label="block in flight">{inner}</span>')
    return " ".join(out)


LEGEND_ALWAYS = ("prompt", "masked", "drafted")


def legend_html(trace: Optional[Trace] = None, color_by: str = "state", only: Optional[Collection[str]] = None) -> str:
    """The key to the canvas: the states this trace uses (all of them without a trace; only those in `only` when
    given: a tour stop keys what its canvas shows, no state it has not explained yet), the current-block outline,
    the block separator ("sep"), "after the end" and the committed-this-step mark; a 0-1 scale when colouring by p,
    q or r."""
    used = set(STATES)
    if trace is not None:
        used = {c.how for s in trace.steps for c in s.commits} | ({"edited"} if any(s.edits for s in trace.steps)
                                                                 else set())
        if any(discarded(s, r.position) for s in trace.steps if s.verification for r in s.verification.positions):
            used.add("discarded")
    keys = [k for k in STATES if (k in LEGEND_ALWAYS or k in used) and (only is None or k in only)]
    if color_by in ("p", "q", "r"):
        scale = ('<span class="scale"><span>0</span><span class="bar"></span><span>1</span></span>'
                 f'<span>background = {html.escape(color_by)} of the token (where it was drafted / verified); '
                 'hatched = no value</span>')
        items = scale
    else:
        items = "".join(
            f'<span class="tok st-{k}"><span class="g" aria-hidden="true">{html.escape(STATES[k][0])}</span>'
            f'{_two(_legend_label(k, trace), SHORT_LABELS.get(k, k))}</span>' for k in keys)
    pipeline = trace is not None and is_pipeline(trace)
    outlined = "blocks in flight (outlined; dashed = not fully active yet)" if pipeline else "current block (outlined)"
    if trace is not None and trace.blocks and trace.blocks[0].prompt_tail > 0:  # why the ring takes in prompt tokens
        outlined = outlined[:-1] + "; blocks count from the text's start, so the first holds the prompt's end)"
    extra = (f'<span class="tok blk-key">{_two(outlined, "blocks in flight" if pipeline else "current block")}</span>'
             + (f'<span class="tok sep-key"><span class="g" aria-hidden="true">│</span>'
                f'{_two("where the next block starts", "next block")}</span>' if _keys_sep(trace, only) else "")
             + ('<span class="tok st-accepted after-end">after the end</span>' if only is None or "after-end" in only
                else "")
             + (f'<span class="tok new">{_two("bold underline = committed this step", "bold = new")}</span>'
                if only is None or "new" in only else ""))
    return f'<div class="s2d2-legend">{items}{extra}</div>'


def legend_for(drawn: str, trace: Optional[Trace] = None) -> str:
    """The key to exactly what `drawn` (one or more rendered canvases) shows: its states, the block separator,
    "after the end" and the committed-this-step mark (a picture never keys what it does not draw)."""
    shown = set(re.findall(r'class="tok st-([a-z_]+)', drawn))
    shown |= {m for m in ("after-end", "new") if re.search(rf'class="tok [^"]*\b{m}\b', drawn)}
    shown |= {"sep"} if 'class="sep"' in drawn else set()
    return legend_html(trace, only=shown)


def _keys_sep(trace: Optional[Trace], only: Optional[Collection[str]]) -> bool:
    """Whether the key lists the │ between blocks: where the canvas draws one (`only`), else where this trace's
    canvas ever can (a block after the prompt with a block after it: the current block is outlined instead)."""
    if only is not None:
        return "sep" in only
    if trace is None:
        return True
    prompt = len(trace.header.prompt_ids)
    return sum(b.start >= prompt for b in trace.blocks) >= 2


# The legend's words on a narrow screen (the key sits above the canvas and must fit the phone's first screen); the
# long words stay in the tooltip.
SHORT_LABELS = {"masked": "blank", "drafted": "guess", "discarded": "thrown away", "accepted": "kept after check",
                "resampled": "replaced", "threshold": "kept: confident", "fallback": "kept: fallback",
                "hiconf_extra": "confident extra", "ratio_extra": "ratio extra", "ar": "one at a time",
                "ar_seed": "AR seed", "edited": "edited"}


def _two(long: str, short: str) -> str:
    """A legend label in two lengths; CSS shows one (the long on a wide screen)."""
    return (f'<span class="long">{html.escape(long)}</span><span class="short" title="{_attr(long)}">'
            f'{html.escape(short)}</span>')


def _legend_label(state: str, trace: Optional[Trace]) -> str:
    """The legend's words; τ_conf is named with its value where it first appears."""
    tau = trace.header.config.get("confidence_threshold") if trace is not None else None
    if state == "threshold" and isinstance(tau, (int, float)):
        return f"confident diffusion pick (p > τ_conf = {tau:g}, the confidence threshold)"
    return STATES[state][1]


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
.st-discarded{background:#f1f5f9;color:#64748b!important;text-decoration:line-through 2px #94a3b8;opacity:.8}
.s2d2-canvas .tok.shade-dark{color:#fff!important;opacity:1}.s2d2-canvas .tok.shade-light{color:#111!important;opacity:1}
.s2d2-canvas .tok.shade-dark.st-discarded{text-decoration-color:#e0e7ff}
.st-accepted{background:#bbf7d0}
.st-resampled{background:#fed7aa}
.st-threshold{background:#bfdbfe}
.st-fallback{background:#dbeafe;text-decoration:underline dotted}
.st-hiconf_extra,.st-ratio_extra{background:#99f6e4}
.st-ar{background:#e9d5ff}
.st-ar_seed{background:#fff;outline:2px solid #111}
.s2d2-legend{display:flex;flex-wrap:wrap;gap:6px;font-size:0.85em;margin-top:6px;align-items:center}
.s2d2-legend .short{display:none}
@media (max-width: 640px){.s2d2-legend .long{display:none}.s2d2-legend .short{display:inline}
  .s2d2-canvas{line-height:1.85}}
.s2d2-legend .blk-key{outline:2px solid #4f46e5;outline-offset:1px;background:#fff}
.s2d2-legend .sep-key{background:#fff}.s2d2-legend .sep-key .g{color:#94a3b8;font-size:1em;opacity:1}
.s2d2-legend .scale{display:inline-flex;align-items:center;gap:4px}
.s2d2-legend .scale .bar{display:inline-block;width:90px;height:10px;border-radius:2px;
  background:linear-gradient(90deg,rgba(79,70,229,.08),rgba(79,70,229,.95))}
.s2d2-canvas .after-end,.s2d2-legend .after-end{opacity:.45;background:#e5e7eb!important;color:#475569!important;
  text-decoration:line-through 1px}
.s2d2-canvas .end-tok{box-shadow:inset -3px 0 0 #111}
.s2d2-canvas [data-watch]{outline:3px solid #dc2626;outline-offset:1px}
.s2d2-canvas .tok s{color:#b91c1c;text-decoration:line-through 2px #b91c1c}
.st-edited{background:#d8b4fe;outline:1px dashed #7e22ce}
.s2d2-canvas .st-edited s{color:#6b21a8;text-decoration:line-through 2px #6b21a8;opacity:.8}
.s2d2-canvas .blk-tag{font-family:system-ui,sans-serif;font-size:.7em;color:#3730a3;background:#eef2ff;
  border-radius:3px;padding:0 4px;margin:0 3px;white-space:nowrap}
.s2d2-canvas .blk.cur.incomplete{outline-style:dashed}
"""


def live_rows(steps: list[StepRecord]) -> list[list]:
    """[position, text, how, token id] of every decided position after `steps`, for render_live: an edited
    position (LLaDA2.x self-correction) shows its new token as "edited"."""
    rows: dict[int, list] = {}
    for s in steps:
        for c in s.commits:
            rows[c.position] = [c.position, c.text, c.how, c.token]
        for e in s.edits:
            rows[e.position] = [e.position, e.new_text, "edited", e.new]
    return list(rows.values())


def render_live(commits: list[list], prompt: str = "", stop_ids: tuple[int, ...] | list[int] = (),
                keep: Optional[int] = None) -> str:
    """Streaming preview during a run: the committed tokens so far, by position. Rows are [position, text, how] or
    [position, text, how, token id]; with ids and `stop_ids`, tokens after the first committed stop token are greyed
    as "after the end"; with `keep` (the first position past the generation length), the positions from it on are
    greyed too: the model decoded them (whole blocks) but the answer does not keep them (s2d2/output.py)."""
    rows = sorted((int(r[0]), str(r[1]), str(r[2]), int(r[3]) if len(r) > 3 else None) for r in commits)
    stops = set(stop_ids)
    end = min((pos for pos, _, _, tok in rows if tok is not None and tok in stops), default=None)
    parts = []
    for pos, text, how, _ in rows:
        glyph, label = STATES.get(how, ("", how))
        g = f'<span class="g" aria-hidden="true">{html.escape(glyph)}</span>' if glyph else ""
        classes = f"tok st-{html.escape(how)}"
        if end is not None and pos > end:
            classes, label = classes + " after-end", AFTER_END
        elif keep is not None and pos >= keep:
            classes, label = classes + " after-end past-length", PAST_LENGTH
        elif pos == end:
            classes, label = classes + " end-tok", label + " · the stop token: the answer ends here"
        parts.append(f'<span class="{classes}" data-pos="{pos}" aria-label="{_attr(label)}" '
                     f'title="position {pos}: {_attr(label)}">{g}{html.escape(visible_text(text))}</span>')
    head = f'<span class="tok st-prompt">{html.escape(visible_text(prompt, 200))}</span> ' if prompt else ""
    return f'<div class="s2d2-canvas" role="group" aria-label="live output">{head}{"".join(parts)}</div>'
