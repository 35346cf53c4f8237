"""The tour's later stops: calibration (K̂ against K), the cost ledger of the opening pair, exactness (lossless S2D2
equals AR), self-correction where an edit and a verification meet, and both runs in lockstep. Texts are computed
from the traces they draw (components/tour/stops.py has the data types and the earlier stops)."""
from __future__ import annotations

import html
from typing import Optional

from s2d2.trace import Trace

from components.views.calibration import calibration, calibration_text
from components.views.exactness import exactness, result_line
from components.views.figures import KIND_WORDS
from components.views.ledger import block_forwards, lane_ledger
from components.views.lockstep import how_each_decides, moments, parting, same_things
from components.tour.pipeline_stop import pipeline_stop
from components.tour.stops import Pic, Stop, TourMaterial, code, first_step
from components.views.trace_index import fmt, index_of
from components.views.plural import plural

S2D2, BASELINE = "S2D2", "Diffusion alone"


def later_stops(m: TourMaterial) -> list[Stop]:
    stops = [s for s in (calibration_stop(m), cost_stop(m), exact_stop(m), edit_stop(m), pipeline_stop(m))
             if s is not None]
    return stops + [whole_run(m)]


def calibration_stop(m: TourMaterial) -> Optional[Stop]:
    calls = [s for s in m.trace.steps if s.verification is not None and s.policy_inputs is not None]
    if len(calls) < 2:
        return None
    return Stop("calibration", "Was K̂ right?", calibration_text(m.trace) + (
        " The policy only ever sees K̂, so a miss costs a verifier forward that accepts less than it expected; the "
        "output stays checked either way."), _largest_miss(m.trace), (Pic("calibration"),), example=m.label)


def _largest_miss(trace: Trace) -> int:
    """The step the calibration text dwells on (its largest miss): the one "Show in Replay" opens."""
    c = calibration(trace)
    w = c.worst()
    return c.step[w] if w is not None else len(trace.steps)


def pair(m: TourMaterial) -> dict[str, Trace]:
    """The opening run and its partner, S2D2 first (the ledger's and the lockstep's lanes)."""
    return {S2D2: m.trace, **({BASELINE: m.baseline} if m.baseline is not None else {})}


def cost_stop(m: TourMaterial) -> Optional[Stop]:
    if m.trace.header.config.get("method") != "s2d2" or not any(s.verification for s in m.trace.steps):
        return None
    lanes = pair(m)
    ours = lane_ledger(S2D2, m.trace)
    verify = next((r for r in ours.rows if r.kind.startswith("verify")), None)
    draft = next((r for r in ours.rows if r.kind == "draft"), None)
    text = (f"Every model call is one forward. S2D2 spent **{plural(ours.forwards, 'forward')}** for "
            f"{ours.tokens} answer tokens: " + ", ".join(f"{r.forwards} {KIND_WORDS[r.kind]}" for r in ours.rows) + ".")
    if verify is not None and draft is not None:
        text += (f" A verify counts as one forward like a draft, but it carries {'/'.join(map(str, verify.queries))} "
                 f"query tokens to a draft's {'/'.join(map(str, draft.queries))} (2L: the drafts and their MASK "
                 "copies), so a verify forward costs more compute than a draft.")
    if m.baseline is not None:
        base = lane_ledger(BASELINE, m.baseline)
        text += (f" Diffusion alone spent **{base.forwards}**. " + _block_balance(lanes) + " The boxes below are the "
                 "forwards, block by block; the list says what each routed step paid and got. A verify step "
                 "pays when its tokens per forward beat what a plain diffusion step would commit for its one "
                 "forward; s = K̂ − c ≥ τ_score is the policy's bet on that, made before paying.")
    return Stop("cost", "What it costs", text, len(m.trace.steps), (Pic("ledger"),), example=m.label)


def _block_balance(lanes: dict[str, Trace]) -> str:
    """Where the two runs' forwards differ, block by block ("block 2: 5 vs 3; block 3: 3 vs 6")."""
    numbers, by_lane = block_forwards(lanes)
    ours, theirs = by_lane[S2D2], by_lane[BASELINE]
    parts = [f"block {n}: {len(ours[n])} vs {len(theirs[n])}" for n in numbers if len(ours[n]) != len(theirs[n])]
    if not parts:
        return "Block by block the two runs spent the same."
    return ("Forwards per block where they differ (S2D2 vs diffusion alone): " + "; ".join(parts) + ".")


def exact_stop(m: TourMaterial) -> Optional[Stop]:
    if m.lossless is None or m.ar is None:
        return None
    e = exactness(m.lossless, m.ar)
    verdict = ("writes **exactly the same tokens as greedy AR** (all " f"{e.tokens})" if e.identical else
               f"departs from AR at output token {e.first_difference} (float near-ties can flip a first choice)")
    settings = "".join(f"\n* {c}" for c in e.conditions)
    text = ("S2D2 can be lossless: write exactly what greedy AR writes (autoregressive decoding that takes the "
            f"model's first choice, one token per forward). On the opening question the same model {verdict}, in "
            f"**{plural(e.s2d2_forwards, 'forward')} instead of AR's {e.ar_forwards}**"
            + (f" ({e.ratio:.2f}× fewer)" if e.ratio else "") + ". Each verify keeps the longest run of drafts that "
            "agree with the verifier's first choices, plus that first choice where they first disagree: drafts "
            "change the speed, never the output. The settings it takes:" + settings + "\n\n")
    line = result_line(m.exact_result)
    if line:
        text += " " + line
    return Stop("exact", "Lossless: equal to AR", text, len(m.lossless.steps), (Pic("exact"),), trace="lossless")


def edit_stop(m: TourMaterial) -> Optional[Stop]:
    """Self-correction (LLaDA2.x editing loop): the step of the first edit, with the verification of the same block
    when there is one, both ringed on the canvas."""
    t = m.edit
    rec = first_step(t, lambda s: bool(s.edits)) if t is not None else None
    if t is None or rec is None:
        return None
    idx = index_of(t)
    k, e = rec.index + 1, rec.edits[0]
    tau = t.header.config.get("editing_threshold")
    bound = f" > τ_edit = {tau:g}" if isinstance(tau, (int, float)) else ""
    hit = idx.commit_of.get(e.position)
    how = ""
    if hit is not None:
        writer = t.steps[hit[0]]
        skipped = writer.decision is not None and not writer.decision.verify
        how = (f" It had been written at step {hit[0] + 1} by a {hit[1].how.replace('_', ' ')} pick"
               + (", at a step whose policy skipped verification" if skipped else "") + ".")
    text = (f"A LLaDA2.1-style model re-reads its whole block at every step. At step {k} it predicts "
            f"{code(e.new_text)} at position {e.position}, which it had already decoded as {code(e.old_text)}, with "
            f"p = {fmt(e.p)}{bound}: it **edits** the token (✎, purple, the old one struck through).{how}")
    ring = [e.position]
    meet = first_step(t, lambda s: s.block == rec.block and s.verification is not None
                      and s.verification.first_reject is not None and s.verification.resampled is not None
                      and s.verification.first_reject < len(s.verification.positions))
    if meet is not None and meet.verification is not None:
        v = meet.verification
        r = v.positions[v.first_reject]  # type: ignore[index]
        ring.append(r.position)
        when = "earlier" if meet.index < rec.index else "later"
        text += (f" In the same block, {when} at step {meet.index + 1}, the verifier rejected the draft "
                 f"{code(r.draft_text)} at position {r.position} and resampled {code(v.resampled_text)}: two ways "
                 "of fixing a token in one run — verification before a draft is committed, editing after.")
    elif any(s.verification is not None for s in t.steps):
        text += " This run also verifies in other steps."
    text += (" Edits are decided by the draft before any verification: the verifier judges only drafts of masked "
             "positions and reads the edited block as context.")
    if t is not m.trace:
        text = f"Another bundled model (tiny LLaDA2, B = {t.header.config.get('block_length')}) on another question. " \
               + text
    return Stop("edit", "Self-correction", text, k, (Pic("canvas", "", e.position, tuple(ring[1:])),), trace="edit",
                example=m.edit_label, own_story=t is m.trace)


def whole_run(m: TourMaterial) -> Stop:
    t = m.trace
    tokens = t.footer.generated_length if t.footer else 0
    text = f"The whole run: **{plural(len(t.forwards), 'forward')} for {plural(tokens, 'token')}**. "
    if m.baseline is None or m.story is None:
        text += ("The Metrics tab sums it up: forwards per block by kind, tokens per forward, the accepted-length "
                 "histogram and per-position acceptance.")
        return Stop("run", "The whole run", text, len(t.steps), (Pic("canvas", "", None),), example=m.label)
    lanes = pair(m)
    part = parting(lanes)
    rules = " · ".join(html.escape(r) for r in how_each_decides(lanes))
    text += (f"{m.story.text} Scrub both runs together below: same {same_things(lanes)}; {rules}. The slider moves "
             f"both runs block by block, from 0 (nothing written yet) to {len(moments(lanes)) - 1} (both finished)"
             + (f"; position {part}, where they part, is ringed once written." if part is not None else ".")
             + " The Compare tab runs any presets side by side.")
    return Stop("run", "Both runs, side by side", text, len(t.steps), (Pic("lockstep", at=part),), example=m.label)
