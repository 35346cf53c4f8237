"""Replay cost for a long trace: server time and payload size of every replay output (not a test).

    python -m benchmarks.replay_speed                     # synthetic 512-token trace (tests/trace_factory.large)
    python -m benchmarks.replay_speed --trace path.json   # any recorded trace

Reports: trace JSON size and parse time; per scrubber step the time to build (canvas, strip, routing, mask,
summary) and their serialized size; the whole-run figures built on load.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

from benchmarks.percentiles import pct
from components.views.step_views import STEP_VIEWS, StepOptions, metrics_table, render_step, render_timelines
from components.views.trace_index import build_index
from s2d2.trace import Trace  # noqa: E402


def payload(value: object) -> int:
    if hasattr(value, "to_json"):
        return len(value.to_json())  # type: ignore[union-attr]
    return len(value.encode("utf-8")) if isinstance(value, str) else len(json.dumps(value))


def view_times(trace: Trace, n: int) -> dict[str, list[float]]:
    """Seconds to build each step view on its own, on about 20 of the `n` + 1 steps: a list per name of
    STEP_VIEWS, each built as the Replay tab builds it (the registry's own call, default options)."""
    options = StepOptions()
    times: dict[str, list[float]] = {k: [] for k in STEP_VIEWS}
    for step in range(0, n + 1, max(1, n // 20)):
        for name, view in STEP_VIEWS.items():
            start = time.perf_counter()
            view(trace, step, options)
            times[name].append(time.perf_counter() - start)
    return times


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", type=Path, help="a trace JSON file (default: synthetic 512 tokens)")
    ap.add_argument("--tokens", type=int, default=512)
    ap.add_argument("--every", type=int, default=1, help="time every n-th step only")
    args = ap.parse_args(argv)
    if args.trace:
        text = args.trace.read_text(encoding="utf-8")
    else:
        from fixtures import trace_factory

        text = trace_factory.large(args.tokens).to_json()
    t0 = time.perf_counter()
    trace = Trace.from_json(text)
    parse_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    build_index(trace)
    index_s = time.perf_counter() - t0
    n = len(trace.steps)
    generated = sum(len(s.commits) for s in trace.steps)
    print(f"trace: {generated} generated tokens, {n} steps, {len(trace.forwards)} forwards, "
          f"{len(text) / 1e3:.0f} kB JSON; parse+validate {parse_s * 1e3:.0f} ms, index {index_s * 1e3:.1f} ms")
    names = tuple(STEP_VIEWS)
    sizes: dict[str, list[int]] = {k: [] for k in names}
    totals: list[float] = []
    for step in range(0, n + 1, args.every):
        start = time.perf_counter()
        outputs = render_step(trace, step)
        totals.append(time.perf_counter() - start)
        for name in names:
            sizes[name].append(payload(outputs[name]))
    times = view_times(trace, n)
    print(f"render_step (all {len(names)} outputs), {len(totals)} steps: mean {statistics.mean(totals) * 1e3:.0f} ms, "
          f"p95 {pct(totals, 0.95) * 1e3:.0f} ms, max {max(totals) * 1e3:.0f} ms")
    per_step = sum(statistics.mean(v) for v in sizes.values())
    print(f"payload per step: {per_step / 1e3:.0f} kB total")
    for name in names:
        ms, kb = statistics.mean(times[name]) * 1e3, statistics.mean(sizes[name]) / 1e3
        print(f"  {name:10s} {ms:7.1f} ms   {kb:7.1f} kB "
              f"(max {max(sizes[name]) / 1e3:.1f} kB)")
    start = time.perf_counter()
    figs = render_timelines(trace)
    rows = metrics_table(trace)
    load_s = time.perf_counter() - start
    load_kb = sum(payload(f) for f in figs) / 1e3 + payload(rows) / 1e3
    print(f"on load: timelines + metrics {load_s * 1e3:.0f} ms, {load_kb:.0f} kB "
          f"(commit map, NFE/block, histogram, per-position)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
