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
    """What the pages of `students` (session hashes) and the other pages (grouped by unit and member) used between
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
    others: dict[tuple[str, str], list[str]] = defaultdict(list)
    for session in who:
        if session not in students:
            others[who[session]].append(session)
    mine = [s for s in who if s in students]
    total = sum(cpu.values())
    span = max(1e-9, t1 - t0)
    each = [cpu[s] for s in mine]
    lines = [f"handler CPU over {span:.0f} s: {total:.1f} s in all ({total / span:.2f} CPU s per s); students "
             f"{sum(each):.1f} s over {len(mine)} pages, {sum(runs[s] for s in mine)} events (a page: mean "
             f"{sum(each) / max(1, len(mine)):.2f} s, max {max(each, default=0):.2f} s)"]
    mean_student = sum(each) / max(1, len(mine))
    for (unit, member), sessions in sorted(others.items(), key=lambda kv: -sum(cpu[s] for s in kv[1])):
        used = sum(cpu[s] for s in sessions)
        lines.append(f"  other pages of unit {unit}, member {member}: {len(sessions)} pages, {used:.1f} s "
                     f"({used / max(1e-9, total):.0%} of all), {sum(runs[s] for s in sessions)} events; the busiest "
                     f"page {max(cpu[s] for s in sessions):.2f} s = {max(cpu[s] for s in sessions) / max(1e-9, mean_student):.1f}"
                     f" x a student's page")
    steps = [e for e in events if e[1] in students and e[4] == step_fn]
    step_cpu = [c[4] for c in charges if c[1] in students]
    lines.append(f"students' steps ({len(steps)}): waiting in Gradio's line {_ms([e[5] for e in steps])}; event wall "
                 f"(start to result sent) {_ms([e[6] for e in steps])}; handler CPU per event {_ms(step_cpu)}")
    return lines
