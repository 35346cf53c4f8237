"""How one phase's handler time split between the students and everyone else, from the server's ledger
(benchmarks/share_ledger.py), for `load_test --classroom --one-address` figure (c) (benchmarks/one_address.py).

Pure: `split_lines` reads only the records and the phase's bounds; each line is printed as it stands.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any, Iterable

from benchmarks.percentiles import pct


def _in_phase(records: Iterable[list], t0: float, t1: float) -> list[list]:
    return [r for r in records if t0 <= r[0] < t1]


def _ms(values: list[float]) -> str:
    return f"p50 {pct(values, 0.5) * 1e3:.0f} ms, p95 {pct(values, 0.95) * 1e3:.0f} ms"


def split_lines(ledger: dict[str, Any], students: set[str], t0: float, t1: float, step_fn: str = "step") -> list[str]:
    """What the pages of `students` (session hashes) and the other pages (grouped by unit) used between
    monotonic moments `t0` and `t1`: handler CPU seconds and events per page; for the students' steps (events named
    `step_fn`), seconds waiting in Gradio's line, the event's wall, and each handler's CPU."""
    charges = _in_phase(ledger["charges"], t0, t1)
    events = _in_phase(ledger["events"], t0, t1)
    cpu: dict[str, float] = defaultdict(float)
    runs: dict[str, int] = defaultdict(int)
    who: dict[str, tuple[str, str]] = {}
    for _, session, unit, member, seconds in charges:
        cpu[session] += seconds
        who[session] = (unit, member)
    for _, session, unit, member, *_ in events:
        runs[session] += 1
        who.setdefault(session, (unit, member))
    others: dict[str, list[str]] = defaultdict(list)  # unit -> its pages that are not students'
    for session in who:
        if session not in students and (runs[session] or cpu[session] >= 1e-3):  # pages idle in the phase: left out
            others[who[session][0]].append(session)
    mine = [s for s in who if s in students]
    total = sum(cpu.values())
    span = max(1e-9, t1 - t0)
    each = [cpu[s] for s in mine]
    lines = [f"handler CPU over {span:.0f} s: {total:.1f} s in all ({total / span:.2f} CPU s per s); students "
             f"{sum(each):.1f} s over {len(mine)} pages, {sum(runs[s] for s in mine)} events (a page: mean "
             f"{sum(each) / max(1, len(mine)):.2f} s, max {max(each, default=0):.2f} s)"]
    mean_student = sum(each) / max(1, len(mine))
    for unit, sessions in sorted(others.items(), key=lambda kv: -sum(cpu[s] for s in kv[1])):
        used = sum(cpu[s] for s in sessions)
        busiest = max(cpu[s] for s in sessions)
        lines.append(f"  other pages of unit {unit}: {len(sessions)} pages ({len({who[s][1] for s in sessions})} "
                     f"members), {used:.1f} s ({used / max(1e-9, total):.0%} of all), "
                     f"{sum(runs[s] for s in sessions)} events; a page: mean {used / len(sessions):.2f} s = "
                     f"{used / len(sessions) / max(1e-9, mean_student):.1f} x a student's, the busiest {busiest:.2f} s")
    named = [e for e in events if e[4] == step_fn]
    flood = [e for e in named if e[1] not in students]
    lines.append(f"  seconds of places held by {step_fn} events: students {_held(named, students, True, t1):.0f}, "
                 f"other pages {_held(named, students, False, t1):.0f}; other pages' {step_fn} events "
                 f"{len(flood)}, waiting in line {_ms([e[5] for e in flood])}, wall {_ms([e[6] for e in flood])}; "
                 f"started while the same page had one running: {_overlapping(flood)}")
    steps = [e for e in events if e[1] in students and e[4] == step_fn]
    step_cpu = [c[4] for c in charges if c[1] in students]
    lines.append(f"students' steps ({len(steps)}): waiting in Gradio's line {_ms([e[5] for e in steps])}; event wall "
                 f"(start to result sent) {_ms([e[6] for e in steps])}; handler CPU per event {_ms(step_cpu)}")
    return lines


def _held(events: list[list], students: set[str], theirs: bool, t1: float) -> float:
    """Seconds of handler places held (each event's wall, cut at `t1`) by the students' events or the others'."""
    return sum(max(0.0, min(e[0] + e[6], t1) - e[0]) for e in events if (e[1] in students) == theirs)


def _overlapping(events: list[list]) -> int:
    """How many of `events` started while an earlier event of the same page still ran."""
    ends: dict[str, float] = {}
    n = 0
    for start, session, *_, wall in sorted(events):
        n += start < ends.get(session, float("-inf"))
        ends[session] = max(ends.get(session, float("-inf")), start + wall)
    return n
