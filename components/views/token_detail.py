"""The words for one token: its tooltip (token, how it was decided, p, q, r, the draw u, the top candidates) and
the detail box under the canvas, which follows the run and the step on screen: the pinned position's details,
else the verifier's evidence at the step's first rejection, else a hint. Plain text; callers escape it."""
from __future__ import annotations

import html
from typing import Any, Optional

from s2d2.trace import Trace

from components.views.plain_words import evidence_words
from components.views.token_state import AFTER_END, STATES, done_steps, position_state, visible_text
from components.views.trace_index import TraceIndex, clamp_step, fmt, fmt_prob, index_of
from components.views.plural import plural
DETAIL_HINT = ('<span class="on-hover">Hover a token for its details (p, q, r, the draw u, the top candidates); click '
               'it to pin them here and outline its row in the mask viewer. Keys: ← → step through the run.</span>'
               '<span class="on-touch">Tap a token to pin its details here (p, q, r, the draw u, the top candidates) '
               'and outline its row in the mask viewer.</span>')
PIN_HINT = ('<span class="on-hover">Hover a token for its numbers; click it to pin them here.</span>'
            '<span class="on-touch">Tap a token to pin its numbers here.</span>')


def tooltip(idx: TraceIndex, step: int, pos: int, full: bool = True, before_commit: bool = False) -> str:
    """Plain-text details for one position (escaped later, as an attribute); `full=False`: token and how only.
    `before_commit`: at the moment step `step` has drafted and nothing is checked or committed yet (the tour's draft
    pictures), so it tells nothing that moment does not know: no check, no rejection, no commit of this step."""
    trace = idx.trace
    lines = [f"position {pos}"]
    block = idx.block_of_position(pos)
    if block is not None:
        lines[0] += f" · answer block {idx.answer_block(block.index)}"
    done = done_steps(step, before_commit)  # the steps whose updates this moment shows
    if idx.after_end(done, pos):
        lines.append(AFTER_END)
    state, _ = position_state(idx, step, pos, before_commit)
    if state == "prompt":
        tokens = trace.header.prompt_tokens
        lines.append(f"prompt token {visible_text(tokens[pos] if pos < len(tokens) else '')}")
        return "\n".join(lines)
    hit = idx.commit_of.get(pos)
    shown_step = None
    if hit is not None and hit[0] < done:
        s_idx, commit = hit
        shown_step = trace.steps[s_idx]
        label = STATES.get(commit.how, ("", commit.how))[1]
        lines.append(f"token '{visible_text(commit.text)}' (id {commit.token}) — {label}")
        own = block.index if block is not None else shown_step.block  # a pipeline step spans several blocks
        lines.append(f"committed at step {s_idx + 1} (answer block {idx.answer_block(own)})")
        for e_idx, e in idx.edits_before(pos, done):
            lines.append(f"edited at step {e_idx + 1}: '{visible_text(e.old_text)}' → '{visible_text(e.new_text)}' "
                         f"(p={fmt(e.p)} > τ_edit)")
    else:
        shown_step = idx.step_record(step)
        lines.append("discarded draft (struck through): it came after the first rejection" if state == "discarded"
                     else "drafted: the model's guess, not checked or written yet" if state == "drafted"
                     and before_commit else "masked")
    if shown_step is None:
        return "\n".join(lines)
    d = idx.draft(shown_step, pos)
    row = None if before_commit and shown_step is idx.step_record(step) else idx.verify_row(shown_step, pos)
    if not full:  # compact form outside the current block: the numbers, no candidate lists
        nums = f"p={fmt_prob(d.p)} H={fmt(d.entropy)}" if d is not None else ""
        if row is not None:
            nums += f" q={fmt_prob(row.q)} r={fmt_prob(row.ratio)} u={fmt(row.u)}"
        return "\n".join(lines + ([nums.strip()] if nums else []))
    if d is not None:
        lines.append(f"draft '{visible_text(d.text)}' p={fmt_prob(d.p)} entropy={fmt(d.entropy)} "
                     f"margin={fmt(d.margin)}")
        if d.top:
            lines.append("top p: " + _candidates(d.top))
    if row is not None:
        verdict = _verdict(shown_step.verification, row)
        lines.append(f"verify: q={fmt_prob(row.q)} r={fmt_prob(row.ratio)} u={fmt(row.u)} -> {verdict}")
        lines.append(f"argmax q '{visible_text(row.argmax_q_text)}' {row.argmax_q_prob:.2f}")
        if row.top_q:
            lines.append("top q: " + _candidates(row.top_q))
    return "\n".join(lines)


# what each way of being written means, in words (a pinned token's first line; the numbers follow it)
HOW_WORDS = {
    "accepted": "the model guessed it, then its check agreed",
    "resampled": "the check rejected the first guess here, {draft}, and drew this token in its place",
    "threshold": "the model was sure enough of its guess ({sure}) to write it without a check",
    "fallback": "it was the model's surest guess of the step, written unchecked so that the step writes at least one",
    "hiconf_extra": "a very confident guess, written beside the checked ones without a check",
    "ratio_extra": "a guess the check rated likely enough to keep beside the accepted ones",
    "ar": "the model wrote it one token after another, like an ordinary language model",
    "ar_seed": "the model wrote it one forward ahead, as its block's first token",
}


def pinned_words(idx: TraceIndex, step: int, pos: int) -> str:
    """A pinned position in one plain sentence, before its numbers: what stands there at this step and how it got
    there ("“3” was written at step 2: the check rejected the first guess here, “2”, and resampled this token in its
    place.")."""
    trace = idx.trace
    state, _ = position_state(idx, step, pos)
    if state == "prompt":
        tokens = trace.header.prompt_tokens
        text = visible_text(tokens[pos], 16) if pos < len(tokens) else ""
        return f"“{text}” is part of the prompt: the model reads it and never changes it." if text else \
            "Part of the prompt: the model reads it and never changes it."
    end = " It lies past the end of the answer, which leaves it out." if idx.after_end(step, pos) else ""
    hit = idx.commit_of.get(pos)
    if hit is None or hit[0] >= step:
        current = idx.step_record(step)
        d = idx.draft(current, pos) if current is not None else None
        if state == "discarded" and d is not None:
            return (f"The model guessed “{visible_text(d.text, 16)}” here at this step, then threw the guess away: it "
                    "was checked after an earlier guess that the check rejected.")
        if state == "drafted" and d is not None:
            return (f"The model guessed “{visible_text(d.text, 16)}” here at this step but left the position blank for "
                    "a later step to decide.") + end
        return "Still blank at this step: the model has not written this position yet." + end
    s_idx, commit = hit
    d = idx.draft(trace.steps[s_idx], pos)
    sure = f"{d.p * 100:.0f} % sure" if d is not None and d.p is not None else "sure"
    draft = f"“{visible_text(d.text, 16)}”" if d is not None else "its draft"
    how = HOW_WORDS.get(commit.how, "").format(draft=draft, sure=sure)
    text = f"“{visible_text(commit.text, 16)}” was written at step {s_idx + 1}" + (f": {how}." if how else ".")
    edits = idx.edits_before(pos, step)
    if edits:
        last = edits[-1][1]
        text += (f" At step {edits[-1][0] + 1} the model changed it to “{visible_text(last.new_text, 16)}” "
                 "(it corrected itself).")
    return text + end


def _candidates(cands: list[Any]) -> str:
    """The recorded candidates a reader learns from: those of the first five with a probability above 0 (a token the
    draw could never pick, cut by top-k or top-p or the mask token itself, is recorded with exactly 0)."""
    return ", ".join(f"'{visible_text(c.text, 16)}' {c.prob:.2f}" for c in cands[:5] if c.prob > 0)


def _verdict(v: Any, row: Any) -> str:
    """accepted / rejected, or why a row after the first rejection is discarded whatever its own test said."""
    first = v.first_reject if v is not None else None
    if first is None or v.positions.index(row) <= first:
        return "accepted" if row.accepted else "rejected"
    rejected = v.positions[first]
    return (f"discarded (after the first rejection: it was checked with '{visible_text(rejected.draft_text)}' at "
            f"position {rejected.position} before it, and that token was rejected)")


def evidence(trace: Trace, step: int) -> Optional[str]:
    """The verifier's case at the first rejection of the step shown at scrubber value `step`, in one paragraph
    (None when that step rejected nothing)."""
    rec = index_of(trace).step_record(clamp_step(trace, step))
    v = rec.verification if rec is not None else None
    if v is None or v.first_reject is None or v.first_reject >= len(v.positions):  # a skeleton trace has no rows
        return None
    r = v.positions[v.first_reject]
    if v.mode == "greedy_exact":
        test = f"the draft is not the verifier's top token '{visible_text(r.argmax_q_text)}'"
    else:
        test = f"the draw u = {fmt(r.u)} ≥ r"
    if v.resampled is None:
        then = "the position is left to the fallback pick"
    elif v.fallback_to_q or v.mode == "greedy_exact":
        then = f"replaced by '{visible_text(v.resampled_text)}'"
    else:
        then = f"resampled '{visible_text(v.resampled_text)}' from the residual (q − p)+"
    after = len(v.positions) - v.first_reject - 1
    cut = f"; the {plural(after, 'draft')} after it are discarded" if after else ""
    return (f"The verifier rejected '{visible_text(r.draft_text)}' at position {r.position} (step {rec.index + 1}): "
            f"drafter p = {fmt_prob(r.p)}, verifier q = {fmt_prob(r.q)}, so r = min(1, q/p) = {fmt_prob(r.ratio)}; "
            f"{test}; {then}{cut}.")


def detail_html(trace: Optional[Trace], step: int, selected: Optional[int] = None, hint: str = DETAIL_HINT) -> str:
    """The detail box: the pinned position's details at this step of this run, else the step's evidence (the
    first rejection), else `hint` (HTML, shown as it is)."""
    if trace is None:
        return hint
    s = clamp_step(trace, step)
    if selected is not None and 0 <= selected < trace.header.total_length:
        idx = index_of(trace)
        text = "◉ " + tooltip(idx, s, selected)
        words = html.escape(pinned_words(idx, s, selected))
        return f'<span data-pinned="{selected}"><span class="words">{words}</span>{html.escape(text)}</span>'
    case = evidence(trace, s)
    if case is None:
        return hint
    words = evidence_words(trace, s) or ""
    # Words first; the numbers one tap away (a closed <details>: a newcomer reads the story, a learner opens it).
    return (f'<span class="evidence" data-evidence="{s}"><span class="words">{html.escape(words)}</span>'
            f'<details class="numbers"><summary>The numbers (p, q, r, u)</summary>{html.escape(case)} '
            f'<a href="#strip">Every verified draft ↓</a></details></span> {PIN_HINT}')
