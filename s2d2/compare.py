"""Side-by-side comparison of decoding configurations on one prompt and seed (docs/app-design.md,
'Comparing runs aligned by block').

`compare` runs 2-4 configurations; `compare_traces` is the pure part: per-lane metrics, equality with the AR lane,
and the lanes aligned by block. Block indices differ between lanes with different block lengths (AR has B = 1), so
lanes are aligned on a grid of G positions, G = lcm of the lanes' block lengths: every lane block lies inside exactly
one grid block. Steps inside a block are not equivalent across lanes; only block totals are compared. A pipeline
lane (D2F, `loop="pipeline"`) is the exception: its blocks start right after the prompt and several are in flight
at once, so its forwards and steps count in the grid block of their first block in flight and its commits in the
grid block of their position.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Optional

from .config import DecodeConfig
from .metrics import trace_metrics
from .timing import WallStats, median_index, ratio_noise, trusted
from .trace import Trace

MIN_LANES, MAX_LANES = 2, 4
PREFILL_BLOCK = -1  # aligned-block index of forwards that belong to no generation block (the prompt prefill)


@dataclass
class LaneMetrics:
    name: str
    method: str
    policy: Optional[str]  # None for AR and diffusion baselines
    block_length: int
    nfe: int
    nfe_by_kind: dict[str, int]
    query_tokens: int
    generated_tokens: int
    tokens_per_forward: float
    nfe_per_token: Optional[float]
    wall_seconds: float  # the median of the timed runs when there were several (s2d2/timing.py), else the one run
    wall_per_token: Optional[float]
    speedup_nfe: Optional[float]  # AR NFE/token ÷ this lane's NFE/token; None without an AR lane
    speedup_wall: Optional[float]  # the same with wall seconds per token
    mean_acceptance_length: Optional[float]
    draft_acceptance_rate: Optional[float]
    verify_rate: float
    equals_ar: Optional[bool]  # None without an AR lane
    output_ids: list[int]
    output_text: str
    edits: int = 0  # LLaDA2.x self-corrections (editing loop)
    edits_per_token: float = 0.0
    wall_runs: int = 1  # timed runs behind wall_seconds (warm-up excluded when it is more than one)
    wall_noise: Optional[float] = None  # their relative half-range; None with a single run (noise unknown)
    speedup_wall_noise: Optional[float] = None  # relative noise of speedup_wall (both lanes' noises added)

    @property
    def speedup_wall_trusted(self) -> bool:
        """speedup_wall is worth printing as a number: both lanes timed repeatedly, noise ≤ timing.MAX_NOISE."""
        return self.speedup_wall is not None and trusted(self.speedup_wall_noise)


@dataclass
class TokenDiff:
    """Where a lane's output first departs from the AR lane's output."""

    lane: str
    first_index: int  # first differing output index (or the shorter length when one is a prefix of the other)
    ar_ids: list[int]
    lane_ids: list[int]
    ar_text: str
    lane_text: str


@dataclass
class LaneBlock:
    """What one lane did inside one aligned block."""

    steps: list[int]  # indices into the lane's trace.steps
    nfe_by_kind: dict[str, int]
    nfe: int
    commits: list[tuple[int, int, str, str]]  # (position, token, text, how), in commit order
    last_step: int  # scrubber value after the lane's last step in this block (0: none yet)


@dataclass
class AlignedBlock:
    index: int  # grid block index; PREFILL_BLOCK for the prompt prefill
    start: int  # first position of the grid block (-1 for the prefill row)
    length: int
    lanes: dict[str, LaneBlock]


@dataclass
class DecisionDivergence:
    """The first step at which two S2D2 lanes route differently (by step order; later steps are not aligned)."""

    lanes: tuple[str, str]
    step: int
    block: tuple[int, int]
    verify: tuple[Optional[bool], Optional[bool]]


@dataclass
class Comparison:
    lanes: list[LaneMetrics]
    reference: Optional[str]  # the AR lane used for speedups and equality, or None
    reference_note: str  # how speedups are computed, or why there are none
    diffs: list[TokenDiff]
    grid: int  # positions per aligned block
    blocks: list[AlignedBlock]
    divergences: list[DecisionDivergence] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def lane(self, name: str) -> LaneMetrics:
        return next(m for m in self.lanes if m.name == name)


# -- running ------------------------------------------------------------------------------------------------------

def check_configs(configs: dict[str, DecodeConfig]) -> None:
    if not isinstance(configs, dict) or not MIN_LANES <= len(configs) <= MAX_LANES:
        n = len(configs) if isinstance(configs, dict) else "no"
        raise ValueError(f"configs: compare needs {MIN_LANES} to {MAX_LANES} named configurations, got {n}")
    for name, cfg in configs.items():
        if not isinstance(name, str) or not name.strip():
            raise ValueError("configs: every lane needs a non-empty name")
        if not isinstance(cfg, DecodeConfig):
            raise ValueError(f"configs[{name!r}]: expected a DecodeConfig, got {type(cfg).__name__}")


def compare(model: Any, prompt: Any, configs: dict[str, DecodeConfig], seed: int = 0,
            detailed: bool = True, timed_rounds: int = 0) -> Comparison:
    """Run every configuration on the same prompt and seed, then `compare_traces`. With `timed_rounds` > 0 the
    first round is a warm-up that is not timed and `timed_rounds` interleaved rounds follow; each lane keeps its
    median run's trace and wall figures are medians with their noise (s2d2/timing.py)."""
    from .api import generate  # torch loads only when a model actually runs

    check_configs(configs)
    runs: dict[str, list[Trace]] = {name: [] for name in configs}
    for _ in range(1 + max(0, int(timed_rounds))):
        for name, cfg in configs.items():
            first = runs[name][0].header.costs if runs[name] else None  # a cost-aware lane routes alike every round
            runs[name].append(generate(model, prompt, cfg.validate(), seed=seed, detailed=detailed,
                                       costs=first).trace)
    walls = ({n: [t.footer.wall_s if t.footer else 0.0 for t in r[1:]] for n, r in runs.items()} if timed_rounds
             else None)
    traces = {n: r[1 + median_index(walls[n])] if walls else r[0] for n, r in runs.items()}
    return compare_traces(traces, walls)


# -- the pure comparison ------------------------------------------------------------------------------------------

def compare_traces(traces: dict[str, Trace], walls: Optional[dict[str, list[float]]] = None) -> Comparison:
    """The pure comparison. `walls`: each lane's timed runs in seconds (warm-up excluded); without them a lane's
    wall time is its trace's single run, whose noise is unknown (so its wall speedup is never `trusted`)."""
    if not isinstance(traces, dict) or not MIN_LANES <= len(traces) <= MAX_LANES:
        raise ValueError(f"traces: compare needs {MIN_LANES} to {MAX_LANES} named traces")
    prompts = {tuple(t.header.prompt_ids) for t in traces.values()}
    if len(prompts) != 1:
        raise ValueError("traces: the lanes decoded different prompts; compare needs one prompt")
    ref = next((n for n, t in traces.items() if t.header.config.get("method") == "ar"), None)
    stats = {n: WallStats(tuple((walls or {}).get(n) or [t.footer.wall_s if t.footer else 0.0]))
             for n, t in traces.items()}
    lanes = [lane_metrics(name, t, traces[ref] if ref else None, stats[name], stats[ref] if ref else None)
             for name, t in traces.items()]
    if ref:
        acc = traces[ref].header.config.get("ar_accounting", "fused")
        note = (f"speedups are vs the AR lane {ref!r} ({acc} accounting: "
                f"{'1 forward' if acc == 'fused' else '2 forwards'} per token), per generated token, by forwards and "
                "by wall time")
    else:
        note = "no AR lane: speedups vs AR and AR equality are not available (add an AR lane)"
    diffs = [token_diff(m.name, traces[ref], traces[m.name]) for m in lanes if ref and m.equals_ar is False]
    grid = math.lcm(*(_grid_length(t) for t in traces.values()))
    return Comparison(lanes, ref, note, diffs, grid, align_blocks(traces, grid), decision_divergences(traces))


def _grid_length(trace: Trace) -> int:
    """Positions every block of the lane fits in: the configured B, or (adaptive_block) the lcm of the lengths used;
    an adaptive block of length L starts at a multiple of L, so it lies inside one such grid block."""
    lengths = {b.length for b in trace.blocks if b.length > 0}
    return math.lcm(_block_length(trace), *lengths) if lengths else _block_length(trace)


def _block_length(trace: Trace) -> int:
    cfg = trace.header.config
    return 1 if cfg.get("method") == "ar" else int(cfg.get("block_length", 1))


def _ratio(num: Optional[float], den: Optional[float]) -> Optional[float]:
    return num / den if num is not None and den else None


def lane_metrics(name: str, trace: Trace, ar: Optional[Trace], wall: Optional[WallStats] = None,
                 ar_wall: Optional[WallStats] = None) -> LaneMetrics:
    m = trace_metrics(trace)
    cfg = trace.header.config
    gen = m["generated_tokens"]
    wall = wall or WallStats((m["wall_seconds"],))
    seconds = wall.median if wall.median is not None else m["wall_seconds"]
    wall_pt = seconds / gen if gen else None
    sp_nfe = sp_wall = equal = sp_noise = None
    if ar is not None:
        a = trace_metrics(ar)
        ar_wall = ar_wall or WallStats((a["wall_seconds"],))
        a_seconds = ar_wall.median if ar_wall.median is not None else a["wall_seconds"]
        a_wall_pt = a_seconds / a["generated_tokens"] if a["generated_tokens"] else None
        sp_nfe, sp_wall = _ratio(a["nfe_per_token"], m["nfe_per_token"]), _ratio(a_wall_pt, wall_pt)
        # the AR lane against itself is exactly 1: no noise once it was timed repeatedly
        sp_noise = ratio_noise(wall, ar_wall) if ar is not trace else (0.0 if wall.noise is not None else None)
        equal = _out_ids(trace) == _out_ids(ar)
    return LaneMetrics(
        name=name, method=cfg.get("method", "?"), policy=cfg.get("policy") if cfg.get("method") == "s2d2" else None,
        block_length=_block_length(trace), nfe=m["nfe"], nfe_by_kind=m["nfe_by_kind"],
        query_tokens=m["query_tokens"], generated_tokens=gen, tokens_per_forward=m["tokens_per_forward"],
        nfe_per_token=m["nfe_per_token"], wall_seconds=seconds, wall_per_token=wall_pt,
        speedup_nfe=sp_nfe, speedup_wall=sp_wall, mean_acceptance_length=m["mean_acceptance_length"],
        draft_acceptance_rate=m["draft_acceptance_rate"], verify_rate=m["verify_rate"], equals_ar=equal,
        output_ids=_out_ids(trace), output_text=trace.footer.output_text if trace.footer else "",
        edits=m["edits"], edits_per_token=m["edits_per_token"], wall_runs=len(wall.runs), wall_noise=wall.noise,
        speedup_wall_noise=sp_noise,
    )


def _out_ids(trace: Trace) -> list[int]:
    return list(trace.footer.output_ids) if trace.footer else trace.replay()


def token_diff(name: str, ar: Trace, lane: Trace) -> TokenDiff:
    a, b = _out_ids(ar), _out_ids(lane)
    first = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    text = (lambda t: t.footer.output_text if t.footer else "")
    return TokenDiff(name, first, a, b, text(ar), text(lane))


def align_blocks(traces: dict[str, Trace], grid: int) -> list[AlignedBlock]:
    """Every lane's steps, forwards and commits bucketed into grid blocks of `grid` positions."""
    rows: dict[int, AlignedBlock] = {}

    def row(index: int) -> AlignedBlock:
        if index not in rows:
            start, length = (-1, 0) if index == PREFILL_BLOCK else (index * grid, grid)
            rows[index] = AlignedBlock(index, start, length, {})
        return rows[index]

    for name, trace in traces.items():
        for f, index in zip(trace.forwards, forward_blocks(trace, grid)):
            lb = _lane_block(row(index), name)
            lb.nfe += 1
            lb.nfe_by_kind[f.kind] = lb.nfe_by_kind.get(f.kind, 0) + 1
        starts = {b.index: b.start for b in trace.blocks}
        for s in trace.steps:
            start = starts.get(s.block, s.window[0] if s.window else 0)
            lb = _lane_block(row(start // grid), name)
            lb.steps.append(s.index)
            lb.last_step = s.index + 1
            for c in s.commits:  # by position: a pipeline (D2F) step decodes in several blocks
                _lane_block(row(c.position // grid), name).commits.append((c.position, c.token, c.text, c.how))
    blocks = [rows[i] for i in sorted(rows)]
    for b in blocks:  # a lane that did nothing in a block still gets an (empty) entry, so views need no checks
        for name in traces:
            _lane_block(b, name)
    _carry_last_step(blocks, list(traces))
    return blocks


def forward_blocks(trace: Trace, grid: int) -> list[int]:
    """Aligned-block index of every forward; a forward outside every block (the prefill) gets PREFILL_BLOCK."""
    starts = {b.index: b.start for b in trace.blocks}
    return [starts[f.block] // grid if f.block in starts else PREFILL_BLOCK for f in trace.forwards]


def _lane_block(block: AlignedBlock, lane: str) -> LaneBlock:
    if lane not in block.lanes:
        block.lanes[lane] = LaneBlock([], {}, 0, [], 0)
    return block.lanes[lane]


def _carry_last_step(blocks: list[AlignedBlock], lanes: list[str]) -> None:
    """A block a lane never stepped in shows that lane's canvas as it was after its previous block."""
    for lane in lanes:
        last = 0
        for b in blocks:
            lb = b.lanes[lane]
            if lb.steps:
                last = lb.last_step
            else:
                lb.last_step = last


def decision_divergences(traces: dict[str, Trace]) -> list[DecisionDivergence]:
    """For every pair of S2D2 lanes with the same blocks (block length, adaptive or not), the first step (in step
    order) where their routing decisions differ. Lanes with different blocks are not compared step by step: their
    k-th steps work on different positions, so "both verify, in different blocks" would be a false story."""
    s2d2 = [n for n, t in traces.items() if t.header.config.get("method") == "s2d2"]
    out = []
    for i, a in enumerate(s2d2):
        for b in s2d2[i + 1:]:
            if not same_blocks(traces[a], traces[b]):
                continue
            d = _first_divergence(traces[a], traces[b])
            if d is not None:
                out.append(DecisionDivergence((a, b), *d))
    return out


def same_blocks(a: Trace, b: Trace) -> bool:
    """True when two lanes decode the same blocks, so that their steps can be compared in order."""
    keys = ("block_length", "adaptive_block")
    return all(a.header.config.get(k) == b.header.config.get(k) for k in keys)


def _first_divergence(a: Trace, b: Trace) -> Optional[tuple[int, tuple[int, int], tuple[Any, Any]]]:
    for sa, sb in zip(a.steps, b.steps):
        va = sa.decision.verify if sa.decision else None
        vb = sb.decision.verify if sb.decision else None
        if va != vb or sa.block != sb.block:  # a different block means the trajectories already split
            return sa.index, (sa.block, sb.block), (va, vb)
    if len(a.steps) != len(b.steps):
        k = min(len(a.steps), len(b.steps))
        longer = a if len(a.steps) > k else b
        s = longer.steps[k]
        v = s.decision.verify if s.decision else None
        return k, (s.block, s.block), (v, None) if longer is a else (None, v)
    return None
