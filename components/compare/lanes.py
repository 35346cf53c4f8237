"""Compare: 2-4 configurations on one prompt and seed, aligned by block (the pure part of the Compare tab).

Handlers are pure functions of plain values (session state is {"prompt_ids", "seed", "model", "lanes": {name:
trace dict}}) that return {view name: value}, tested directly. The layout and wiring are in
components/compare/layout.py; the what-if handlers in components/compare/whatif_panel.py (which builds on this module).
"""
from __future__ import annotations

import html
import json
import re
from typing import Any, Callable, Iterator, Optional

import plotly.graph_objects as go

from s2d2.overrides import parse_overrides
from s2d2.compare import PREFILL_BLOCK, Comparison, compare_traces, forward_blocks, same_blocks
from s2d2.config import DecodeConfig, preset
from s2d2.limits import check_seed
from s2d2.trace import Trace

from components.views.canvas import legend_for, render_canvas
from components.compare.lane_metrics import metrics_table, wall_note
from components.compare.lane_progress import LaneBoard
from components.compare.verdict import forwards_verdict
from components.compare.lane_names import OFF, lane_detail, lane_titles, title_short
from components.views.figures import KIND_COLOURS, KIND_WORDS
from components.run.lane_rounds import TIMED_ROUNDS, lane_rounds
from components.serve.input_numbers import as_float
from components.run.config_check import check_config, check_prompt
from components.run.random_stream import stream_defaults, streams_line
from components.run.workers import RunStopped
from components.run.zerogpu import record_lanes
from components.serve.state_budget import STORE
from components.files.traces import parsed, remember_parsed, trace_json
from components.views.plural import plural

MAX_LANES = 4
DEFAULT_LANES = ["ar", "dynamic-baseline", "sdar-config-a", OFF]


# -- lanes from UI values ---------------------------------------------------------------------------------------

def parse_custom_settings(text: Any) -> dict[str, Any]:
    """"acceptance=greedy_exact policy=always" (spaces, commas or newlines) -> typed option values."""
    return parse_overrides([p for p in re.split(r"[\s,;]+", str(text or "").strip()) if p], "custom settings")


GEN_MIN, GEN_MAX = 8, 256  # the Generation length slider's range (layout.py)


def lane_configs(presets_: list[Any], overrides: list[Any], gen_length: Any,
                 defaults: Optional[dict[str, Any]] = None) -> dict[str, DecodeConfig]:
    """Named configurations for the lanes that are on; one ValueError naming the lane and the problem. `defaults`
    (the model's random stream: components/run/random_stream.py) apply under each lane's own custom settings."""
    configs: dict[str, DecodeConfig] = {}
    length = as_float(gen_length)
    if length is None or length != int(length):
        raise ValueError("Generation length: expected a whole number")
    if not GEN_MIN <= length <= GEN_MAX:  # refused, never clamped: the page clamps a typed value and says so
        raise ValueError(f"Generation length: {GEN_MIN} to {GEN_MAX}, got {int(length)}")
    length = int(length)
    for i, (name, extra) in enumerate(zip(presets_, overrides)):
        if not name or name == OFF:
            continue
        try:
            options = parse_custom_settings(extra)
            if "gen_length" in options:
                raise ValueError("gen_length is set for every lane by the Generation length slider")
            cfg = check_config(preset(str(name)[:100], gen_length=length, **{**(defaults or {}), **options}))
        except (ValueError, TypeError, OverflowError) as exc:
            raise ValueError(f"lane {i + 1}: {exc}") from None
        configs[f"{i + 1}·{name}{'*' if str(extra or '').strip() else ''}"] = cfg
    if not 2 <= len(configs) <= MAX_LANES:
        raise ValueError(f"turn on 2 to {plural(MAX_LANES, 'lane')} (now {len(configs)})")
    return configs


def run_compare(prompt: str, model_name: str, seed: Any, gen_length: Any, *lane_values: Any,
                load: Optional[Callable[[str], Any]] = None, generate: Optional[Callable[..., Any]] = None
                ) -> tuple[str, Optional[dict[str, Any]]]:
    """Run every lane on the prompt: (status markdown, new state or None on error). Same caps as Run: prompt
    characters, tokens, seconds (all lanes together), and the Stop button (nothing is compared after a Stop)."""
    out: tuple[str, Optional[dict[str, Any]]] = ("", None)
    for out in run_compare_steps(prompt, model_name, seed, gen_length, *lane_values, load=load, generate=generate):
        pass
    return out


def run_compare_steps(prompt: str, model_name: str, seed: Any, gen_length: Any, *lane_values: Any,
                      load: Optional[Callable[[str], Any]] = None, generate: Optional[Callable[..., Any]] = None
                      ) -> Iterator[tuple[str, Optional[dict[str, Any]]]]:
    """run_compare as it goes: (each lane's progress, None) while the lanes run (components/compare/lane_progress.py),
    then the final (status, state or None)."""
    problem = check_prompt(prompt) or seed_problem(seed)
    if problem:
        yield f"⚠ {problem}", None
        return
    try:
        seed = check_seed(seed)
        configs = lane_configs(list(lane_values[:MAX_LANES]), list(lane_values[MAX_LANES:]), gen_length,
                               stream_defaults(model_name))  # the page's stream on its models, as Run draws
        board = LaneBoard(list(configs), 1 + TIMED_ROUNDS, titles=lane_titles(configs))
        yield board.markdown(), None
        decoded = yield from _with_board(decode_lanes_steps(model_name, prompt, configs, seed, load, generate), board)
        traces, walls = decoded
    except RunStopped as exc:
        yield f"■ {exc}", None
        return
    except (ValueError, TypeError, OverflowError) as exc:
        yield f"⚠ {exc}", None
        return
    first = next(iter(traces.values()))
    state = {"prompt_ids": first.header.prompt_ids, "seed": int(seed), "model": model_name,
             **lanes_state(traces), "walls": walls}
    timed = min((len(w) for w in walls.values()), default=0)
    how = (f": a warm-up round, then {timed} timed round{'s' if timed > 1 else ''} (wall times are medians)" if timed
           else " (once each: no time for timed rounds, so no wall speedups)")
    ran = f"Ran {plural(len(traces), 'lane')} on the same prompt with seed {int(seed)}{how}."
    yield "\n\n".join(part for part in (f"{ran} {streams_line(configs)}", forwards_verdict(traces)) if part), state


def _with_board(events: Iterator[dict[str, Any]], board: LaneBoard) -> Any:
    """Feed each lane event to the board and yield its text when it changed; return what `events` returns."""
    last = ""
    while True:
        try:
            event = next(events)
        except StopIteration as end:
            return end.value
        board.update(event)
        text = board.markdown()
        if text != last:
            last = text
            yield text, None


def seed_problem(seed: Any) -> Optional[str]:
    """A message naming the seed box and the fix, for a box left empty or holding something that is not a number."""
    if seed is None or (isinstance(seed, str) and not seed.strip()):
        return "Seed (all lanes): the box is empty. Type a whole number, e.g. 0 (every lane uses the same seed)."
    try:
        float(seed)
    except (TypeError, ValueError):
        return f"Seed (all lanes): {str(seed)[:20]!r} is not a number. Type a whole number, e.g. 0."
    return None


def lanes_state(traces: dict[str, Trace]) -> dict[str, Any]:
    """The lanes as session state: their headers (the what-if reads configs from them) and a handle to the traces'
    JSON in the state store (components/serve/state_budget.py: compressed, under the visitors' byte budgets)."""
    text = "{" + ",".join(f"{json.dumps(n)}:{trace_json(t)}" for n, t in traces.items()) + "}"
    key = STORE.put(text)
    remember_parsed(key, dict(traces), len(text))
    return {"key": key, "lanes": {n: {"header": t.to_dict()["header"]} for n, t in traces.items()}}


def decode_lanes(model_name: str, prompt: Any, configs: dict[str, DecodeConfig], seed: int,
                 load: Optional[Callable[[str], Any]], generate: Optional[Callable[..., Any]],
                 timed_rounds: int = TIMED_ROUNDS) -> tuple[dict[str, Trace], dict[str, list[float]]]:
    """Decode every lane in interleaved rounds (components/run/lane_rounds.py): (traces, timed seconds per lane);
    through the GPU-decorated `record_lanes` (time cap, Stop) unless a test injects load / generate. ValueError
    with the message of a failed lane; RunStopped after the job's Stop."""
    steps = decode_lanes_steps(model_name, prompt, configs, seed, load, generate, timed_rounds)
    while True:
        try:
            next(steps)
        except StopIteration as end:
            return end.value


def decode_lanes_steps(model_name: str, prompt: Any, configs: dict[str, DecodeConfig], seed: int,
                       load: Optional[Callable[[str], Any]], generate: Optional[Callable[..., Any]],
                       timed_rounds: int = TIMED_ROUNDS) -> Any:
    """decode_lanes as a generator: yields the lanes' progress and lane_done events, returns (traces, walls)."""
    plain = {n: c.to_dict() for n, c in configs.items()}
    if load is None and generate is None:
        events = record_lanes(prompt, model_name, plain, seed, timed_rounds)
    else:
        events = lane_rounds(plain, _direct(prompt, model_name, seed, load or _load, generate or _generate),
                             float("inf"), timed_rounds)
    out: dict[str, Any] = {}
    for event in events:
        if event["kind"] == "error":
            raise ValueError(event["message"])
        if event["kind"] == "stopped":
            raise RunStopped(event["message"])
        if event["kind"] == "done":
            out = event
        else:
            yield event
    return {n: Trace.from_dict(t) for n, t in out["traces"].items()}, out.get("walls") or {}


def _load(name: str) -> Any:
    from components.serve.model_pool import get_model

    return get_model(name)


def _generate(*args: Any, **kwargs: Any) -> Any:
    from s2d2.api import generate

    return generate(*args, **kwargs)


def _direct(prompt: Any, model_name: str, seed: int, load: Callable[[str], Any],
            generate: Callable[..., Any]) -> Callable[[str, dict[str, Any], float], Iterator[dict[str, Any]]]:
    """A lane runner without the GPU worker (tests inject a model): one "done" event per decode."""
    def run(name: str, config: dict[str, Any], left: float) -> Iterator[dict[str, Any]]:
        trace = generate(load(model_name), prompt, DecodeConfig.from_dict(config), seed=seed).trace
        yield {"kind": "done", "trace": trace.to_dict()}

    return run


# -- views ------------------------------------------------------------------------------------------------------

NO_RUN = ("No comparison yet: pick 2–4 lanes and press **▶ Run all lanes**. Every lane decodes the same prompt with "
          "the same seed; the lanes, their forwards on one shared axis and their metrics appear here.")
VIEW_OUT = ["cmp_lanes_html", "cmp_nfe", "cmp_wall", "cmp_metrics", "cmp_diff"]


def traces_of(state: Any) -> dict[str, Trace]:
    if not isinstance(state, dict) or not isinstance(state.get("lanes"), dict):
        return {}
    if "key" not in state:  # lanes kept whole (states written before the store)
        return {n: Trace.from_dict(t) for n, t in state["lanes"].items()}
    hit = parsed(state["key"])
    if hit is not None:
        return hit
    text = STORE.get(state["key"])
    if text is None:  # dropped by the store's budgets: no comparison to show
        return {}
    traces = {n: Trace.from_dict(t) for n, t in json.loads(text).items()}
    remember_parsed(state["key"], traces, len(text))
    return traces


def comparison_of(state: Any, traces: dict[str, Trace]) -> Comparison:
    """The comparison of the session's lanes, with their timed runs (wall medians and noise) when it has them."""
    walls = state.get("walls") if isinstance(state, dict) else None
    return compare_traces(traces, walls if isinstance(walls, dict) and walls else None)


def titled(state: Any, traces: dict[str, Trace]) -> tuple[dict[str, Trace], Any, dict[str, str]]:
    """The lanes under the names the page prints (lane_names.py): (traces by title, the state with its walls by
    title, {title: key}). Everything a comparison's views say about a lane then says its title."""
    titles = lane_titles(traces)
    walls = state.get("walls") if isinstance(state, dict) else None
    shown = {"walls": {titles.get(k, k): w for k, w in walls.items()}} if isinstance(walls, dict) else {}
    return {titles[k]: t for k, t in traces.items()}, shown, {v: k for k, v in titles.items()}


def answer_blocks(comp: Comparison) -> dict[int, int]:
    """Reader's block number (0 = the prompt prefill, 1 = the first aligned block holding answer tokens) -> index
    into comp.blocks."""
    out: dict[int, int] = {}
    first = min((b.index for b in comp.blocks if b.index != PREFILL_BLOCK), default=0)
    for i, b in enumerate(comp.blocks):
        out[0 if b.index == PREFILL_BLOCK else b.index - first + 1] = i
    return out


def block_label(comp: Comparison, number: int) -> str:
    b = comp.blocks[answer_blocks(comp)[number]]
    if b.index == PREFILL_BLOCK:
        return "the prompt prefill (block 0)"
    return (f"answer block {number} (positions {b.start}–{b.start + b.length - 1}, "
            f"{plural(comp.grid, 'position')} per block)")


def block_html(comp: Comparison, traces: dict[str, Trace], number: int, keys: Optional[dict[str, str]] = None) -> str:
    """One column per lane: what it spent in answer block `number` and its canvas after its last step there; under
    each title, the lane's preset (`keys`: {title: lane key}) in small type."""
    block = comp.blocks[answer_blocks(comp)[number]]
    cols = []
    for name, trace in traces.items():
        detail = lane_detail((keys or {}).get(name, ""))
        detail = f'<div class="s2d2-lane-id">{html.escape(detail)}</div>' if detail else ""
        lb = block.lanes[name]
        kinds = ", ".join(f"{k} {v}" for k, v in lb.nfe_by_kind.items()) or "none"
        info = (f"{plural(lb.nfe, 'forward')} ({kinds}) · {plural(len(lb.steps), 'step')} · "
                f"{plural(len(lb.commits), 'token')} committed")
        cols.append(f'<div class="s2d2-lane"><h4>{html.escape(name)}</h4>{detail}<div>{html.escape(info)}</div>'
                    f'{render_canvas(trace, lb.last_step)}</div>')
    note = ("Lanes are aligned by block position (steps inside a block are not equivalent across methods). "
            f"Showing {block_label(comp, number)}.")
    lanes = "".join(cols)
    return f'<p>{html.escape(note)}</p><div class="s2d2-lanes">{lanes}</div>{legend_for(lanes)}'


def lanes_figure(comp: Comparison, traces: dict[str, Trace], number: int, axis: str = "nfe") -> go.Figure:
    """Every forward of every lane on one shared axis (forwards so far, or cumulative forward wall time of the
    lane's median run), by kind."""
    sel = comp.blocks[answer_blocks(comp)[number]].index
    short = title_short  # "Lane 3" on the axis (the titles head the lanes above; the hover says the whole title)
    pts: dict[str, dict[str, list[Any]]] = {}
    for name, trace in traces.items():
        wall = 0.0
        for f, blk in zip(trace.forwards, forward_blocks(trace, comp.grid)):
            wall += f.wall_s
            p = pts.setdefault(f.kind, {"x": [], "y": [], "size": [], "text": []})
            p["x"].append(f.nfe_after if axis == "nfe" else round(wall, 6))
            p["y"].append(short(name))
            p["size"].append(13 if blk == sel else 6)
            p["text"].append(f"{name}: {f.kind}, step {f.step}, {f.query_tokens} query tokens")
    if axis == "nfe":
        title, sub = "Every forward of every lane", "big markers: the selected block"
        xtitle = "forwards so far"
    else:
        timed = [m for m in comp.lanes if m.wall_noise is not None]
        title = "Every forward, by wall time"
        sub = (f"each lane's median run of {min(m.wall_runs for m in timed)}" if timed else
               "one run each: wall times are noise here")
        xtitle = "forward wall time so far (s)"
    fig = go.Figure()
    # Title in the top margin (its own room, never clipped), legend just above the plot area, axis title below.
    fig.update_layout(template="plotly_white", height=190 + 45 * len(traces), margin=dict(l=110, r=20, t=110, b=50),
                      title=dict(text=f"{title}<br><sup>{sub}</sup>", font=dict(size=13), x=0, xanchor="left",
                                 y=1, yref="container", yanchor="top", pad=dict(t=12, l=10)),
                      xaxis_title=xtitle, legend=dict(orientation="h", x=0, y=1.02, yanchor="bottom"))
    for kind, p in pts.items():
        fig.add_trace(go.Scatter(x=p["x"], y=p["y"], mode="markers", name=KIND_WORDS.get(kind, kind), text=p["text"],
                                 hoverinfo="text",
                                 marker=dict(color=KIND_COLOURS.get(kind, "#444"), size=p["size"], symbol="square")))
    fig.update_yaxes(categoryorder="array", categoryarray=[short(n) for n in traces][::-1])
    return fig


def _routed(v: Optional[bool]) -> str:
    return "ends (no step)" if v is None else ("verifies" if v else "skips")


def divergence_text(comp: Comparison, traces: dict[str, Trace], d: Any) -> str:
    """What differs at the first step where two S2D2 lanes part: the routing decision, the block each works in (an
    earlier step committed a different number of tokens), or the number of steps."""
    a, b = d.lanes
    ba, bb = (d.block[0] - traces[a].blocks[0].index + 1, d.block[1] - traces[b].blocks[0].index + 1) \
        if traces[a].blocks and traces[b].blocks else d.block
    if d.verify[0] != d.verify[1] and None not in d.verify:
        what = f"**{a}** {_routed(d.verify[0])} and **{b}** {_routed(d.verify[1])}"
    elif None in d.verify:
        done = a if d.verify[0] is None else b
        what = f"**{done}** has already finished while the other lane still works"
    else:
        what = (f"both {'verify' if d.verify[0] else 'skip'}, but **{a}** is in its answer block {ba} and **{b}** in "
                f"its answer block {bb}: earlier steps committed different numbers of tokens")
    return f"* Step {d.step + 1} is the first where **{a}** and **{b}** differ: {what}."


def unaligned_pairs(traces: dict[str, Trace]) -> list[str]:
    """One line per pair of S2D2 lanes whose steps do not correspond (different blocks): not compared by step."""
    s2d2 = [n for n, t in traces.items() if t.header.config.get("method") == "s2d2"]
    return [f"* **{a}** (B = {traces[a].header.config.get('block_length')}) and **{b}** (B = "
            f"{traces[b].header.config.get('block_length')}): different block lengths, so their steps do not "
            "correspond and their routing is not compared step by step."
            for i, a in enumerate(s2d2) for b in s2d2[i + 1:] if not same_blocks(traces[a], traces[b])]


def diff_markdown(comp: Comparison, traces: Optional[dict[str, Trace]] = None) -> str:
    lines = [comp.reference_note + ". " + wall_note(comp)]
    for d in comp.diffs:
        lines.append(f"* **{d.lane}** first differs from AR at output token {d.first_index}: AR "
                     f"`{d.ar_ids[d.first_index:d.first_index + 5]}` vs `{d.lane_ids[d.first_index:d.first_index + 5]}`"
                     f" — AR text {json.dumps(d.ar_text[:80])}, lane text {json.dumps(d.lane_text[:80])}")
    for v in comp.divergences:
        lines.append(divergence_text(comp, traces or {}, v) if traces else
                     f"* Routing: **{v.lanes[0]}** and **{v.lanes[1]}** first differ at step {v.step + 1}.")
    lines += unaligned_pairs(traces or {})
    return "\n".join(lines)


def compare_views(state: Any, number: Any = 1) -> dict[str, Any]:
    """The lanes at answer block `number` (clamped; a blank box changes nothing)."""
    if number is None:
        return {}
    traces = traces_of(state)
    if not traces:
        return {"cmp_lanes_html": f"<p>{NO_RUN}</p>"}
    traces, shown, keys = titled(state, traces)
    comp = comparison_of(shown, traces)
    numbers = answer_blocks(comp)
    try:
        k = int(round(float(number)))
    except (TypeError, ValueError, OverflowError):
        return {}
    k = max(min(numbers), min(k, max(numbers)))
    return {"cmp_lanes_html": block_html(comp, traces, k, keys), "cmp_nfe": lanes_figure(comp, traces, k, "nfe"),
            "cmp_wall": lanes_figure(comp, traces, k, "wall"), "cmp_metrics": metrics_table(comp),
            "cmp_diff": diff_markdown(comp, traces)}


def block_range(state: Any) -> tuple[int, int]:
    """(lowest, highest) block number of a comparison: 0 with a prefill row, else 1; (1, 1) without one."""
    traces = traces_of(state)
    if not traces:
        return 1, 1
    numbers = answer_blocks(compare_traces(traces))
    return min(numbers), max(numbers)
