"""Compare's lanes decoded in interleaved rounds, so that their wall times can be compared (s2d2/timing.py).

Round 0 decodes every lane once: it warms the model up for every lane's shapes and is never timed (its traces
are kept only if no timed round completes). Rounds 1..`timed_rounds` decode the lanes again in the same order,
as long as the time budget allows another whole round; only complete rounds count. Each lane keeps the trace of
its median timed run, and "walls" lists its timed runs' seconds. Stop and errors end everything as before;
running out of time after round 0 just ends the timing.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Iterator

from s2d2.timing import median_index

from components.views.lane_keys import lane_short

TIMED_ROUNDS = 2  # timed runs per lane after the warm-up: the fewest that give a spread (its noise)

# run(name, config, max_seconds) -> the lane's event stream (components/run_panel.record_stream)
RunLane = Callable[[str, dict[str, Any], float], Iterator[dict[str, Any]]]


def lane_rounds(configs: dict[str, dict[str, Any]], run: RunLane, budget: float, timed_rounds: int = TIMED_ROUNDS,
                clock: Callable[[], float] = time.monotonic) -> Iterator[dict[str, Any]]:
    """Yield progress events (with "lane" and "round"), a {"kind": "lane_done", "lane", "round", "wall_s"} after
    each run that counts, then {"kind": "done", "traces", "walls"}, or one "error" / "stopped" event."""
    deadline = clock() + budget
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in configs}
    last_round = 0.0
    for rnd in range(1 + max(0, timed_rounds)):
        started = clock()
        if rnd and deadline - started < 1.2 * last_round:  # another whole round would not fit: stop timing
            break
        for name, config in configs.items():
            left = deadline - clock()
            if left <= 0:
                if rnd == 0:
                    yield {"kind": "error", "message": f"Time limit: the lanes together may run {budget:g} s; "
                                                       f"{name} and later lanes did not start."}
                    return
                break
            outcome = yield from _one_lane(name, config, run, left, rnd, list(runs))
            if outcome["kind"] in ("error", "stopped"):
                yield outcome
                return
            if rnd and outcome["trace"]["footer"]["finish_reason"] == "time_limit":
                break  # a timed run cut short is not a run: this round does not count
            runs[name].append(outcome["trace"])
            yield {"kind": "lane_done", "lane": name, "round": rnd, "wall_s": outcome["trace"]["footer"]["wall_s"]}
        last_round = clock() - started
    yield _done(runs)


def _one_lane(name: str, config: dict[str, Any], run: RunLane, left: float, rnd: int, lanes: list[str]
              ) -> Iterator[dict[str, Any]]:
    """Stream one lane's progress; return its "done" event, or the "error" / "stopped" event that ends the job."""
    for event in run(name, config, left):
        if event["kind"] == "done" and event["trace"]["footer"]["finish_reason"] == "cancelled":
            kept = ", ".join(map(_lane, lanes[:lanes.index(name)] if rnd == 0 else lanes))
            return {"kind": "stopped", "message": f"Stopped during {_lane(name)} (lanes finished before: "
                                                  f"{kept or 'none'})."}
        if event["kind"] == "done":
            return event
        if event["kind"] == "error":
            return {"kind": "error", "message": f"{name}: {event['message']}"}
        yield {**event, "lane": name, "round": rnd}
    return {"kind": "error", "message": f"{name}: the decode ended without a trace"}


def _lane(key: str) -> str:
    """A lane as the page names it ("Lane 3", its column's heading; lane_names.py), not by its key."""
    short = lane_short(key)
    return short if short.startswith("Lane ") else f"lane {short}"


def _done(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Each lane's median timed run (its warm-up run when no timed round completed) and its timed seconds."""
    complete = min(len(r) for r in runs.values()) - 1  # timed rounds that every lane finished
    traces, walls = {}, {}
    for name, r in runs.items():
        timed = r[1:1 + complete]
        seconds = [t["footer"]["wall_s"] for t in timed]
        walls[name] = seconds
        traces[name] = timed[median_index(seconds)] if timed else r[0]
    return {"kind": "done", "traces": traces, "walls": walls}
