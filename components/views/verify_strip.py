"""The verification strip (paper figure, panel b) as an escaped HTML table, plus its plain-data rows."""
from __future__ import annotations

import html
from typing import Any, Optional

from s2d2.trace import StepRecord, Trace

from components.views.canvas import visible_text
from components.views.describe import decision_line
from components.views.focus import focus_attr
from components.views.trace_index import clamp_step, fmt, fmt_prob, index_of
from components.views.plural import plural


def strip_rows(step: StepRecord) -> list[dict[str, Any]]:
    """One dict per verified span position (what the table shows), in span order."""
    v = step.verification
    if v is None:
        return []
    rows = []
    drafts = {d.position: d for d in step.drafts}
    for i, r in enumerate(v.positions):
        d = drafts.get(r.position)
        # Acceptance stops at the first rejection: later positions are discarded whatever their own test says.
        after = v.first_reject is not None and i > v.first_reject
        outcome = "after" if after else ("accept" if r.accepted else "reject")
        rows.append({
            "span_index": i, "position": r.position, "draft": r.draft_text, "p": r.p, "q": r.q, "ratio": r.ratio,
            "u": r.u, "outcome": outcome, "passed": r.accepted, "first_reject": v.first_reject == i,
            "resampled": v.resampled_text if v.first_reject == i and v.resampled is not None else None,
            "argmax_q": r.argmax_q_text,
            "top_p": [(c.text, c.prob) for c in d.top] if d else [],
            "top_q": [(c.text, c.prob) for c in r.top_q],
        })
    return rows


def _top(cands: list[tuple[str, float]]) -> str:
    """A candidate list's tooltip: those above probability 0 (a token cut by top-k or top-p is recorded with 0)."""
    return html.escape(", ".join(f"'{visible_text(t, 16)}' {p:.3f}" for t, p in cands[:8] if p > 0), quote=True)


def _bar(ratio: float, u: float | None) -> str:
    width = max(0.0, min(1.0, ratio)) * 100
    tick = "" if u is None else (f'<span class="u" style="left:{max(0.0, min(1.0, u)) * 100:.1f}%" '
                                 f'title="u = {u:.3f}"></span>')
    return (f'<div class="rbar" role="img" aria-label="r {ratio:.2f}">'
            f'<span class="r" style="width:{width:.1f}%"></span>{tick}</div>')


def _mark(r: dict[str, Any], reveal: str = "all", watch: Optional[int] = None) -> str:
    """Once the test is shown, the first rejected column stands out (the moment the verifier catches a draft) and
    the discarded ones fade; the column of the position a text names (`watch`) is outlined and marked for the
    scroll-into-view script."""
    classes = []
    if reveal != "q":
        classes += ["first-reject"] if r["first_reject"] else (["discarded"] if r["outcome"] == "after" else [])
    if watch is not None and r["position"] == watch:
        classes.append("watch")
    return (f' class="{" ".join(classes)}"' if classes else "") + (' data-watch="1"' if "watch" in classes else "")


def _outcome(r: dict[str, Any]) -> str:
    if r["outcome"] == "accept":
        return '<span class="ok">✓ accept</span>'
    if r["outcome"] == "reject":
        return '<span class="bad">✗ reject' + (" (first)" if r["first_reject"] else "") + "</span>"
    test = "u &lt; r" if r["passed"] else "u ≥ r"
    return f'<span class="after" title="after the first rejection: discarded">– after ✗ ({test})</span>'


# each mode's acceptance test (docs/algorithm.md, "Acceptance modes and AR-exactness") in a newcomer's words
MODE_WORDS = {"paper": "a draft passes when its draw u < r", "sampled": "a draft passes when its draw u < r",
              "greedy_exact": "a draft passes if it is the verifier's first choice"}  # (r: the table's row)


def summary_line(step: StepRecord) -> str:
    v = step.verification
    if v is None:
        # reprinted with the digits that decide it: the recorded reason rounds ("-0.00 < τ 0.00" for -0.0001 < 0)
        reason = decision_line(step.decision) if step.decision else "this method never verifies"
        hows = sorted({c.how for c in step.commits})
        return f"No verification at this step ({reason}); committed {len(step.commits)} by {', '.join(hows) or '–'}."
    n = len(v.positions) or step.span[1]
    text = f"{v.kind.upper()} verifier, {MODE_WORDS.get(v.mode, v.mode)}: accepted {v.accepted_len} of {n} verified"
    if v.first_reject is None:
        return text + " — the whole span passed (nothing is added past it: this verifier predicts no extra token)."
    text += f"; first rejection at i = {v.first_reject} ({_nth(v.first_reject)} draft checked)"
    if v.resampled is not None:
        if v.fallback_to_q:
            text += f"; residual mass 0, so drawn from q: '{visible_text(v.resampled_text)}'"
        elif v.mode == "greedy_exact":
            text += f"; replaced by argmax q: '{visible_text(v.resampled_text)}'"
        else:
            z = f" (Z = {fmt(v.residual_mass)})" if v.residual_mass is not None else ""
            text += f"; resampled '{visible_text(v.resampled_text)}' from (q − p)+{z}"
    else:
        text += "; the rejected position is left to the fallback"
    return text + "." + cut_sentence(step)


def cut_sentence(step: StepRecord) -> str:
    """Why the positions after the first rejection are thrown away even where u < r (row 13 of issue 17)."""
    v = step.verification
    if v is None or v.first_reject is None or v.first_reject + 1 >= len(v.positions):
        return ""
    f, last = v.first_reject, len(v.positions) - 1
    which = f"i = {f + 1}" if f + 1 == last else f"i = {f + 1}–{last}"
    rejected = visible_text(v.positions[f].draft_text)
    return (f" ✂ Everything after the first rejection ({which}) is discarded, whatever its own test says: those "
            f"drafts were checked in the context of '{rejected}' at i = {f}, and '{rejected}' is gone.")


REVEALS = ("q", "test", "all")  # how much of the strip a tour stop shows: q only, + the test, + what was committed


def _head(rec: StepRecord, reveal: str) -> str:
    """The line above the table, saying no more than the rows below it show."""
    v = rec.verification
    if reveal == "all" or v is None:
        return summary_line(rec)
    n = len(v.positions) or rec.span[1]
    if reveal == "q":
        return (f"One verifier forward gives q, the verifier's probability of each of the "
                f"{plural(n, 'draft')} (next to p, the drafter's).")
    text = f"{v.kind.upper()} verifier, {MODE_WORDS.get(v.mode, v.mode)}: accepted {v.accepted_len} of {n} verified"
    if v.first_reject is None:
        return text + " — the whole span passed."
    return (text + f"; first rejection at i = {v.first_reject} ({_nth(v.first_reject)} draft checked); the drafts "
            "after it are discarded.")


def _nth(i: int) -> str:
    """The (i + 1)-th in words a reader counts by: "the 1st", "the 2nd", "the 11th"."""
    n = i + 1
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"the {n}{suffix}"


def render_strip(trace: Trace, step: int, reveal: str = "all", watch: Optional[int] = None,
                 focus: Optional[int] = None) -> str:
    """HTML table for the step shown at scrubber value `step` (empty note when it has no verification).
    `reveal` (REVEALS) limits the rows to what a tour stop has explained; `watch` outlines one position's column.
    The column of absolute position `focus` (default: `watch`, else the first rejection) is the one
    components/views/focus.py's FOCUS_JS scrolls into view."""
    idx = index_of(trace)
    rec = idx.step_record(clamp_step(trace, step))
    if rec is None:
        return '<div class="s2d2-strip"><p>Start of the run: move the scrubber to see a step.</p></div>'
    rows = strip_rows(rec)
    reveal = reveal if reveal in REVEALS else "all"
    head = f'<p class="sum">{html.escape(_head(rec, reveal))}</p>'
    if not rows:
        return f'<div class="s2d2-strip">{head}</div>'
    greedy = rec.verification is not None and rec.verification.mode == "greedy_exact"
    e = html.escape
    cols = [f'<th scope="col"{_mark(r, reveal, watch)} data-col="{r["position"]}">i={r["span_index"]}<br><small>'
            f'pos {r["position"]}</small></th>' for r in rows]
    body = [
        ("draft x₀", [_draft_cell(r, reveal) for r in rows]),
        ("p(x₀)", [f'<span title="top p: {_top(r["top_p"])}">{fmt_prob(r["p"])}</span>' for r in rows]),
        ("q(x₀)", [f'<span title="top q: {_top(r["top_q"])}">{fmt_prob(r["q"])}</span>' for r in rows]),
    ]
    if reveal != "q":
        body.append(("r = min(1, q/p)", [f'{fmt_prob(r["ratio"])}{_bar(r["ratio"], r["u"])}' for r in rows]))
        if greedy:
            body.append(("x₀ == argmax q", ["yes" if r["passed"] else "no" for r in rows]))
        else:
            body.append(("draw u", [fmt(r["u"]) for r in rows]))
        body.append(("outcome", [_outcome(r) for r in rows]))
    if reveal == "all":
        body.append(("argmax q", [f'<code>{e(visible_text(r["argmax_q"], 16))}</code>' for r in rows]))
        body.append(("committed", [
            (f'<code>{e(visible_text(r["draft"], 16))}</code> ✓' if r["outcome"] == "accept" else
             (f'↻ <code>{e(visible_text(r["resampled"], 16))}</code>' if r["resampled"] is not None else
              ("discarded" if r["outcome"] == "after" else "masked")))
            for r in rows]))
    trs = "".join(f'<tr><th scope="row">{e(name)}</th>'
                  f'{"".join(f"<td{_mark(r, reveal, watch)}>{c}</td>" for r, c in zip(rows, cells))}</tr>'
                  for name, cells in body)
    first = rec.verification.first_reject if rec.verification is not None else None
    if focus is None:
        focus = watch if watch is not None else (rows[first]["position"] if first is not None and first < len(rows)
                                                 else None)
    cut = _cut_row(rows) if reveal != "q" else ""  # the cut is shown once the test that makes it is
    return (f'<div class="s2d2-strip"{focus_attr(focus)}>{head}{scroll_hint(len(rows))}<div class="tbl">'
            f'<table style="width:{table_px(len(rows))}px"><thead>{cut}<tr><th></th>{"".join(cols)}</tr></thead>'
            f'<tbody>{trs}</tbody>'
            '</table></div></div>')


# Fixed column widths, so the table's width is known before it is drawn: 104 + 58·n px (the table's width is set,
# the label column's too; the fixed layout shares the rest equally among the span's columns). A 16-column span fits at
# 1366 px; where the strip is narrower than its table (a phone), the line above the table says it scrolls: a
# container query that CSS alone decides on every redraw, with no script. It travels in the table's own <style>
# because the app's stylesheet drops @container rules (Gradio re-scopes only style, @media and @keyframes rules),
# and !important because the hiding rule comes back re-scoped, with more weight than this one.
LABEL_PX, COLUMN_PX = 104, 58


def table_px(n: int) -> int:
    """The drawn width of a table of `n` span columns (the label column, the columns, the outer border)."""
    return LABEL_PX + COLUMN_PX * n + 1


def scroll_hint(n: int) -> str:
    """The line saying the table scrolls sideways, shown only while the strip is narrower than the table."""
    last = f"i = 0–{n - 1}" if n > 1 else "i = 0"
    rule = f"@container strip (max-width:{table_px(n) - 1}px){{.s2d2-scroll.n{n}{{display:block!important}}}}"
    return (f"<style>{rule}</style>"
            f'<p class="s2d2-scroll n{n}">↔ The table is wider than the screen: scroll it sideways ({last}).</p>')


def _draft_cell(r: dict[str, Any], reveal: str = "all") -> str:
    code = f'<code>{html.escape(visible_text(r["draft"], 16))}</code>'
    return f"<s>{code}</s>" if r["outcome"] == "after" and reveal != "q" else code


def _cut_row(rows: list[dict[str, Any]]) -> str:
    """A band over the discarded columns, starting at the rejected one: the rejection cuts the rest of the span."""
    first = next((r["span_index"] for r in rows if r["first_reject"]), None)
    if first is None or first + 1 >= len(rows):
        return ""
    n = len(rows) - first - 1
    why = ": checked after a rejected token, so discarded" if n >= 5 else ""  # a narrow band: the line above says why
    return (f'<tr class="cut"><th></th><td colspan="{first + 1}"></td><td colspan="{n}" class="cut-band">'
            f"✂ cut at i = {first}{why}</td></tr>")


STRIP_CSS = """
.s2d2-strip{container:strip/inline-size}
.s2d2-scroll{display:none;margin:2px 0;font-size:.85em;color:#475569}
.s2d2-strip .tbl{overflow-x:auto;max-width:100%;-webkit-overflow-scrolling:touch}
.s2d2-strip table{table-layout:fixed}
.s2d2-strip tr>th:first-child{width:104px}
.s2d2-strip th,.s2d2-strip td{box-sizing:border-box;overflow-wrap:anywhere}
.s2d2-strip tr>th:first-child{position:sticky;left:0;background:#f8fafc;z-index:2;text-align:left;
  box-shadow:1px 0 0 #94a3b8}
.s2d2-strip table{border-collapse:separate;border-spacing:0;font-size:0.85em}
.s2d2-strip td.first-reject,.s2d2-strip th.first-reject{background:#ffedd5;border-left:2px solid #ea580c;
  border-right:2px solid #ea580c}
.s2d2-strip th,.s2d2-strip td{border:0 solid #cbd5e1;border-width:0 1px 1px 0;padding:2px 3px;text-align:center}
.s2d2-strip table{border-top:1px solid #cbd5e1;border-left:1px solid #cbd5e1}
.s2d2-strip .rbar{position:relative;height:8px;width:46px;background:#e2e8f0;margin:2px auto}
.s2d2-strip .rbar .r{position:absolute;left:0;top:0;bottom:0;background:#22c55e}
.s2d2-strip .rbar .u{position:absolute;top:-3px;width:2px;height:14px;background:#111}
.s2d2-strip td.watch,.s2d2-strip th.watch{outline:2px solid #dc2626;outline-offset:-2px}
.s2d2-strip .after{color:#64748b}
.s2d2-strip td.discarded{background:#f8fafc;color:#64748b}
.s2d2-strip tr.cut td{border:none;padding:0 2px}
.s2d2-strip td.cut-band{background:repeating-linear-gradient(135deg,#f1f5f9 0 6px,#e2e8f0 6px 12px);color:#475569;
  font-size:.85em;text-align:left;border-left:3px dashed #ea580c!important}
.s2d2-strip td s code{color:#64748b}
.s2d2-strip .ok{color:#15803d;font-weight:600}.s2d2-strip .bad{color:#c2410c;font-weight:600}
"""
