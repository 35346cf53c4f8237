"""The attention-mask viewer (paper figure, panel c): the bool mask of one recorded forward as a heatmap.

The mask is recomputed in plain Python from the forward record (kind, cache_len, input_len) and the header config
(block_length, cache_ver, draft_ver); it matches s2d2.models.masks (checked in the tests). The cache is collapsed
into one band column. The cache always holds positions [0, cache_len), so a forward's first query sits at position
cache_len (with kv_reuse a draft or verify starts inside its block; a fused commit+draft starts at the tail).
"""
from __future__ import annotations

from typing import Any, Optional

import plotly.graph_objects as go

from s2d2.trace import ForwardRecord, StepRecord, Trace

from components.views.canvas import visible_text
from components.views.figures import KIND_WORDS
from components.escape import html_text
from components.views.pipeline_blocks import is_pipeline
from components.views.trace_index import clamp_step, index_of
from components.views.plural import plural

WHICH = ("auto", "draft", "verify", "commit")
MAX_QUERIES = 128  # prefill rows shown; earlier prompt positions fold into the cache band (every row attends them)


def query_mask(kind: str, q: int, block: int, cache_ver: bool, causal_prefix: int = 0,
               start: int = 0, tail: int = 0, span: Optional[int] = None) -> list[list[int]]:
    """Rows x query columns (1 = attend) for one forward; the cache columns are all 1 for every kind.

    "commit+draft" (fused_commit): `tail` rows of the finished block (causal with cache_ver, else all of the tail),
    never seeing the new block, then the new block's draft rows, which see the whole tail. "verify_2l" with `span`
    (trim_verify): q − span first-half rows, then MASK rows for the span only (the first half's last positions).
    """
    def causal(i: int, j: int) -> int:
        return int(j <= i)

    if kind == "commit+draft":
        top = [[(causal(i, j) if cache_ver else 1) if j < tail else 0 for j in range(q)] for i in range(tail)]
        rows = query_mask("draft", q - tail, block, cache_ver, causal_prefix)
        return top + [[1] * tail + r for r in rows]

    if kind == "verify_2l":
        s = span if span is not None else q // 2
        n = q - s
        rows = []
        for i in range(n):
            rows.append([int(j <= i) for j in range(n)] + [0] * s)
        for t in range(s):
            rows.append([int(j < n - s + t) for j in range(n)] + [int(j == t) for j in range(s)])
        return rows
    if kind in ("verify_causal", "ar"):
        return [[causal(i, j) for j in range(q)] for i in range(q)]
    if kind == "prefill":
        if cache_ver:
            return [[causal(i, j) for j in range(q)] for i in range(q)]
        return [[int((start + i) // block >= (start + j) // block) for j in range(q)] for i in range(q)]
    if kind == "commit":
        return [[causal(i, j) if cache_ver else 1 for j in range(q)] for i in range(q)]
    if kind == "draft":
        return [[causal(i, j) if i < causal_prefix else 1 for j in range(q)] for i in range(q)]
    raise ValueError(f"unknown forward kind {kind!r}")


PIPELINE_DRAFTS = ("prefill+draft", "commit+draft", "draft")


def pipeline_query_mask(start: int, q: int, prompt: int, block: int) -> list[list[int]]:
    """A D2F pipeline forward over positions [start, start + q): the prompt is block 0 (bidirectional) and block
    k covers [prompt + (k - 1)·B, prompt + k·B); a row attends every column of its own block and of earlier ones
    (s2d2.models.masks.segments_pattern)."""
    def blk(pos: int) -> int:
        return 0 if pos < prompt else 1 + (pos - prompt) // block

    ids = [blk(start + i) for i in range(q)]
    return [[int(ids[j] <= ids[i]) for j in range(q)] for i in range(q)]


def _pipeline_stored(trace: Trace, f: ForwardRecord, rec: Optional[StepRecord]) -> int:
    """Rows of a pipeline forward whose KV it stores: the prompt, or the blocks its step cached."""
    if f.kind == "prefill+draft":
        return len(trace.header.prompt_ids)
    cached = sum(e.event == "cached" for e in rec.events) if rec is not None else 0
    return cached * int(trace.header.config.get("block_length") or 1)


def pick_forward(trace: Trace, step: int, which: str = "auto") -> Optional[ForwardRecord]:
    """The forward shown at scrubber value `step`: the step's verify (auto) or draft, or its block's commit."""
    idx = index_of(trace)
    rec = idx.step_record(clamp_step(trace, step))
    if rec is None:
        pre = next((f for f in trace.forwards if f.kind == "prefill"), None)
        return pre if which in ("auto", "commit") else None
    fwds = [trace.forwards[i] for i in rec.forwards]
    if which == "commit":
        ci = idx.commit_forward.get(rec.block)
        return trace.forwards[ci] if ci is not None else None
    if which == "draft":
        return next((f for f in fwds if f.kind in ("draft", "ar", "commit+draft", "prefill+draft")), None)
    verify = next((f for f in fwds if f.kind.startswith("verify")), None)
    if which == "verify":
        return verify
    return verify or (fwds[-1] if fwds else None)


def _draft_prefix(rec: StepRecord, start: int) -> int:
    return max(0, (min(rec.masks_before) - start) if rec.masks_before else 0)


def _query_start(f: ForwardRecord, folded: int = 0) -> int:
    """Absolute position of forward `f`'s first query row shown: the cache holds [0, cache_len), so the first query
    sits at cache_len (a prefill shows its rows after the `folded` first positions)."""
    return f.cache_len + folded


def _query_count(f: ForwardRecord, folded: int = 0, span: Optional[int] = None) -> int:
    """Query rows of forward `f` shown (a 2L verify: its first half; prefill: after the folded positions)."""
    if f.kind == "verify_2l":
        return f.input_len - span if span is not None else f.input_len // 2
    return f.input_len - folded


def _labels(trace: Trace, f: ForwardRecord, rec: Optional[StepRecord], folded: int = 0,
            span: Optional[int] = None) -> list[str]:
    """Query row labels: token text + absolute position id (row_positions)."""
    n, start = _query_count(f, folded, span), _query_start(f, folded)
    if f.kind == "prefill":
        ids_step = 0
    elif rec is not None:
        ids_step = rec.index
    else:
        last = [s.index for s in trace.steps if s.block == f.block]
        ids_step = (last[-1] + 1) if last else 0
    texts = _texts_at(trace, ids_step, start, n, rec if f.kind.startswith("verify") else None)
    labels = [f"{html_text(visible_text(t, 10))} @{start + i}" for i, t in enumerate(texts)]  # Plotly renders tags
    if f.kind == "verify_2l":
        labels += [f"[M] @{start + i}" for i in range(n - (span if span is not None else n), n)]
    return labels


def _texts_at(trace: Trace, step: int, start: int, n: int, fill: Optional[StepRecord]) -> list[str]:
    idx = index_of(trace)
    P = len(trace.header.prompt_ids)
    drafts = {d.position: d.text for d in fill.drafts} if fill else {}
    out = []
    for pos in range(start, start + n):
        if pos < P and pos < len(trace.header.prompt_tokens):
            out.append(trace.header.prompt_tokens[pos])
            continue
        hit = idx.commit_of.get(pos)
        if hit is not None and hit[0] < step:
            out.append(hit[1].text)
        elif pos in drafts:
            out.append(drafts[pos])
        else:
            out.append("[M]")
    return out


def row_positions(f: ForwardRecord, folded: int = 0, span: Optional[int] = None) -> list[int]:
    """Absolute position id of every query row shown for forward `f` (a 2L verify lists the block twice, or with
    `span` (trim_verify) its span's positions again; a long prefill shows only the rows after the `folded` first)."""
    start = _query_start(f, folded)
    rows = list(range(start, start + _query_count(f, folded, span)))
    if f.kind != "verify_2l":
        return rows
    return rows + rows[len(rows) - (span if span is not None else len(rows)):]


def _layout_note(trace: Trace, f: ForwardRecord, rec: Optional[StepRecord], pipe: bool, prefix: int,
                 tail: int, span: Optional[int] = None) -> str:
    """What the title says about the forward's layout (2L, draft_ver rows, a fused commit, D2F's pipeline)."""
    cfg = trace.header.config
    if pipe:
        stored = _pipeline_stored(trace, f, rec)
        return (f" — D2F: {plural(stored, 'row')} cached | blocks in flight, block-causal" if stored else
                " — D2F: the blocks in flight, block-causal")
    if f.kind == "verify_2l":
        return " — 2L verifier: the drafts, then a masked copy of each" + (" (span only)" if span is not None else "")
    if f.kind == "draft" and prefix:
        return f" — the first {plural(prefix, 'row')} (decoded already) read causally"
    if f.kind == "commit+draft":
        how = "causal" if cfg.get("cache_ver") else "block-bidirectional"
        return f" — fused: {tail} tail rows committed ({how}) | {f.input_len - tail} draft rows"
    return ""


# The key the heatmap needs, in words first: what a row, a column and a filled cell are.
MASK_KEY = "■ the row's token can read the column's · □ it cannot"


def mask_heatmap(**props: Any) -> go.Heatmap:
    """The mask's heatmap trace, built without Plotly's per-cell validation (`_validate=False`, Plotly's own switch).

    Why: Plotly checks a list-of-lists `z` value by value and copies it, ~0.2 s for a 128 x 130 mask, and a frame
    bundle (frame_bundle.py) draws one mask per step when a trace opens: an uploaded trace with long blocks spent
    its whole build budget here. Every value is ours (0/1 ints, strings we format), and the figure's JSON is the
    same byte for byte (tests/app/test_replay_views.py binds it)."""
    return go.Heatmap(**props, _validate=False)


TITLE_LINE_PX = 18  # one 13 px title line with Plotly's line spacing


def mask_figure(trace: Trace, step: int, which: str = "auto", selected: Optional[int] = None,
                copy_only: bool = False) -> go.Figure:
    """Heatmap: rows = query tokens, columns = [cache band | query columns]; the rows of the `selected` position
    (a clicked token) are outlined, or with `copy_only` only its MASK-copy row of a 2L verify (the row that gives q
    there), labelled with what it sees. Rows and columns carry the same query numbers (the cache band has none)."""
    f = pick_forward(trace, step, which if which in WHICH else "auto")
    fig = go.Figure()
    fig.update_layout(template="plotly_white", height=420, margin=dict(l=110, r=20, t=50, b=90))
    if f is None:
        fig.update_layout(title=dict(text=f"No {which} forward at this step", font=dict(size=14)))
        return fig
    cfg = trace.header.config
    block = int(cfg.get("block_length") or 1)
    idx = index_of(trace)
    rec = idx.step_record(clamp_step(trace, step)) if f.kind != "prefill" else None
    if rec is not None and f.kind == "commit":
        rec = None
    pipe = is_pipeline(trace) and f.kind in PIPELINE_DRAFTS
    own = idx.block_by_index.get(f.block)
    tail = f.input_len - own.length if f.kind == "commit+draft" and own is not None and not pipe else 0
    prefix = 0
    if f.kind in ("draft", "commit+draft") and cfg.get("draft_ver") and rec is not None:
        prefix = _draft_prefix(rec, f.cache_len + tail)
    folded = max(0, f.input_len - MAX_QUERIES) if f.kind in ("prefill", "prefill+draft") else 0
    cache_len = f.cache_len + folded
    span = rec.span[1] if f.kind == "verify_2l" and cfg.get("trim_verify") and rec is not None else None
    rows = (pipeline_query_mask(cache_len, f.input_len - folded, len(trace.header.prompt_ids), block) if pipe else
            query_mask(f.kind, f.input_len - folded, block, bool(cfg.get("cache_ver")), prefix, start=folded,
                       tail=tail, span=span))
    labels = _labels(trace, f, rec, folded, span)
    cols = list(labels)
    z = [list(r) for r in rows]
    if cache_len > 0:
        cols = [f"cache ({cache_len})"] + cols
        z = [[1] + r for r in z]
    # Plotly draws the first row at the bottom: reverse so row 0 is on top, keeping labels unique by index.
    ylab = [f"{i}: {t}" for i, t in enumerate(labels)][::-1]
    first = 1 if cache_len > 0 else 0  # query column j is numbered j, like query row j
    xlab = [t if i < first else f"{i - first}: {t}" for i, t in enumerate(cols)]
    fig.add_trace(mask_heatmap(z=z[::-1], x=xlab, y=ylab, zmin=0, zmax=1, showscale=False, xgap=1, ygap=1,
                               colorscale=[[0, "#f8fafc"], [1, "#4f46e5"]],
                               hovertemplate="query %{y}<br>key %{x}<br>attend %{z}<extra></extra>"))
    title = (f"Attention mask of forward #{f.index} ({KIND_WORDS.get(f.kind, f.kind)})<br>{MASK_KEY}<br>"
             f"{f.cache_len} cached, {plural(f.query_tokens, 'row')} read")
    if folded:
        title += f" (last {MAX_QUERIES} shown)"
    rows_at = row_positions(f, folded, span)
    title += _outline(fig, f, rows_at, ylab, selected, copy_only)
    note = _layout_note(trace, f, rec, pipe, prefix, tail, span)
    title += f"<br>{note.removeprefix(' — ')}" if note else ""  # a line of its own: a phone-wide title never wraps
    if copy_only and fig.layout.annotations:  # the MASK copy's row: what it sees, under the title
        title += "<br>" + copy_row_note(f, int(fig.layout.annotations[0].name), rows_at)
    # The title's lines get their own room above the heatmap (four lines used to cover its top row).
    lines = title.count("<br>") + 1
    top = 24 + TITLE_LINE_PX * lines
    fig.update_layout(title=dict(text=title, font=dict(size=13), yref="container", y=1, yanchor="top",
                                 pad=dict(t=10)), margin=dict(l=110, r=20, t=top, b=90), height=360 + top)
    fig.update_xaxes(tickangle=-60, tickfont=dict(size=9))
    fig.update_yaxes(tickfont=dict(size=9))
    return fig


def _outline(fig: go.Figure, f: ForwardRecord, rows_at: list[int], ylab: list[str], selected: Optional[int],
             copy_only: bool) -> str:
    """Outline the rows of `selected` (only its MASK-copy row of a 2L verify with `copy_only`, named on the plot
    itself, since its tick label may be thinned out); returns the title's note for a plain outline."""
    hits = [i for i, pos in enumerate(rows_at) if pos == selected] if selected is not None else []
    copy_row = copy_only and f.kind == "verify_2l" and len(hits) == 2
    if copy_row:
        hits = hits[1:]
    n = len(rows_at)
    fig.update_layout(shapes=[dict(type="rect", xref="paper", x0=0, x1=1, yref="y", y0=n - 1 - i - 0.5,
                                   y1=n - 1 - i + 0.5, line=dict(color="#ea580c", width=3)) for i in hits])
    if not copy_row:
        return f" — outlined: position {selected}" if hits else ""
    fig.add_annotation(x=1, xref="paper", y=ylab[n - 1 - hits[0]], yref="y", xanchor="right", name=str(hits[0]),
                       text=f"row {hits[0]}: [M] @{rows_at[hits[0]]}", showarrow=False, bgcolor="#fff7ed",
                       bordercolor="#ea580c", font=dict(size=10, color="#9a3412"))
    return ""


def copy_row_note(f: ForwardRecord, row: int, rows_at: list[int]) -> str:
    """What the outlined MASK-copy row of a 2L verify attends: the cache, the drafts strictly before it, itself."""
    pos = rows_at[row]
    k = pos - rows_at[0]  # first-half columns before it (a trimmed verifier's first half still starts at rows_at[0])
    before = (f"drafts {rows_at[0]}–{pos - 1} (cols 0–{k - 1})" if k > 1 else
              f"draft {rows_at[0]} (col 0)" if k == 1 else "no draft")
    return f"outlined: row {row}, the MASK copy of position {pos}<br>sees: cache, {before}, itself (col {row})"
