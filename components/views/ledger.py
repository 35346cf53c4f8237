"""The cost ledger of one or two runs of the same prompt: every forward by kind, with its query tokens, side by side.

A verify forward is one forward, like a draft, but a 2L verify carries 2B query tokens (the drafts and their MASK
copies). The ledger lays each run's forwards out block by block (aligned as in s2d2/compare.py: the runs' blocks
bucketed on one grid), totals them by kind, and lists what every routed step paid and got, so "verification costs
one forward" and "K̂ − c says when it pays" can be read off the recorded run. Everything is counted from the traces.
"""
from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Optional

from s2d2.compare import PREFILL_BLOCK, compare_traces, forward_blocks
from s2d2.trace import FORWARD_KINDS, ForwardRecord, Trace

from components.views.describe import decision_line
from components.views.figures import KIND_COLOURS, KIND_WORDS
from components.views.plural import plural
from components.views.swipe_hint import swipe_hint
from components.views.trace_index import index_of

LETTER = {"prefill": "P", "draft": "D", "verify_2l": "V", "verify_causal": "V", "commit": "C", "ar": "A",
          "commit+draft": "CD", "prefill+draft": "PD"}
MAX_BOXES = 400  # forwards drawn as boxes per run; a longer run shows its totals only


@dataclass(frozen=True)
class KindRow:
    kind: str
    forwards: int
    queries: list[int]  # query tokens per forward of this kind (distinct values, ascending)
    query_total: int


@dataclass(frozen=True)
class LaneLedger:
    name: str
    rows: list[KindRow]  # one per kind the run used, in FORWARD_KINDS order
    forwards: int
    query_total: int
    tokens: int  # generated tokens (after trimming to the answer)


def lane_ledger(name: str, trace: Trace) -> LaneLedger:
    rows = []
    for kind in FORWARD_KINDS:
        fs = [f for f in trace.forwards if f.kind == kind]
        if fs:
            rows.append(KindRow(kind, len(fs), sorted({f.query_tokens for f in fs}), sum(f.query_tokens for f in fs)))
    tokens = trace.footer.generated_length if trace.footer else sum(len(s.commits) for s in trace.steps)
    return LaneLedger(name, rows, len(trace.forwards), sum(f.query_tokens for f in trace.forwards), tokens)


def block_forwards(traces: dict[str, Trace]) -> tuple[list[int], dict[str, dict[int, list[ForwardRecord]]]]:
    """(aligned block numbers, {lane: {block number: its forwards in order}}); 0 is the prompt prefill, 1 the first
    aligned block that decodes answer tokens."""
    if len(traces) == 1:
        (name, trace), = traces.items()
        first = trace.blocks[0].index if trace.blocks else 0
        out = {b: [] for b in [0] + [b.index - first + 1 for b in trace.blocks]}
        for f in trace.forwards:
            out.setdefault(0 if f.kind == "prefill" or f.block < first else f.block - first + 1, []).append(f)
        return sorted(out), {name: out}
    comp = compare_traces(traces)
    grid_first = min((b.index for b in comp.blocks if b.index != PREFILL_BLOCK), default=0)
    numbers = sorted({0, *(b.index - grid_first + 1 for b in comp.blocks if b.index != PREFILL_BLOCK)})
    lanes: dict[str, dict[int, list[ForwardRecord]]] = {}
    for name, trace in traces.items():
        lane: dict[int, list[ForwardRecord]] = {n: [] for n in numbers}
        for f, index in zip(trace.forwards, forward_blocks(trace, comp.grid)):  # a prefill is the prompt's cost
            lane[0 if index == PREFILL_BLOCK or f.kind == "prefill" else index - grid_first + 1].append(f)
        lanes[name] = lane
    return numbers, lanes


def step_costs(trace: Trace) -> list[str]:
    """One line per routed step: the decision, the forwards it spent and the tokens it committed."""
    idx = index_of(trace)
    end = idx.answer_end
    lines = []
    for s in trace.steps:
        if s.decision is None:
            continue
        kinds = [trace.forwards[i].kind for i in s.forwards]
        spent = " + ".join(KIND_WORDS.get(k, k).split(" (")[0] for k in kinds)
        v = s.verification
        got = f"{len(s.commits)} token{'s' if len(s.commits) != 1 else ''}"
        if v is not None:
            got += f" ({v.accepted_len} accepted" + (" + 1 resampled)" if v.resampled is not None else ")")
        answer = sum(1 for c in s.commits if end is None or c.position < end)
        if answer < len(s.commits):  # a block decoded whole: tokens past the answer's end pay for nothing
            got += f", {answer} in the answer"
            rate = f": {answer / len(kinds):.2f} answer tokens per forward" if kinds else ""
        else:
            rate = f": {len(s.commits) / len(kinds):.2f} per forward" if kinds else ""
        lines.append(f"Step {s.index + 1} (answer block {idx.answer_block(s.block)}): {decision_line(s.decision)} — "
                     f"{len(kinds)} forward{'s' if len(kinds) != 1 else ''} ({spent}) committed {got}{rate}.")
    return lines


def _box(f: ForwardRecord) -> str:
    width = max(14, min(96, f.query_tokens * 1.5))
    tip = f"forward #{f.index}: {KIND_WORDS.get(f.kind, f.kind)}, {f.query_tokens} query tokens"
    return (f'<span class="lg-box" style="width:{width:.0f}px;background:{KIND_COLOURS.get(f.kind, "#444")}" '
            f'data-kind="{html.escape(f.kind)}" data-queries="{f.query_tokens}" title="{html.escape(tip)}">'
            f"{LETTER.get(f.kind, '?')}</span>")


def strips_html(traces: dict[str, Trace]) -> str:
    """Each run's forwards as boxes (width ∝ query tokens), grouped by aligned block, one row per run."""
    numbers, lanes = block_forwards(traces)
    if any(len(t.forwards) > MAX_BOXES for t in traces.values()):
        return ""
    head = "".join(f'<th scope="col">{"prompt" if n == 0 else f"block {n}"}</th>' for n in numbers)
    rows = []
    for name, lane in lanes.items():
        cells = "".join(f'<td>{"".join(_box(f) for f in lane[n])}<br><small>{len(lane[n])}</small></td>'
                        for n in numbers)
        rows.append(f'<tr><th scope="row">{html.escape(name)}</th>{cells}</tr>')
    key = "".join(f'<span class="lg-box" style="width:14px;background:{KIND_COLOURS[k]}">{LETTER[k]}</span> '
                  f"{html.escape(KIND_WORDS[k])} " for k in FORWARD_KINDS
                  if any(f.kind == k for t in traces.values() for f in t.forwards))
    return (f'{swipe_hint()}<div class="lg-strips"><table><tr><th></th>{head}</tr>{"".join(rows)}</table></div>'
            f'<p class="lg-key">{key}· box width = query tokens; the number under a block = its forwards</p>')


def totals_html(ledgers: list[LaneLedger]) -> str:
    kinds = [k for k in FORWARD_KINDS if any(r.kind == k for lg in ledgers for r in lg.rows)]
    head = "".join(f'<th scope="col">{html.escape(lg.name)}</th>' for lg in ledgers)
    body = []
    for kind in kinds:
        cells = []
        for lg in ledgers:
            row = next((r for r in lg.rows if r.kind == kind), None)
            cells.append("–" if row is None else
                         f"{row.forwards} × {'/'.join(map(str, row.queries))} queries = {row.query_total}")
        body.append(f'<tr><th scope="row">{html.escape(KIND_WORDS[kind])}</th>'
                    + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    for label, values in (("forwards (NFE)", [str(lg.forwards) for lg in ledgers]),
                          ("query tokens", [str(lg.query_total) for lg in ledgers]),
                          ("answer tokens", [str(lg.tokens) for lg in ledgers]),
                          ("tokens per forward", [f"{lg.tokens / lg.forwards:.2f}" if lg.forwards else "–"
                                                  for lg in ledgers])):
        body.append(f'<tr class="lg-total"><th scope="row">{label}</th>'
                    + "".join(f"<td>{v}</td>" for v in values) + "</tr>")
    return f'<div class="lg-tbl"><table><tr><th></th>{head}</tr>{"".join(body)}</table></div>'


def ledger_html(traces: dict[str, Trace], focus: Optional[str] = None) -> str:
    """The ledger of 1-2 runs of one prompt (same names as their lanes); the routed steps of `focus` (an S2D2 run)
    listed with what each paid and got."""
    ledgers = [lane_ledger(n, t) for n, t in traces.items()]
    lines = step_costs(traces[focus]) if focus in traces else []
    costs = "".join(f"<li>{html.escape(line)}</li>" for line in lines)
    routed = f'<p>{html.escape(focus or "")}, step by step:</p><ul class="lg-steps">{costs}</ul>' if costs else ""
    return f'<div class="s2d2-ledger">{strips_html(traces)}{totals_html(ledgers)}{prefill_note(traces)}{routed}</div>'


def prefill_note(traces: dict[str, Trace]) -> str:
    """Where the prompt's tokens went, when the prefill read fewer than the prompt holds (it stores the prompt's whole
    blocks; the rest shares the first block with the answer's first tokens and is read by that block's forwards):
    the table's "prefill ... 16" beside a 30-token prompt would otherwise look like a miscount. One line per
    distinct case, "" when every prefill read the whole prompt."""
    lines = []
    for t in traces.values():
        prompt = len(t.header.prompt_ids)
        read = sum(f.query_tokens for f in t.forwards if f.kind == "prefill")
        rest = ("the last one shares the first block with the answer and is read by its forwards"
                if prompt - read == 1 else
                f"the other {prompt - read} share the first block with the answer and are read by its forwards")
        line = f"The prompt has {plural(prompt, 'token')}: the prefill stores the {read} that fill whole blocks; {rest}."
        if 0 < read < prompt and line not in lines:
            lines.append(line)
    return "".join(f'<p class="lg-key">{html.escape(line)}</p>' for line in lines)


LEDGER_CSS = """
.s2d2-ledger{font-size:.9em}
.s2d2-ledger .lg-strips,.s2d2-ledger .lg-tbl{overflow-x:auto;max-width:100%}
.s2d2-ledger table{border-collapse:collapse;margin:4px 0}
.s2d2-ledger th,.s2d2-ledger td{border:1px solid #e2e8f0;padding:3px 6px;text-align:left;vertical-align:top}
.s2d2-ledger .lg-strips td{white-space:nowrap}
.s2d2-ledger .lg-box{display:inline-block;height:18px;margin:1px;border-radius:3px;color:#fff;font-size:.75em;
  text-align:center;line-height:18px;font-weight:700;vertical-align:middle}
.s2d2-ledger .lg-total th,.s2d2-ledger .lg-total td{font-weight:700;background:#f8fafc}
.s2d2-ledger .lg-key{font-size:.85em;color:#475569}
.s2d2-ledger .lg-steps{margin:2px 0 2px 1.2em;padding:0}
"""
