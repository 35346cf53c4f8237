"""The one line above the canvas: what a run (or a pair of runs) shows, computed from the traces alone.

For a pair (S2D2 and the diffusion baseline on the same prompt and seed) it finds the first output token where the
two runs differ and the S2D2 step whose verifier rejected a draft there and resampled it, e.g.
"Diffusion alone (B = 16) answered 53 ✗ — S2D2's verifier rejected the draft `2` at step 2 and resampled `3` →
63 ✓". Answers are read from the `#### N` line and checked against the question itself when it is one of the
bundled arithmetic task's questions; any other prompt gets the same story without ✓ / ✗.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from s2d2.compare import first_difference
from s2d2.tasks.arithmetic import extract_answer, solve
from s2d2.trace import StepRecord, Trace

from components.views.canvas import visible_text
from components.escape import md_text
from components.views.trace_index import index_of
from components.views.plural import plural

_USER_RE = re.compile(r"<\|im_start\|>user\n(.*?)<\|im_end\|>", re.S)


@dataclass(frozen=True)
class Story:
    text: str  # Markdown, one line
    step: int = 0  # scrubber value that shows the moment (the S2D2 step of the catch; 0 = start)
    baseline_step: int = 0  # scrubber value at which the baseline committed the token S2D2 caught


def question_of(trace: Trace) -> str:
    """The user's question: the prompt text without a chat template around it."""
    m = _USER_RE.search(trace.header.prompt_text)
    return m.group(1).strip() if m else trace.header.prompt_text.strip()


def _code(text: str) -> str:
    return "`" + visible_text(text, 16).replace("`", "ˋ") + "`"


def _answer(trace: Trace, gold: Optional[int]) -> str:
    """"63 ✓", "53 ✗" or the output's first words when it has no `#### N` line."""
    text = trace.footer.output_text if trace.footer else ""
    value = extract_answer(text)
    if value is None:
        return "“" + md_text(visible_text(text.strip(), 30), 200) + "”"
    mark = "" if gold is None else (" ✓" if value == gold else " ✗")
    return f"{value}{mark}"


def catch_at(trace: Trace, position: int) -> Optional[StepRecord]:
    """The step whose verifier rejected the draft at absolute `position` and resampled it."""
    for s in trace.steps:
        v = s.verification
        if v is not None and v.first_reject is not None and v.resampled is not None \
                and v.positions[v.first_reject].position == position:
            return s
    return None


def pair_story(s2d2: Trace, baseline: Trace) -> Story:
    """The headline of an example pair: where the verifier changed the outcome, with both answers and costs."""
    gold = solve(question_of(s2d2))
    block = baseline.header.config.get("block_length")
    alone = "D2F alone" if baseline.header.config.get("loop") == "pipeline" else "Diffusion alone"
    base = f"{alone} (B = {md_text(block, 10)}) answered **{_answer(baseline, gold)}**"
    ours = f"**{_answer(s2d2, gold)}**"
    cost = f" ({plural(len(s2d2.forwards), 'forward')} vs {len(baseline.forwards)}, same question and seed)"
    a = s2d2.footer.output_ids if s2d2.footer else []
    b = baseline.footer.output_ids if baseline.footer else []
    i = first_difference(a, b)
    if i is None:
        return Story(f"Both runs wrote the same answer: {ours}{cost}.")
    pos = len(s2d2.header.prompt_ids) + i
    step = catch_at(s2d2, pos)
    hit = index_of(baseline).commit_of.get(pos)
    base_step = hit[0] + 1 if hit else 0
    if step is None or step.verification is None:
        return Story(f"{base} — S2D2 answered {ours}; the runs part at output token {i + 1}{cost}.",
                     0, base_step)
    v = step.verification
    rejected = v.positions[v.first_reject].draft_text  # type: ignore[index]
    return Story(f"{base} — S2D2's verifier rejected the draft {_code(rejected)} at step {step.index + 1} and "
                 f"resampled {_code(v.resampled_text)} → {ours}{cost}.", step.index + 1, base_step)


def pair_note(s2d2: Trace, baseline: Trace) -> str:
    """What the run toggle says the two runs share, and the one other difference a reader would credit to the
    verifier: the confidence a draft needs to commit without a check (said only when the runs differ in it)."""
    ours, theirs = (t.header.config.get("confidence_threshold") for t in (s2d2, baseline))
    same = "Same question, seed and block length B."
    if not isinstance(ours, (int, float)) or not isinstance(theirs, (int, float)) or ours == theirs:
        return same
    return f"{same} A draft commits unchecked at p > {theirs:g} in the diffusion run, p > {ours:g} in S2D2's."


def single_story(trace: Trace) -> Story:
    """One line for a run on its own: what it did and what it answered (a stopped run says so first)."""
    story = _single(trace)
    reason = trace.footer.finish_reason if trace.footer else ""
    if reason in ("cancelled", "time_limit"):
        why = "Stopped" if reason == "cancelled" else "Stopped at the time limit"
        return Story(f"{why} — partial trace. {story.text}", story.step)
    return story


def _single(trace: Trace) -> Story:
    method = trace.header.config.get("method")
    answer = _answer(trace, solve(question_of(trace)))
    gen = trace.footer.generated_length if trace.footer else 0
    cost = f"{plural(len(trace.forwards), 'forward')} for {gen} token{'' if gen == 1 else 's'}{rounding_note(trace)}"
    edit, edited = _edits(trace)
    if method != "s2d2":
        who = "Autoregressive decoding" if method == "ar" else "Diffusion alone (never verifies)"
        return Story(f"{who} answered **{answer}**{edited} · {cost}.", edit.index + 1 if edit else len(trace.steps))
    verified = [s for s in trace.steps if s.verification is not None]
    caught = [s for s in verified if s.verification.first_reject is not None]  # type: ignore[union-attr]
    skipped = sum(1 for s in trace.steps if s.decision is not None and not s.decision.verify)
    text = (f"S2D2 answered **{answer}** · {len(verified)} verified steps, {len(caught)} with a rejected draft, "
            f"{skipped} skipped{edited} · {cost}.")
    moment = caught[0] if caught else edit
    # no moment to point at: open on the finished answer, never on an empty step 0
    return Story(text, moment.index + 1 if moment else len(trace.steps))


def rounding_note(trace: Trace) -> str:
    """A clause for a run that decoded more positions than its generation length (whole blocks), else ""."""
    asked = trace.header.gen_length
    decoded = sum(b.length - b.prompt_tail for b in trace.blocks)
    if trace.header.config.get("method") == "ar" or decoded <= asked:
        return ""
    block = trace.header.config.get("block_length")
    return (f" (the model decodes whole blocks: generation length {asked} was rounded up to the end of its block of "
            f"{block}, so {plural(decoded, 'position')} were decoded and the answer keeps at most the first {asked})")


def _edits(trace: Trace) -> tuple[Optional[StepRecord], str]:
    """The first step that edits (LLaDA2.x self-correction) and a clause saying what it changed ("" for none)."""
    first = next((s for s in trace.steps if s.edits), None)
    if first is None:
        return None, ""
    e = first.edits[0]
    total = sum(len(s.edits) for s in trace.steps)
    more = f" ({plural(total, 'edit')} in all)" if total > 1 else ""
    return first, (f" — it corrected itself at step {first.index + 1}, editing {_code(e.old_text)} → "
                   f"{_code(e.new_text)}{more}")
