"""The Compare tab's metrics table: one row per quantity, one column per lane, each figure printed with the
precision it has (forwards are counts; wall times carry their noise, and a wall speedup whose noise is too large
for a number is not printed as one: s2d2/timing.py)."""
from __future__ import annotations

from typing import Any, Callable, Optional

from s2d2.compare import Comparison, LaneMetrics
from s2d2.timing import MAX_NOISE
from components.views.plural import plural


def _num(digits: int, unit: str = "") -> Callable[[Any], str]:
    return lambda v: "–" if v is None else f"{v:.{digits}f}{unit}"


def _share(v: Optional[float]) -> str:
    return "–" if v is None else f"{100 * v:.0f} %"


def _count(v: Optional[int]) -> str:
    return "–" if v is None else str(v)


def seconds_text(v: float) -> str:
    """Two significant digits, in ms below a second: "11 ms", "1.5 s" (more digits would be noise)."""
    two = lambda x: f"{float(f'{x:.2g}'):g}"  # noqa: E731  (two digits, never "1e+02")
    return f"{two(1000 * v)} ms" if v < 1 else f"{two(v)} s"


def wall_cell(m: LaneMetrics) -> str:
    """"0.93 s (median of 2 runs, ±6 %)", or the one run and "noise unknown"."""
    seconds = seconds_text(m.wall_seconds)
    if m.wall_noise is None:
        return f"{seconds} (one run: noise unknown)"
    return f"{seconds} (median of {plural(m.wall_runs, 'run')}, ±{100 * m.wall_noise:.0f} %)"


def wall_speedup_cell(m: LaneMetrics) -> str:
    """The wall speedup with its noise, or why it is not shown."""
    if m.speedup_wall is None:
        return "–"
    if m.speedup_wall_noise is None:
        return "– (timed once: too noisy to compare)"
    noise = f"±{100 * m.speedup_wall_noise:.0f} %"
    if m.speedup_wall_trusted:
        return f"{m.speedup_wall:.1f}× ({noise})"
    return f"– (too noisy: {noise})"


# (label, the cell of one lane)
METRIC_ROWS: list[tuple[str, Callable[[LaneMetrics], str]]] = [
    ("forwards (NFE: model calls)", lambda m: _count(m.nfe)),
    ("tokens per forward", lambda m: _num(2)(m.tokens_per_forward)),
    ("speedup vs AR (forwards per token)", lambda m: _num(2, "×")(m.speedup_nfe)),
    ("wall time", wall_cell),
    ("speedup vs AR (wall time per token)", wall_speedup_cell),
    # (vLLM's convention counts a bonus token per check, which S2D2 never makes: 5.00 with blocks of 4 is no error)
    ("mean acceptance length (vLLM: accepted per check + 1)", lambda m: _num(2)(m.mean_acceptance_length)),
    ("draft acceptance rate", lambda m: _share(m.draft_acceptance_rate)),
    ("verify rate", lambda m: _share(m.verify_rate)),
    ("query tokens", lambda m: _count(m.query_tokens)),
    ("generated tokens", lambda m: _count(m.generated_tokens)),
    ("edits per token (self-correction)", lambda m: _num(2)(m.edits_per_token)),
]
WALL_ROWS = ("wall time", "speedup vs AR (wall time per token)")


def metrics_rows(comp: Comparison, wall: bool = True) -> list[list[Any]]:
    rows = [[label] + [cell(m) for m in comp.lanes] for label, cell in METRIC_ROWS if wall or label not in WALL_ROWS]
    rows.append(["output equals AR"] + [_equal(m.equals_ar) for m in comp.lanes])
    return rows


def metrics_table(comp: Comparison, wall: bool = True) -> dict[str, Any]:
    """gr.Dataframe value with the lane names as column headers (`wall=False`: without the wall-time rows, for
    lanes that were not timed together)."""
    return {"headers": ["metric"] + [m.name for m in comp.lanes], "data": metrics_rows(comp, wall)}


def wall_note(comp: Comparison) -> str:
    """How the wall figures were measured and how far they can be trusted, in one sentence."""
    runs = {m.wall_runs for m in comp.lanes if m.wall_noise is not None}
    if not runs:
        return ("Wall times: each lane ran once, so they carry the model's warm-up and whatever else the machine was "
                "doing; no wall speedup is shown.")
    worst = max(m.wall_noise for m in comp.lanes if m.wall_noise is not None)
    n = min(runs)
    return (f"Wall times: the median of {n} timed runs per lane, taken in interleaved rounds after one warm-up round "
            f"that is not counted; the runs of a lane spread by up to ±{100 * worst:.0f} %. A wall speedup is shown "
            f"only when its noise is at most ±{100 * MAX_NOISE:.0f} %; forwards are exact.")


def _equal(v: Optional[bool]) -> str:
    return "– (no AR lane)" if v is None else ("✓ token for token" if v else "✗ differs")
