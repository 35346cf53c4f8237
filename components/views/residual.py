"""The residual-resample picture at a rejected position (docs/algorithm.md, 'Acceptance, first rejection and the
residual'): p, q and (q − p)+ / Z over the top candidates, and the draw u against r = min(1, q/p).

It shows why "accept with probability min(1, q/p), else draw from the renormalised residual" gives an exact sample
of the verifier when the draft was sampled from p: P(x) = p(x)·min(1, q(x)/p(x)) + P(reject)·(q(x) − p(x))+ / Z
= min(p, q) + (q − p)+ = q(x), because P(reject) = 1 − Σ min(p, q) = Σ (q − p)+ = Z.

Honest about truncation: a trace keeps only the top-k of p (the draft's candidates) and of q (the verifier's), so a
token in one list but not the other has a bound, not a value (it is at most the smallest kept probability), and the
mass outside the bars is printed. Z is the recorded full-vocabulary residual mass. Pure: `residual_data` builds
plain lists from a step record, `residual_html` draws them as escaped HTML (no model, no Plotly).
"""
from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Optional

from s2d2.trace import StepRecord, Trace

from components.views.canvas import visible_text
from components.views.swipe_hint import swipe_hint
from components.views.trace_index import clamp_step, fmt, fmt_prob, index_of

MAX_BARS = 8


@dataclass(frozen=True)
class Bar:
    token: int
    text: str
    p: Optional[float]  # None: not among the drafter's kept candidates (then p <= p_floor)
    q: Optional[float]  # None: not among the verifier's kept candidates (then q <= q_floor)
    residual_lo: float  # (q − p)+ / Z, or its lower bound when p or q is only bounded
    residual_hi: float  # equal to residual_lo when both p and q are known
    is_draft: bool
    is_drawn: bool


@dataclass(frozen=True)
class ResidualData:
    step: int  # scrubber value of the step (its index + 1)
    position: int
    mode: str
    draft_text: str
    drawn_text: str  # the resampled token
    p: float  # p(x0), q(x0), r and u of the rejected draft (as recorded)
    q: float
    ratio: float
    u: Optional[float]
    z: Optional[float]  # recorded residual mass Σ (q − p)+ over the whole vocabulary
    fallback_to_q: bool
    sampled_draft: bool  # drafts sampled from p with ratio γ = 1: the result is an exact sample of q
    bars: list[Bar]
    p_kept: int  # how many candidates of p and of q the trace kept
    q_kept: int
    p_outside: float  # probability mass outside the kept candidates
    q_outside: float
    residual_outside_hi: float  # at most this much of the renormalised residual lies outside the bars


def rejected_step(trace: Trace, step: int, selected: Optional[int] = None) -> Optional[StepRecord]:
    """The step whose residual draw to show at scrubber value `step`: the step that resampled the `selected`
    position (once it has happened), else the current step when its verifier rejected a draft and resampled it."""
    idx = index_of(trace)
    hit = idx.commit_of.get(selected) if selected is not None else None
    if hit is not None and hit[1].how == "resampled" and hit[0] < clamp_step(trace, step):
        rec: Optional[StepRecord] = trace.steps[hit[0]]
    else:
        rec = idx.step_record(clamp_step(trace, step))
    v = rec.verification if rec is not None else None
    if v is None or v.first_reject is None or v.resampled is None:
        return None
    return rec


def residual_data(trace: Trace, rec: StepRecord) -> Optional[ResidualData]:
    """The bars at `rec`'s first rejection (None when the step rejected nothing or recorded no candidates)."""
    v = rec.verification
    if v is None or v.first_reject is None or v.resampled is None or v.first_reject >= len(v.positions):
        return None  # nothing rejected, or a lean trace (no verification rows)
    row = v.positions[v.first_reject]
    draft = next((d for d in rec.drafts if d.position == row.position), None)
    top_p = {c.token: c for c in draft.top} if draft is not None else {}
    top_q = {c.token: c for c in row.top_q}
    if not top_p or not top_q:
        return None
    p_floor = min(c.prob for c in top_p.values())
    q_floor = min(c.prob for c in top_q.values())
    z = v.residual_mass if v.residual_mass and v.residual_mass > 0 else None
    tokens = list(dict.fromkeys([*top_q, *top_p, row.draft, v.resampled]))
    bars = []
    for tok in tokens:
        p = top_p[tok].prob if tok in top_p else (row.p if tok == row.draft else None)
        q = top_q[tok].prob if tok in top_q else (row.q if tok == row.draft else None)
        text = (top_q.get(tok) or top_p.get(tok)).text if tok in top_q or tok in top_p else (
            row.draft_text if tok == row.draft else v.resampled_text)
        lo, hi = _residual_bounds(p, q, p_floor, q_floor)
        scale = 1.0 / z if z else 0.0
        bars.append(Bar(tok, text, p, q, lo * scale, hi * scale, tok == row.draft, tok == v.resampled))
    bars.sort(key=lambda b: -max(b.p or 0.0, b.q or 0.0, b.residual_hi))
    keep = bars[:MAX_BARS]
    for must in (b for b in bars if (b.is_draft or b.is_drawn) and b not in keep):
        keep[-1] = must  # the draft and the drawn token are always shown
    cfg = trace.header.config
    sampled = v.mode != "greedy_exact" and float(cfg.get("temperature") or 0.0) > 0 and \
        float(cfg.get("ratio_gamma", 1.0)) == 1.0
    return ResidualData(
        step=rec.index + 1, position=row.position, mode=v.mode, draft_text=row.draft_text,
        drawn_text=v.resampled_text, p=row.p, q=row.q, ratio=row.ratio, u=row.u, z=z, fallback_to_q=v.fallback_to_q,
        sampled_draft=sampled, bars=keep, p_kept=len(top_p), q_kept=len(top_q),
        p_outside=max(0.0, 1.0 - sum(c.prob for c in top_p.values())),
        q_outside=max(0.0, 1.0 - sum(c.prob for c in top_q.values())),
        residual_outside_hi=max(0.0, 1.0 - sum(b.residual_lo for b in keep)) if z else 0.0)


def _residual_bounds(p: Optional[float], q: Optional[float], p_floor: float, q_floor: float) -> tuple[float, float]:
    """(q − p)+ when both are known; its range when p (at most p_floor) or q (at most q_floor) is only bounded."""
    if p is not None and q is not None:
        value = max(0.0, q - p)
        return value, value
    if q is not None:  # p in [0, p_floor]
        return max(0.0, q - p_floor), q
    if p is not None:  # q in [0, q_floor]
        return 0.0, max(0.0, q_floor - p)
    return 0.0, q_floor


# -- drawing -------------------------------------------------------------------------------------------------------

def _bar(value: Optional[float], hi: Optional[float], cls: str, floor: float, kept: int) -> str:
    if value is None:  # bounded only: an empty track with the bound
        return (f'<div class="rs-track" title="not among the top {kept}: at most {fmt_prob(floor)}">'
                f'<span class="rs-bound" style="width:{_pct(floor)}%"></span></div>'
                f'<span class="rs-num">≤ {fmt_prob(floor)}</span>')
    band = "" if hi is None or hi <= value else (
        f'<span class="rs-bound" style="left:{_pct(value)}%;width:{_pct(hi - value)}%"></span>')
    num = fmt_prob(value) if hi is None or hi <= value else (
        f"≤ {fmt_prob(hi)}" if value == 0 else f"{fmt_prob(value)}–{fmt_prob(hi)}")
    return (f'<div class="rs-track"><span class="rs-fill {cls}" style="width:{_pct(value)}%"></span>{band}</div>'
            f'<span class="rs-num">{num}</span>')


def _pct(value: float) -> str:
    return f"{max(0.0, min(1.0, value)) * 100:.1f}"


def _label(b: Bar) -> str:
    tag = " <small>draft ✗</small>" if b.is_draft else (" <small>drawn ↻</small>" if b.is_drawn else "")
    return f"<code>{html.escape(visible_text(b.text, 16))}</code>{tag}"


def residual_rows(data: ResidualData) -> str:
    """The candidate table: one row per token, bars for p, q and the renormalised residual."""
    p_floor = min((b.p for b in data.bars if b.p is not None), default=0.0)
    q_floor = min((b.q for b in data.bars if b.q is not None), default=0.0)
    rows = []
    for b in data.bars:
        cls = ' class="drawn"' if b.is_drawn else (' class="draft"' if b.is_draft else "")
        res = _bar(b.residual_lo, b.residual_hi, "res", 0.0, 0) if data.z else '<span class="rs-num">–</span>'
        rows.append(f'<tr{cls} data-token="{b.token}"><th scope="row">{_label(b)}</th>'
                    f'<td>{_bar(b.p, None, "p", p_floor, data.p_kept)}</td>'
                    f'<td>{_bar(b.q, None, "q", q_floor, data.q_kept)}</td><td>{res}</td></tr>')
    head = ('<tr><th scope="col">token</th><th scope="col">p: drafter</th><th scope="col">q: verifier</th>'
            '<th scope="col">(q − p)+ / Z</th></tr>')
    return f'{swipe_hint()}<div class="rs-tbl"><table>{head}{"".join(rows)}</table></div>'


def test_line(data: ResidualData) -> str:
    """u against r on one [0, 1] track: the accept region [0, r) green, the tick at u."""
    if data.u is None:  # greedy_exact: no draw
        return (f'<p class="rs-test">greedy_exact: the draft <code>{html.escape(visible_text(data.draft_text))}'
                "</code> is not the verifier's argmax, so it is rejected and replaced by argmax q.</p>")
    tick = f'<span class="u" style="left:{_pct(data.u)}%"></span>'
    return (f'<div class="rs-test"><div class="rs-line" role="img" aria-label="u against r">'
            f'<span class="acc" style="width:{_pct(data.ratio)}%"></span>{tick}</div>'
            f"<p>u = {fmt(data.u)} ≥ r = min(1, q/p) = {fmt_prob(data.ratio, 5)} → <b>reject</b> (accept only when "
            "u lands in the green part, of width r)</p></div>")


def caption(data: ResidualData) -> str:
    """What the picture says, every number from the trace: the draw, the truncation, the exactness argument."""
    e = html.escape
    where = f"position {data.position}, step {data.step}"
    if data.fallback_to_q:
        drawn = "the residual (q − p)+ was empty there, so the token was drawn from q itself"
    elif data.mode == "greedy_exact":
        drawn = "greedy_exact replaces it by the verifier's argmax"
    else:
        drawn = f"a new token was drawn from (q − p)+ renormalised by Z = {fmt(data.z)}"
    lines = [f"At {where} the draft <code>{e(visible_text(data.draft_text))}</code> had p = {fmt_prob(data.p)} but "
             f"q = {fmt_prob(data.q, 5)}: rejected, and {drawn}: <code>{e(visible_text(data.drawn_text))}</code>."]
    if data.mode != "greedy_exact":
        claim = ("This run samples its drafts from p, so the token that comes out is an exact sample of q"
                 if data.sampled_draft else
                 "This run drafts greedily (always p's most likely token), so the token kept here does not follow "
                 "q's odds exactly; had the drafts been drawn at random from p, the same accept-or-redraw rule would "
                 "give an exact sample of q (as if the verifier had picked the token itself)")
        lines.append(f"{claim}: a token x comes out with probability min(p, q) by acceptance plus Z · (q − p)+/Z "
                     "by the redraw, i.e. min(p, q) + (q − p)+ = q(x).")
    drawn = next((b for b in data.bars if b.is_drawn), None)
    if data.mode != "greedy_exact" and data.z and drawn is not None and drawn.p is not None and drawn.q is not None:
        lines.append(f"Check at <code>{e(visible_text(drawn.text))}</code>: min(p, q) = {fmt_prob(min(drawn.p, drawn.q))}"
                     f" and (q − p)+ = {fmt_prob(max(0.0, drawn.q - drawn.p))} add up to q = {fmt_prob(drawn.q)}.")
    lines.append(f"The bars show the drafter's top {data.p_kept} and the verifier's top {data.q_kept} candidates "
                 f"(the trace keeps no more); outside them lie p-mass {fmt_prob(data.p_outside)} and q-mass "
                 f"{fmt_prob(data.q_outside)}" + (f", and at most {fmt_prob(data.residual_outside_hi)} of the "
                                                  "renormalised residual" if data.z else "")
                 + ". “≤” marks a token outside one list: only a bound is known.")
    return "".join(f"<p>{line}</p>" for line in lines)


def residual_html(trace: Trace, step: int, selected: Optional[int] = None) -> str:
    """The whole picture for scrubber value `step` ("" when there is no rejected, resampled position to show)."""
    rec = rejected_step(trace, step, selected)
    data = residual_data(trace, rec) if rec is not None else None
    if data is None:
        return ""
    return (f'<div class="s2d2-residual" data-position="{data.position}"><h4>Why ↻: the residual draw at position '
            f"{data.position}</h4>{test_line(data)}{residual_rows(data)}{caption(data)}</div>")


RESIDUAL_CSS = """
.s2d2-residual{border:1px solid #e5e7eb;border-radius:6px;padding:6px 10px;margin-top:6px;font-size:.9em}
.s2d2-residual h4{margin:2px 0 6px 0}
.s2d2-residual p{margin:4px 0}
.s2d2-residual .rs-tbl{overflow-x:auto;max-width:100%}
.s2d2-residual table{border-collapse:collapse}
.s2d2-residual th,.s2d2-residual td{padding:2px 6px;text-align:left;white-space:nowrap}
.s2d2-residual tr.drawn th{background:#fed7aa}.s2d2-residual tr.draft th{background:#fee2e2}
.s2d2-residual .rs-track{display:inline-block;position:relative;width:90px;height:10px;background:#f1f5f9;
  vertical-align:middle;border-radius:2px}
.s2d2-residual .rs-fill{position:absolute;left:0;top:0;bottom:0;border-radius:2px}
.s2d2-residual .rs-fill.p{background:#60a5fa}.s2d2-residual .rs-fill.q{background:#f97316}
.s2d2-residual .rs-fill.res{background:#16a34a}
.s2d2-residual .rs-bound{position:absolute;top:0;bottom:0;background:repeating-linear-gradient(45deg,#cbd5e1 0 2px,
  transparent 2px 4px)}
.s2d2-residual .rs-num{font-family:ui-monospace,monospace;font-size:.85em;margin-left:4px}
.s2d2-residual .rs-line{position:relative;height:12px;background:#fecaca;border-radius:2px;max-width:360px}
.s2d2-residual .rs-line .acc{position:absolute;left:0;top:0;bottom:0;background:#22c55e;min-width:1px}
.s2d2-residual .rs-line .u{position:absolute;top:-3px;width:2px;height:18px;background:#111}
@media (max-width: 640px){.s2d2-residual .rs-track{width:44px}.s2d2-residual th,.s2d2-residual td{padding:2px 3px}}
"""
