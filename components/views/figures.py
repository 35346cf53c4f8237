"""Plotly figure builders over a trace. Every array is a Python list (never numpy), so tests can read values."""
from __future__ import annotations

import textwrap

from collections import Counter
from typing import Any, Optional

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from s2d2.policies import figure_guides, plotted_score, score_label
from s2d2.trace import FORWARD_KINDS, Trace
from s2d2.trace.fields import as_float

from components.views.describe import decision_line
from components.escape import html_text
from components.views.trace_index import clamp_step
from components.views.plural import plural

HOW_COLOURS = {
    "accepted": "#16a34a", "resampled": "#ea580c", "threshold": "#2563eb", "fallback": "#60a5fa",
    "hiconf_extra": "#0d9488", "ratio_extra": "#14b8a6", "ar": "#9333ea", "ar_seed": "#111827",
    "edit": "#7e22ce",
}
HOW_SYMBOLS = {
    "accepted": "circle", "resampled": "x", "threshold": "triangle-up", "fallback": "diamond",
    "hiconf_extra": "cross", "ratio_extra": "cross", "ar": "square", "ar_seed": "star",
    "edit": "star-diamond",
}
KIND_COLOURS = {
    "prefill": "#94a3b8", "draft": "#60a5fa", "verify_2l": "#f97316", "verify_causal": "#fb923c",
    "commit": "#475569", "ar": "#9333ea", "commit+draft": "#0ea5e9", "prefill+draft": "#64748b",
}
KIND_WORDS = {"prefill": "prefill (the prompt)", "draft": "draft", "verify_2l": "verify (2L)",
              "verify_causal": "verify (causal)", "commit": "commit (cache the block)", "ar": "autoregressive step",
              "commit+draft": "commit + next draft (fused)",
              "prefill+draft": "prefill + first draft (the D2F pipeline)"}  # (legends and titles: never the kind ids)
MAX_BLOCK_LINES = 64  # block boundary rules on the routing panel up to this many blocks
MAX_HOVER = 150  # steps up to which routing markers carry the policy's reason as hover text
_LAYOUT = dict(template="plotly_white", margin=dict(l=50, r=20, t=40, b=40), height=320)


def _fig(title: str, **layout: Any) -> go.Figure:
    fig = go.Figure()
    fig.update_layout(title=dict(text=title, font=dict(size=14)), **{**_LAYOUT, **layout})
    return fig


def _step_x(trace: Trace) -> list[int]:
    """NFE after each step's last forward: the x coordinate of a step on forward axes."""
    xs = []
    for s in trace.steps:
        xs.append(trace.forwards[s.forwards[-1]].nfe_after if s.forwards else (xs[-1] if xs else 0))
    return xs


def commit_map(trace: Trace, step: Optional[int] = None) -> go.Figure:
    """Position (y) × forward (x, NFE so far) of every commit, one trace per decision kind; block boundaries."""
    fig = _fig("Commit map: when each position was decided", xaxis_title="forwards so far",
               yaxis_title="position")
    xs = _step_x(trace)
    first = trace.blocks[0].index if trace.blocks else 0
    by_how: dict[str, tuple[list[int], list[int], list[str]]] = {}
    for s, x in zip(trace.steps, xs):
        for c in s.commits:
            pts = by_how.setdefault(c.how, ([], [], []))
            pts[0].append(x)
            pts[1].append(c.position)
            # hover text stays small: a token's text is cut to 24 characters
            pts[2].append(f"step {s.index + 1}, answer block {s.block - first + 1}: "
                          f"{html_text(repr(c.text[:24]))} ({html_text(c.how, 20)})")
        for e in s.edits:  # LLaDA2.x self-corrections: a decoded position decided again
            pts = by_how.setdefault("edit", ([], [], []))
            pts[0].append(x)
            pts[1].append(e.position)
            pts[2].append(f"step {s.index + 1}, answer block {s.block - first + 1}: edit "
                          f"{html_text(repr(e.old_text[:24]))} → {html_text(repr(e.new_text[:24]))} (p={e.p:.2f})")
    for how, (x, y, text) in by_how.items():
        fig.add_trace(go.Scatter(x=x, y=y, mode="markers", name=how, text=text, hoverinfo="text",
                                 marker=dict(color=HOW_COLOURS.get(how, "#444"), symbol=HOW_SYMBOLS.get(how, "circle"),
                                             size=8)))
    shapes = [dict(type="line", xref="paper", x0=0, x1=1, y0=b.start - 0.5, y1=b.start - 0.5,
                   line=dict(color="#cbd5e1", width=1, dash="dot")) for b in trace.blocks[1:]]
    cur = clamp_step(trace, step) if step is not None else 0
    if cur > 0:
        shapes.append(dict(type="line", yref="paper", y0=0, y1=1, x0=xs[cur - 1], x1=xs[cur - 1],
                           line=dict(color="#4f46e5", width=2)))
    fig.update_layout(shapes=shapes)
    return fig


def answer_limit(trace: Trace) -> float:
    """The first absolute position past the answer (its stop token included); infinity without a footer."""
    footer = trace.footer
    return len(trace.header.prompt_ids) + footer.generated_length if footer is not None else float("inf")


def nfe_by_block(trace: Trace) -> go.Figure:
    """Stacked forwards per block by kind, with answer tokens per forward on a second axis: a token written past
    the end of the answer (after its stop token) is not counted, as in the metrics table's tokens per forward and
    the tour's ledger (newcomer walk: block 3 read 16 / 3 forwards where 5 of the 16 were the answer's)."""
    blocks = [b.index for b in trace.blocks]
    labels = [f"block {i + 1}" for i in range(len(blocks))]  # answer blocks, counted from 1
    counts = {kind: [0] * len(blocks) for kind in FORWARD_KINDS}
    pos = {b: i for i, b in enumerate(blocks)}
    prefill = 0
    for f in trace.forwards:
        if f.kind == "prefill" or f.block not in pos:
            prefill += 1
            continue
        counts[f.kind][pos[f.block]] += 1
    tokens = [0] * len(blocks)
    edits = [0] * len(blocks)
    starts = [(b.start, b.start + b.length, i) for i, b in enumerate(trace.blocks)]
    end = answer_limit(trace)
    for s in trace.steps:
        if s.in_flight:  # a pipeline step decodes in several blocks: count each token in its own
            for c in s.commits:
                if c.position < end:
                    tokens[next(i for lo, hi, i in starts if lo <= c.position < hi)] += 1
        elif s.block in pos:
            tokens[pos[s.block]] += sum(c.position < end for c in s.commits)
            edits[pos[s.block]] += len(s.edits)
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    fig.update_layout(title=dict(text=f"Forwards per block by kind (prefill: {prefill})", font=dict(size=14)),
                      barmode="stack", **_LAYOUT)
    for kind in FORWARD_KINDS:
        if kind != "prefill" and any(counts[kind]):
            fig.add_trace(go.Bar(x=labels, y=counts[kind], name=KIND_WORDS[kind], marker_color=KIND_COLOURS[kind]))
    totals = [sum(counts[k][i] for k in FORWARD_KINDS) for i in range(len(blocks))]
    tpf = [round(t / n, 3) if n else 0.0 for t, n in zip(tokens, totals)]
    fig.add_trace(go.Scatter(x=labels, y=tpf, name="answer tokens / forward", mode="lines+markers",
                             line=dict(color="#111827")), secondary_y=True)
    if any(edits):  # LLaDA2.x: self-corrections per block, written above each bar
        fig.add_trace(go.Scatter(x=labels, y=totals, mode="text", name=f"✎ edits per block ({sum(edits)} in all)",
                                 text=[f"✎{n}" if n else "" for n in edits], textposition="top center",
                                 textfont=dict(color=HOW_COLOURS["edit"]), customdata=edits,
                                 hovertemplate="%{x}: %{customdata} edits<extra></extra>"), secondary_y=False)
    fig.update_yaxes(title_text="forwards", secondary_y=False)
    fig.update_yaxes(title_text="answer tokens per forward", secondary_y=True, rangemode="tozero")
    return fig


def verify_steps(trace: Trace) -> list[Any]:
    return [s for s in trace.steps if s.verification is not None]


def acceptance_lengths(trace: Trace) -> list[int]:
    return [s.verification.accepted_len for s in verify_steps(trace)]  # type: ignore[union-attr]


def no_verify_figure(trace: Trace, what: str) -> go.Figure:
    """A whole-run acceptance panel for a trace with no verify call: one sentence, no bare axes."""
    why = {"ar": "autoregressive decoding never drafts ahead",
           "diffusion": "diffusion alone never verifies"}.get(str(trace.header.config.get("method")),
                                                              "its policy never chose to verify")
    return words_figure(f"{what}: this run has no verify call ({why}), so no draft was accepted or rejected.")


def words_figure(text: str) -> go.Figure:
    """A short panel that says `text` instead of drawing empty axes (wrapped: a phone's plot is ~340 px wide)."""
    lines = textwrap.wrap(text, 46)
    text = "<br>".join(lines)
    fig = _fig("", height=max(120, 40 + 20 * len(lines)), margin=dict(l=10, r=10, t=10, b=10))
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    fig.add_annotation(text=text, x=0.5, y=0.5, xref="paper", yref="paper", showarrow=False,
                       font=dict(size=13, color="#334155"))
    return fig


def acceptance_histogram(trace: Trace) -> go.Figure:
    lengths = acceptance_lengths(trace)
    if not lengths:
        return no_verify_figure(trace, "Accepted-prefix lengths")
    top = max(lengths, default=0)
    counts = Counter(lengths)
    fig = _fig(f"Accepted-prefix length per verify call ({plural(len(lengths), 'call')})",
               xaxis_title="accepted prefix length K", yaxis_title="verify calls")
    fig.add_trace(go.Bar(x=list(range(top + 1)), y=[counts.get(k, 0) for k in range(top + 1)],
                         marker_color="#16a34a", name="calls"))
    fig.update_yaxes(tickformat="d", dtick=max(1, -(-max(counts.values(), default=1) // 6)))  # whole calls
    return fig


def per_position_acceptance(trace: Trace) -> dict[str, list[float]]:
    """vLLM per-position rate #(K > i)/num_drafts and the conditional rate #(K > i)/#(span > i)."""
    calls = [(s.verification.accepted_len, len(s.verification.positions), s.span[1])  # type: ignore[union-attr]
             for s in verify_steps(trace)]
    if not calls:
        return {"index": [], "rate": [], "conditional": []}
    width = max(max(span, n) for _, n, span in calls)
    rate, cond = [], []
    for i in range(width):
        passed = sum(k > i for k, _, _ in calls)
        offered = sum(span > i for _, _, span in calls)
        rate.append(round(passed / len(calls), 4))
        cond.append(round(passed / offered, 4) if offered else 0.0)
    return {"index": list(range(width)), "rate": rate, "conditional": cond}


def per_position_figure(trace: Trace) -> go.Figure:
    data = per_position_acceptance(trace)
    if not data["index"]:
        return no_verify_figure(trace, "Per-position acceptance")
    fig = _fig("Per-position acceptance", xaxis_title="i: the draft's place in the checked span (0 = first)",
               yaxis_title="rate", yaxis=dict(range=[0, 1.05]), barmode="group")
    fig.add_trace(go.Bar(x=data["index"], y=data["rate"], name="#(K>i) / calls (vLLM)", marker_color="#16a34a"))
    fig.add_trace(go.Bar(x=data["index"], y=data["conditional"], name="#(K>i) / #(span>i)", marker_color="#86efac"))
    return fig


def _thresholds(trace: Trace) -> dict[str, Optional[float]]:
    """The threshold line or hysteresis band of the trace's policy (declared by the policy itself)."""
    return figure_guides(trace.header.config)


def routing_series(trace: Trace) -> dict[str, list[Any]]:
    """Per step: 1-based step number, score (None if absent or -inf), verify flag, K̂ and accepted K."""
    out: dict[str, list[Any]] = {"step": [], "score": [], "verify": [], "k_hat": [], "accepted": [], "reason": []}
    policy = trace.header.config.get("policy")
    for s in trace.steps:
        d = s.decision
        score = as_float(d.score) if d else None
        if d is not None and score is None:
            score = _implicit_score(policy, d.details, s.policy_inputs)
        out["step"].append(s.index + 1)
        finite = score is not None and abs(score) != float("inf")
        out["score"].append(round(score, 4) if finite else None)  # type: ignore[arg-type]
        out["verify"].append(bool(s.verification is not None or (d is not None and d.verify)))
        out["k_hat"].append(round(s.policy_inputs.k_hat, 4) if s.policy_inputs else None)
        out["accepted"].append(s.verification.accepted_len if s.verification else None)
        out["reason"].append(decision_line(d))
    return out


def _implicit_score(policy: Any, details: dict[str, Any], inputs: Any) -> Optional[float]:
    """A plottable score for policies without one (the span length, UCB verify − UCB skip), from the policy."""
    return plotted_score(policy, details, inputs)


def _on_spans(xs: list[int]) -> list[tuple[int, int]]:
    """Shaded ON steps: one rect per step up to MAX_BLOCK_LINES, else one per run of consecutive steps, else none
    (Plotly shapes are costly, and the figure is re-sent on every scrub)."""
    if len(xs) <= MAX_BLOCK_LINES:
        return [(x, x) for x in xs]
    runs: list[list[int]] = []
    for x in xs:
        if runs and runs[-1][1] == x - 1:
            runs[-1][1] = x
        else:
            runs.append([x, x])
    return [(a, b) for a, b in runs] if len(runs) <= MAX_BLOCK_LINES else []


NO_ROUTING = {"ar": "No routing: autoregressive decoding never drafts ahead, so there is nothing to verify.",
              "diffusion": "No routing: diffusion alone never verifies (it commits drafts by confidence)."}
THRESHOLD_NAMES = {"score_threshold": "τ_score", "mask_span_length": "τ_span", "contextual_bandit_ucb": "0"}


def no_routing_figure(method: str) -> go.Figure:
    """What the routing panel shows for a method that never verifies: one sentence, no empty axes."""
    return words_figure(NO_ROUTING.get(method, "No routing: this method never verifies."))


def routing_title(config: dict[str, Any]) -> str:
    """The routing panel's title, with the names the step summary uses (s, K̂, c, τ_score)."""
    policy = config.get("policy", "–")
    if policy == "score_threshold":
        s = "K̂ − c·N_hi" if config.get("score_type") == "difference_dynamic" else "K̂ − c"
        return f"Routing: score s = {s} per step vs τ_score"
    if policy == "score_hysteresis":
        return "Routing: score s per step vs the band [τ_off, τ_on]"
    return f"Routing score ({html_text(policy, 40)}{score_label(policy)})"


def _guide_shapes(th: dict[str, Optional[float]], verified: list[int]) -> list[dict[str, Any]]:
    """The threshold line, or the hysteresis band with the ON steps shaded."""
    shapes: list[dict[str, Any]] = []
    if th.get("threshold") is not None:
        shapes.append(dict(type="line", xref="paper", x0=0, x1=1, yref="y", y0=th["threshold"], y1=th["threshold"],
                           line=dict(color="#dc2626", dash="dash")))
    if th.get("on") is not None and th.get("off") is not None:
        shapes.append(dict(type="rect", xref="paper", x0=0, x1=1, yref="y", y0=th["off"], y1=th["on"],
                           fillcolor="#fde68a", opacity=0.35, line_width=0, layer="below"))
        shapes += [dict(type="rect", xref="x", x0=a - 0.5, x1=b + 0.5, yref="y domain", y0=0, y1=1,
                        fillcolor="#bbf7d0", opacity=0.3, line_width=0, layer="below") for a, b in _on_spans(verified)]
    return shapes


def routing_figure(trace: Trace, step: Optional[int] = None, with_k: bool = True) -> go.Figure:
    """Score vs threshold (or hysteresis band with the ON state shaded), verify/skip markers, and (`with_k`) K̂ vs
    K below; a sentence instead of empty axes for a method that never verifies. The title breaks before "vs" so
    a phone's narrow plot shows it whole."""
    method = trace.header.config.get("method")
    if method != "s2d2":
        return no_routing_figure(str(method))
    data = routing_series(trace)
    policy = trace.header.config.get("policy", "–")
    title = routing_title(trace.header.config).replace(" vs ", "<br>vs ", 1)
    fig = make_subplots(rows=1 + with_k, cols=1, shared_xaxes=True, row_heights=[0.6, 0.4][:1 + with_k] if with_k
                        else None, vertical_spacing=0.1, subplot_titles=(title, "Predicted K̂ vs accepted K "
                                                                         "(verify steps)")[:1 + with_k])
    fig.update_layout(**{**_LAYOUT, "height": 440 if with_k else 320, "margin": dict(l=50, r=20, t=64, b=40)},
                      legend=dict(orientation="h", y=-0.15 if with_k else -0.3))
    steps = data["step"]
    fig.add_trace(go.Scatter(x=steps, y=data["score"], mode="lines", name="score s", line=dict(color="#64748b"),
                             connectgaps=False), row=1, col=1)
    for flag, name, colour, symbol in ((True, "verify", "#16a34a", "triangle-up"), (False, "skip", "#9ca3af", "x")):
        xs = [x for x, v in zip(steps, data["verify"]) if v == flag]
        ys = [y if y is not None else 0.0 for y, v in zip(data["score"], data["verify"]) if v == flag]
        # The policy's reason line on hover; long runs keep x/y only (the figure is re-sent on every scrub).
        txt = ([html_text(r) for r, v in zip(data["reason"], data["verify"]) if v == flag]
               if len(steps) <= MAX_HOVER else None)
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="markers", name=name, text=txt,
                                 hoverinfo="text+x" if txt else "x+y",
                                 marker=dict(color=colour, symbol=symbol, size=10)), row=1, col=1)
    th = _thresholds(trace)
    shapes = _guide_shapes(th, [x for x, v in zip(steps, data["verify"]) if v])
    if with_k:
        _k_panel(fig, data)
    prev = None
    for rec in trace.steps if len(trace.blocks) <= MAX_BLOCK_LINES else []:
        if prev is not None and rec.block != prev:
            shapes.append(dict(type="line", xref="x", x0=rec.index + 0.5, x1=rec.index + 0.5, yref="paper", y0=0,
                               y1=1, line=dict(color="#cbd5e1", width=1, dash="dot")))
        prev = rec.block
    cur = clamp_step(trace, step) if step is not None else 0
    if cur > 0:
        shapes.append(dict(type="line", xref="x", x0=cur, x1=cur, yref="paper", y0=0, y1=1,
                           line=dict(color="#4f46e5", width=2)))
    fig.update_layout(shapes=shapes)
    if th.get("threshold") is not None:
        name = THRESHOLD_NAMES.get(policy, "threshold")
        fig.add_annotation(x=1, xref="paper", y=th["threshold"], yref="y", text=f"{name} = {th['threshold']:g}",
                           showarrow=False, xanchor="right", yanchor="bottom", font=dict(size=10, color="#dc2626"))
    if th.get("on") is not None:
        fig.add_annotation(x=0, xref="paper", y=th["on"], yref="y", text="band [τ_off, τ_on]", showarrow=False,
                           xanchor="left", yanchor="bottom", font=dict(size=10))
    fig.update_xaxes(title_text="step", row=1 + with_k, col=1)
    fig.update_xaxes(**step_ticks(len(steps)))
    return fig


def _k_panel(fig: go.Figure, data: dict[str, list[Any]]) -> None:
    """The lower panel: each verify step's predicted K̂ (rings) over its accepted K (bars)."""
    ks = [x for x, k in zip(data["step"], data["k_hat"]) if k is not None]
    fig.add_trace(go.Scatter(x=ks, y=[k for k in data["k_hat"] if k is not None], mode="markers", name="K̂",
                             marker=dict(color="#7c3aed", symbol="circle-open", size=9)), row=2, col=1)
    ka = [x for x, k in zip(data["step"], data["accepted"]) if k is not None]
    fig.add_trace(go.Bar(x=ka, y=[k for k in data["accepted"] if k is not None], name="accepted K",
                         marker_color="#86efac", opacity=0.8), row=2, col=1)


def step_ticks(n: int) -> dict[str, Any]:
    """Whole-number step ticks (never 1.5), about a dozen of them."""
    return dict(tickmode="linear", tick0=1, dtick=max(1, -(-n // 12)), tickformat="d")
