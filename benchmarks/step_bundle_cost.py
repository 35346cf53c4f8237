"""Server CPU of Replay stepping, before and after stepping moved into the browser (not a test).

    python -m benchmarks.step_bundle_cost            # every shipped example (both runs) and a 512-token trace

Before: every step (slider, ◀ ▶, a key, a Play tick) was one server event running handlers.step_views; a Play tick
was two (the timer's tick, then the step). After: a trace's frame bundle is built once when it opens
(components/replay/frame_bundle.py, cached per content: the next visitor opening the same example pays a lookup),
and a step inside it costs the server nothing. Reports thread CPU per step before, the bundle's build CPU and bytes,
and the server CPU thirty steps cost a visitor either way.
"""
from __future__ import annotations

import statistics
import time

from components.files.examples import examples_dir, list_examples, load_pair
from components.files.traces import make_state
from components.replay import frame_bundle
from components.replay.handlers import step_views

STEPS = 30


def step_cpu(trace) -> float:
    """Mean thread CPU seconds of one server step (handlers.step_views), over every step of `trace`."""
    state = make_state(trace, "bench")
    times = []
    for step in range(len(trace.steps) + 1):
        t0 = time.thread_time()
        step_views(state, step)
        times.append(time.thread_time() - t0)
    return statistics.mean(times)


def bundle_cost(trace) -> tuple[float, float, int]:
    """(cold build CPU s, cached open CPU s, bundle bytes)."""
    frame_bundle.clear_cache()
    t0 = time.thread_time()
    bundle = frame_bundle.bundle_for(trace)
    cold = time.thread_time() - t0
    t0 = time.thread_time()
    frame_bundle.bundle_for(trace)
    warm = time.thread_time() - t0
    return cold, warm, len(frame_bundle.json.dumps(bundle, ensure_ascii=False, separators=(",", ":")).encode())


def traces():
    for label, ex in list_examples(examples_dir()).items():
        main, partner = load_pair(ex)
        yield label, main
        if partner is not None:
            yield f"{label} (baseline)", partner
    from fixtures import trace_factory

    yield "synthetic 512 tokens (trace_factory.large)", trace_factory.large(512)


def main() -> int:
    print(f"{'trace':48s} {'steps':>5s} {'step ms':>8s} {'30 steps before':>16s} {'bundle build':>13s} "
          f"{'cached':>7s} {'bundle kB':>9s}")
    befores, builds = [], []
    for label, trace in traces():
        per_step = step_cpu(trace)
        cold, warm, size = bundle_cost(trace)
        befores.append(per_step)
        builds.append(cold)
        print(f"{label[:48]:48s} {len(trace.steps):5d} {per_step * 1e3:8.1f} {per_step * STEPS:15.2f}s "
              f"{cold:12.2f}s {warm * 1e3:5.1f}ms {size / 1e3:9.0f}")
    print(f"\n{STEPS} steps by one visitor: before {STEPS} server events (Play: {2 * STEPS}), "
          f"{statistics.mean(befores) * STEPS:.2f} s of server CPU on average; after 0 events and 0 s "
          f"(the bundle: {statistics.mean(builds):.2f} s once per trace content, then a cache lookup)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
