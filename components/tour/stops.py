"""The guided tour's stops: draft → route → verify → accept / reject → residual resample → skip → calibration → cost
→ exactness → self-correction → both runs in lockstep.

`tour_stops` is pure: it picks the step that illustrates each idea (the tour centres on the first step whose
verifier rejected a draft and resampled it) and writes each text from that step's recorded numbers, so the words and
the pictures always describe the same moment. Each stop names the pictures it shows (`Pic`: one kind per concept,
drawn by components/tour/pictures.py into one shared component per kind, so a picture changes in place as the stops
advance) and what each reveals: the Verify stop's strip shows p and q only, the Accept/reject stop adds the test,
the Resample stop what was committed. Stops the material cannot illustrate are left out; the rest are numbered by
position. The later stops (cost, exactness, editing, both runs) are components/tour/later_stops.py; components/tour/material.py
loads the material and assembles the tour.
"""
from __future__ import annotations

import html
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from s2d2.trace import StepRecord, Trace

from components.views.canvas import visible_text
from components.views.describe import decision_line
from components.views.attention_mask import pick_forward, row_positions
from components.tour.tau_control import can_move, tau_range
from components.views.story import Story
from components.views.trace_index import fmt, index_of
from components.views.plural import plural

HOVER = '<span class="on-hover">hover over</span><span class="on-touch">tap</span>'
SHORT = {"draft": "Draft", "route": "Route", "verify": "Verify", "reject": "Accept / reject", "resample": "Resample",
         "skip": "Skip", "calibration": "Calibration", "cost": "Cost", "exact": "Exactness", "edit": "Self-correct",
         "pipeline": "Pipeline", "run": "Both runs"}
# The order the pictures stand in: routing first, so on a phone the plot sits right under the route stop's τ_score
# slider that drives it (the canvas below it).
# The verification table before the attention mask: the verify stop's words are about q next to p first, the mask
# (how one forward gives every q) second.
KINDS = ("routing", "canvas", "strip", "residual", "mask", "calibration", "ledger", "exact", "lockstep", "lifecycle")
# The core story (about five minutes); the stops after it go deeper and are marked so.
CORE = ("draft", "route", "verify", "reject", "resample", "skip")


@dataclass(frozen=True)
class Pic:
    """One picture of a stop: its kind (KINDS), how much it reveals, the position it rings."""

    kind: str
    reveal: str = ""  # strip: q | test | all; canvas: "draft" (before the step commits) or "" (after)
    at: Optional[int] = None  # the position the text names (ringed / outlined / scrolled to)
    also: tuple[int, ...] = ()  # more positions ringed on the canvas
    names: str = ""  # the words of the stop's text that point at this picture (the first picture's come first)


@dataclass(frozen=True)
class Stop:
    key: str  # SHORT's keys
    title: str
    text: str  # Markdown (may hold the hover/tap spans)
    step: int  # scrubber value of the stop's trace it shows (state after this many steps)
    pictures: tuple[Pic, ...]
    trace: str = "main"  # which material trace it draws: main | edit | lossless
    example: Optional[str] = None  # the example "Show in Replay" opens (None: the stop has none to open)
    own_story: bool = False  # the opening run's own story beyond S2D2's (its self-correction, its pipeline): core

    @property
    def label(self) -> str:
        """The short name under the walkthrough's numbered circle."""
        return SHORT.get(self.key, self.title)

    @property
    def kinds(self) -> tuple[str, ...]:
        return tuple(p.kind for p in self.pictures)

    @property
    def deeper(self) -> bool:
        """Past the core story: a stop for the learner who wants more (its heading says so). An edit or pipeline
        stop on the opening run itself (a self-correcting or D2F example) is that run's story, so it is core."""
        return self.key not in CORE and not self.own_story


@dataclass
class TourMaterial:
    """The traces the tour draws: the opening run and its partner, and the shipped runs for the later stops."""

    trace: Trace
    label: Optional[str] = None  # the opening example's label
    baseline: Optional[Trace] = None
    story: Optional[Story] = None
    lossless: Optional[Trace] = None  # the AR-exact S2D2 run on the opening question (assets/traces/tour/)
    ar: Optional[Trace] = None  # greedy AR on the same question
    exact_result: Optional[dict[str, Any]] = None  # benchmarks/exactness.py's summary
    edit: Optional[Trace] = None  # a run that edits (the opening one when it does)
    edit_label: Optional[str] = None
    extra: dict[str, Any] = field(default_factory=dict)

    def get(self, name: str) -> Optional[Trace]:
        return {"main": self.trace, "edit": self.edit, "lossless": self.lossless,
                "pipeline": self.extra.get("pipeline")}.get(name)


def first_step(trace: Trace, pred: Callable[[StepRecord], bool]) -> Optional[StepRecord]:
    return next((s for s in trace.steps if pred(s)), None)


def code(text: str) -> str:
    return "`" + visible_text(text, 16).replace("`", "ˋ") + "`"


def focus_step(trace: Trace) -> Optional[StepRecord]:
    """The step the tour is about: the first verifier rejection with a resample, else the first verify, else the
    first step that drafts."""
    return (first_step(trace, lambda s: s.verification is not None and s.verification.first_reject is not None
                       and s.verification.resampled is not None)
            or first_step(trace, lambda s: s.verification is not None)
            or first_step(trace, lambda s: bool(s.drafts)))


def rejected_position(rec: StepRecord) -> Optional[int]:
    v = rec.verification
    if v is None or v.first_reject is None or v.first_reject >= len(v.positions):
        return None
    return v.positions[v.first_reject].position


def core_stops(m: TourMaterial) -> list[Stop]:
    """Draft, route, verify, accept/reject, resample and skip for the material's opening run ([] without a step
    that drafts)."""
    f = focus_step(m.trace)
    if f is None:
        return []
    n = f.index + 1
    at = rejected_position(f)
    stops = [_draft_stop(m, f, n, at)]
    route = _route_stop(m, f, n, at)
    if route is not None:
        stops.append(route)
    stops += _verification_stops(m, f, n, at)
    skip = _skip_stop(m)
    return stops + ([skip] if skip is not None else [])


def symbols(summary: str, body: str) -> str:
    """The symbols of a stop one tap away, after its words: a closed <details> (as Replay's "The numbers")."""
    return f'\n\n<details class="symbols"><summary>{summary}</summary>\n\n{body}\n\n</details>'


def _draft_stop(m: TourMaterial, f: StepRecord, n: int, at: Optional[int]) -> Stop:
    idx = index_of(m.trace)
    watch = ""
    if at is not None:
        d = idx.draft(f, at)
        watch = (f" Watch position {at} (ringed): the draft there is {code(d.text)} with p = {fmt(d.p)}, a confident "
                 "guess." if d is not None else "")
    return Stop("draft", "Draft", (
        f"At step {n} (answer block {idx.answer_block(f.block)}) the model fills **every masked position of the "
        f"block at once**: one *draft* forward (one pass of the model over the text) in diffusion mode. In the block "
        f"below, the {plural(len(f.drafts), 'draft')} "
        f"(italic, **?**) are proposals, nothing is committed yet. Each comes with its draft probability **p**, how "
        f"sure the drafter is; {HOVER} a token to see it.{watch}"), n,
        (Pic("canvas", "draft", at, names="In the block below"),), example=m.label)


def _route_stop(m: TourMaterial, f: StepRecord, n: int, at: Optional[int]) -> Optional[Stop]:
    if f.decision is None or f.policy_inputs is None:
        return None
    pi, cfg = f.policy_inputs, m.trace.header.config
    threshold = cfg.get("policy") == "score_threshold" and isinstance(cfg.get("score_threshold"), (int, float))
    bar = (f" **τ_score** is the bar that score must clear for a step to check (this run sets it at "
           f"{cfg['score_threshold']:g})." if threshold else "")
    verdict = "check" if f.decision.verify else "skip the check"
    text = ("A check costs one more forward, so before paying for it S2D2 **guesses how many drafts a check would "
            "keep**. The plot below has that guess, turned into a score, for every step"
            + (", against the bar it must clear (dashed red)" if threshold else "") + "; the vertical line is this "
            "step. The guess reads the unbroken run of masked positions at the front of the block "
            f"({pi.span_len} here) and how sure the drafter was along it: the surer, the more drafts it expects to "
            f"survive (about {fmt(pi.k_hat, 2)} here). {_cost_words(cfg)}{bar} At step {n} the answer is: "
            f"**{verdict}**.")
    text += symbols("The symbols (K̂, αᵢ, s)", (
        f"The expected number kept is K̂ = Σₖ Πᵢ≤ₖ αᵢ over the span, where {_alpha_words(cfg)} Here K̂ = "
        f"{fmt(pi.k_hat, 2)} and the decision reads **{html.escape(decision_line(f.decision))}**."
        + (_bar_as_guess(cfg) if threshold else "")))
    if can_move(m.trace):
        text += "\n\n" + _what_to_try(m.trace)
    return Stop("route", "Span and routing", text, n,
                (Pic("routing", names="The plot below"), Pic("canvas", "draft", at, names="the front of the block")),
                example=m.label)


def _alpha_words(cfg: dict[str, Any]) -> str:
    """What αᵢ is for the run's estimator: the paper configs' negexp in full, any other by name."""
    beta = cfg.get("negexp_beta")
    if cfg.get("estimator") == "soft_entropy_negexp" and isinstance(beta, (int, float)):
        b = "" if beta == 1 else f"{beta:g}·"
        return (f"αᵢ = exp(−{b}H̃ᵢ) is how sure the drafter is at span position i (H̃ᵢ its entropy divided by ln V: 0 "
                f"for certain, 1 for uniform, so αᵢ runs from {math.exp(-beta):.2f} to 1).")
    return f"αᵢ is how sure the drafter is at span position i, by the run's estimator ({cfg.get('estimator')})."


def _bar_as_guess(cfg: dict[str, Any]) -> str:
    """The bar said as the guess it takes, where the cost is fixed ("… a step checks when K̂ ≥ 2.5"), behind the
    symbols' tap: other screens name the same run by that form (describe.routing_words), and both must read as one
    rule."""
    cost = cfg.get("penalty_coef")
    if cfg.get("score_type") != "difference_static" or not isinstance(cost, (int, float)):
        return ""
    return (f" With a fixed cost of {cost:g}, τ_score = {cfg['score_threshold']:g} means a step checks when "
            f"K̂ ≥ {cfg['score_threshold'] + cost:g}, the form Compare and the last stop name this run by.")


def _cost_words(cfg: dict[str, Any]) -> str:
    """How the score is made from the guess, in words (the score is K̂ − c, or K̂ − c·N_hi)."""
    if cfg.get("score_type") == "difference_dynamic":
        return ("The score is the guess less a cost for every draft already sure enough to be kept without a check "
                "(p above τ_conf).")
    return "The score is the guess less a fixed cost for the extra forward."


def _what_to_try(trace: Trace) -> str:
    """Which way to drag τ_score to flip a recorded decision, from the recorded scores."""
    verified = [s.decision.score for s in trace.steps if s.decision is not None and s.decision.verify
                and isinstance(s.decision.score, float)]
    skipped = [s.decision.score for s in trace.steps if s.decision is not None and not s.decision.verify
               and isinstance(s.decision.score, float)]
    lo, hi = tau_range(trace)
    hints = []  # thresholds printed so that the claim holds at the printed value (2 decimals, rounded outwards)
    if verified:
        low = min(verified)
        above = math.ceil(low * 100) / 100
        above = above if above > low else above + 0.01  # (verify iff s ≥ τ: τ must pass s itself)
        hints.append(f"raise it to {above:.2f} or above (the lowest score that verified is "
                     f"{_exact(low)}) and a verify step turns into a skip")
    if skipped:
        high = max(skipped)
        below = math.floor(high * 100) / 100
        hints.append(f"lower it to {below:.2f} or below (the highest score that skipped is "
                     f"{_exact(high)}) and a skip turns into a verify")
    how = "; ".join(hints) or "move it"
    span = f"{lo:g} to {hi:g}".replace("-", "−")
    return (f"*What to try:* the **τ_score** slider below ({span}) re-decides the recorded steps: {how}. "
            "The re-decision is exact up to the first step that flips; after it the run would differ.")


def _exact(score: float) -> str:
    """A score beside a threshold on the 0.01 grid, to 4 decimals: 0.9997 must not print as 1.00, which a reader
    would try as τ_score and see nothing flip."""
    return f"{score:.4f}".replace("-", "−")


def verify_row(trace: Trace, step: int, at: int) -> Optional[int]:
    """The mask-viewer row of `at`'s MASK copy in the step's 2L verify forward (the row that gives q there)."""
    f = pick_forward(trace, step, "verify")
    if f is None or f.kind != "verify_2l":
        return None
    rows = row_positions(f)
    hits = [i for i, pos in enumerate(rows) if pos == at]
    return hits[1] if len(hits) == 2 else None


def _passed(accepted: int) -> str:
    """How many of the span's first drafts passed their test, in words that agree with the count."""
    if accepted == 0:
        return "no draft passes"
    return "the first draft passes" if accepted == 1 else f"the first {plural(accepted, 'draft')} pass"


def _verification_stops(m: TourMaterial, f: StepRecord, n: int, at: Optional[int]) -> list[Stop]:
    """Verify, then accept/reject and residual resampling when the focus step has a rejection."""
    stops: list[Stop] = []
    v = f.verification
    rej = v.positions[v.first_reject] if v is not None and at is not None and v.first_reject is not None else None
    if v is None:
        return stops
    row = verify_row(m.trace, n, at) if at is not None else None
    where = ""
    if rej is not None:
        where = (f" At position {rej.position} (the outlined column) the drafter was sure, p = {fmt(rej.p)}, but the "
                 f"verifier gives q = {fmt(rej.q, 5)}: it finds {code(rej.draft_text)} very unlikely there.")
    outlined = (f" The outlined row {row} of the mask is the MASK copy of position {at}: it sees the cache, the "
                "drafts before it and itself." if row is not None else "")
    stops.append(Stop("verify", "Verify with the same model", (
        "To check the drafts, the **same model reads them again left to right**, the way an ordinary "
        "(autoregressive) language model reads: at each position it asks how likely the draft there is, given only "
        "the drafts before it. That probability is **q**, the verifier's; the table below sets it next to **p**, "
        f"the drafter's. All positions are checked in **one** forward: the picture under the table shows how."
        f"{where}" + symbols(
            "How one forward checks every position (2L, MASK copies)",
            "The forward gets the block twice (2L tokens): the drafts, then a copy made of MASK tokens at the same "
            "positions. In the mask picture (drafts | MASK copies, rows and columns numbered alike) each MASK copy "
            "sees the cache, the drafts strictly before it and itself, so its row is one left-to-right step for its "
            f"position: all of them in one forward.{outlined}")), n,
        (Pic("strip", "q", at, names="the table below"), Pic("mask", at=at, names="the picture under the table")),
        example=m.label))
    if rej is None:
        return stops
    u = f"u = {fmt(rej.u)}" if rej.u is not None else "argmax q differs"
    stops.append(Stop("reject", "Accept or reject", (
        "In the table below each draft now faces a test: it passes if a random draw u falls below **r = min(1, q/p)** "
        "(on the r bar, the green part is r and the black tick is u: a tick inside the green passes). A draft the "
        "verifier likes at least as much as the drafter did (q ≥ p, so r = 1) always passes. "
        f"Here {_passed(v.accepted_len)}; the draft {code(rej.draft_text)} has "
        f"r = {fmt(rej.ratio, 5)} and {u}: **rejected** (the orange column). **Everything after it is thrown away**, "
        "even drafts that passed their own test: each was drafted, and checked, with the rejected token in front of "
        "it. That token is about to be replaced, so what came after it was built on a token that will not be there."),
        n, (Pic("strip", "test", rej.position, names="In the table below"),), example=m.label))
    if v.resampled is None:
        return stops
    source = ("q itself (the residual was empty)" if v.fallback_to_q else
              "the residual (q − p)+, renormalised: the tokens the verifier likes more than the drafter did")
    stops.append(Stop("resample", "Residual resampling", (
        f"The rejected position is not wasted: in the block below a new token is drawn there, {code(v.resampled_text)} "
        f"(↻, the rejected {code(rej.draft_text)} struck through), from {source}. Step {n} commits "
        f"{plural(v.accepted_len, 'accepted draft')} + 1 resampled token for 2 forwards "
        "(draft + verify). The bars under the table show why the rule is right: a token comes out by acceptance with "
        "probability min(p, q) and by the redraw with (q − p)+, which add up to q."),
        n, (Pic("canvas", "", rej.position, names="in the block below"), Pic("strip", "all", rej.position),
            Pic("residual", at=rej.position, names="The bars under the table")), example=m.label))
    return stops


def _kept_words(cfg: dict[str, Any]) -> str:
    """What a step that does not check keeps, in words: τ_conf's job under the dynamic remasking rule."""
    tau = cfg.get("confidence_threshold")
    if cfg.get("remasking") != "low_confidence_dynamic" or not isinstance(tau, (int, float)):
        return f"Which drafts it keeps is decided by the run's remasking rule ({cfg.get('remasking')})."
    return (f"Which drafts it keeps is decided by a second threshold, **τ_conf** (this run: {tau:g}): every draft "
            "whose p is above it (▲), or if there is none, the single most confident draft (•). So τ_score decides "
            "*whether* a step checks; τ_conf decides *what* a step that does not check keeps.")


def _skip_stop(m: TourMaterial) -> Optional[Stop]:
    skip = first_step(m.trace, lambda s: s.decision is not None and not s.decision.verify)
    if skip is None:
        return None
    k = skip.index + 1
    cfg = m.trace.header.config
    short = f"step {k}'s score falls short of the bar: " if cfg.get("policy") == "score_threshold" else ""
    return Stop("skip", "Skipping verification", (
        f"On the plot below, {short}the policy said **skip**, so step {k} is a plain diffusion step with no check. "
        f"{_kept_words(cfg)} {plural(len(skip.commits), 'token')} for 1 forward (ringed in the block). Cheap, but not "
        "checked."
        + symbols("The decision in symbols", html.escape(decision_line(skip.decision)))), k,
        (Pic("routing", names="On the plot below"),
         Pic("canvas", "", None, tuple(c.position for c in skip.commits), names="ringed in the block")),
        example=m.label)
