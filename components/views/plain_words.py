"""What a step did, in words a newcomer reads before any formula: "the model guessed 16 tokens at once, then checked
its own guesses reading left to right: it kept 8, found '2' very unlikely and picked '3' instead". The numbers
(p, q, r, u, K̂, τ) stay one tap away (step_views.step_summary, token_detail.evidence). Pure text from the trace;
callers escape it."""
from __future__ import annotations

from collections import Counter
from typing import Optional

from s2d2.trace import Trace, Verification

from components.views.token_state import visible_text
from components.views.trace_index import clamp_step, index_of
from components.views.plural import plural


def likelihood(q: Optional[float]) -> str:
    """How likely the checking pass found a guess, in words (q is the verifier's probability of it)."""
    if q is None:
        return "unlikely"
    if q < 0.01:
        return "very unlikely"
    if q < 0.2:
        return "unlikely"
    return "less likely than the first guess assumed"


def _quote(text: str) -> str:
    return f"“{visible_text(text, 16)}”"


def rejection_words(v: Verification) -> str:
    """The first rejection of a verification, e.g. "found “2” very unlikely and picked “3” instead, and threw away
    the 7 guesses after it (each was made assuming “2”)"."""
    r = v.positions[v.first_reject]  # type: ignore[index]
    if v.mode == "greedy_exact":
        found = f"would not have written {_quote(r.draft_text)} itself"
    else:
        found = f"found {_quote(r.draft_text)} {likelihood(r.q)}"
    picked = (f" and picked {_quote(v.resampled_text)} instead" if v.resampled is not None
              else " and left that place to be decided again")
    after = len(v.positions) - v.first_reject - 1  # type: ignore[operator]
    if after == 1:
        thrown = f", and threw away the guess after it (made assuming {_quote(r.draft_text)})"
    else:
        thrown = (f", and threw away the {after} guesses after it (each was made assuming {_quote(r.draft_text)})"
                  if after else "")
    return found + picked + thrown


def step_words(trace: Trace, step: int) -> str:
    """One plain sentence for the step at scrubber value `step`: what the model guessed, whether it checked, what it
    kept, replaced and threw away."""
    idx = index_of(trace)
    s = clamp_step(trace, step)
    rec = idx.step_record(s)
    n = len(trace.steps)
    if rec is None:
        return (f"Before the first step: the model has read the prompt "
                f"({plural(len(trace.header.prompt_ids), 'token')}). Move the scrubber to watch it write the answer, "
                f"{plural(n, 'step')} in all.")
    head = f"Step {s} of {n}: "
    method = trace.header.config.get("method")
    edits = f" It also changed {len(rec.edits)} token{'' if len(rec.edits) == 1 else 's'} it had written before." \
        if rec.edits else ""
    if method == "ar":
        return head + "the model wrote one token, reading the text left to right." + edits
    if not rec.masks_before:  # the editing loop's passes after the last blank
        done = (f"changed {len(rec.edits)} token{'' if len(rec.edits) == 1 else 's'} it now disagreed with"
                if rec.edits else "found nothing to change")
        return head + f"no blanks were left; the model re-read the block and {done}."
    edits = past_end(trace, rec.commits) + edits  # (before the edits: "them" are the step's tokens)
    hows = Counter(c.how for c in rec.commits)
    kept = len(rec.commits) - hows.get("resampled", 0)
    one = len(rec.drafts) == 1
    guessed = "the model guessed one token" if one else f"the model guessed {plural(len(rec.drafts), 'token')} at once"
    d, v = rec.decision, rec.verification
    if v is not None:
        what = "guess" if one else "guesses"
        checked = f"{guessed}, then checked its own {what} in one more pass, reading left to right: it kept " + (
            ("it" if one else f"all {kept}") if kept == len(rec.drafts) else ("none" if kept == 0 else f"{kept}"))
        if v.first_reject is not None and v.first_reject < len(v.positions):
            return head + f"{checked}, {rejection_words(v)}." + edits
        return head + f"{checked}: {'the guess' if one else 'every guess'} held up." + edits
    why = ("skipped the check (not worth an extra pass here)" if d is not None
           else f"did not check {'it' if one else 'them'} (diffusion alone never checks)")
    which = ("it" if one else f"all {kept}") if kept == len(rec.drafts) else f"the {kept} it was surest of"
    return head + f"{guessed} and {why}; it kept {which}." + edits


def past_end(trace: Trace, commits: list) -> str:
    """A sentence on the step's tokens that lie past the end of the answer (the end mark and whatever follows it,
    or past the length asked for): the block is decoded whole, so "it kept all 16" counts them, while the answer
    leaves them out. Empty when there are none (or the run has no footer)."""
    end = index_of(trace).answer_end
    if end is None or not commits:
        return ""
    n = sum(1 for c in commits if c.position >= end)
    if n == 0:
        return ""
    if n == len(commits):
        which = "It lies" if n == 1 else f"All {n} lie"
    else:
        which = f"{n} of them {'lies' if n == 1 else 'lie'}"
    return f" {which} past the end of the answer, which leaves {'it' if n == 1 else 'them'} out."


def evidence_words(trace: Trace, step: int) -> Optional[str]:
    """The first rejection of the step at scrubber value `step` in words (None when it rejected nothing)."""
    rec = index_of(trace).step_record(clamp_step(trace, step))
    v = rec.verification if rec is not None else None
    if v is None or v.first_reject is None or v.first_reject >= len(v.positions):
        return None
    r = v.positions[v.first_reject]
    return (f"The model first guessed {_quote(r.draft_text)} here. Checking its own guess, reading left to right, it "
            f"{rejection_words(v)}.")
