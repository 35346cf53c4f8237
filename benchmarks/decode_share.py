"""Figure (c) of `load_test --classroom --one-address`, its decode half: the class's share of the decode places
beside someone on another address who presses Run over and over from several tabs.

The stranger (OTHER_IP, --flood-threads tabs, each its own session) presses Run back to back with the class's
preset, reading every result, and presses again half a second after a refusal; meanwhile the class behind its one
address presses Run as in figure (a). While both ask, every finished decode took one place for about as long (same
preset, same model), so the class's share of the places is its finished Runs over all the Runs that finished
between the class's first press and its last finished Run. Issue 35 asks for at least 45 %.
"""
from __future__ import annotations

import argparse
import threading
import time
from typing import Any, Callable

from benchmarks.class_runs import OTHER_IP, client, run_line, run_round


def start_stranger(url: str, tabs: int, model: str) -> Callable[[], list[float]]:
    """`tabs` threads pressing Run from OTHER_IP until stopped; the returned call stops them and gives the
    moments (time.time()) their Runs finished."""
    from benchmarks.classroom import default_knobs, questions

    done: list[float] = []
    stop = threading.Event()

    def tab(k: int) -> None:
        c = None
        while not stop.is_set():
            try:
                c = c or client(url, OTHER_IP)
                out = c.submit(questions(tabs)[k], model, *default_knobs(), api_name="/run").result(timeout=300)
                if str(out[0]).startswith("✓"):
                    done.append(time.time())
                    continue
            except Exception:  # noqa: BLE001 (a refusal: pressed again shortly, like a person)
                pass
            stop.wait(0.5)
        if c is not None:
            c.close()

    threads = [threading.Thread(target=tab, args=(k,), daemon=True) for k in range(tabs)]
    for th in threads:
        th.start()

    def stop_all() -> list[float]:
        stop.set()
        for th in threads:
            th.join(timeout=330)
        return done

    return stop_all


def decode_share_figure(url: str, args: argparse.Namespace) -> str:
    """The class presses Run from one address beside the stranger; one line: (a)'s figures and the class's share."""
    stop = start_stranger(url, args.flood_threads, args.model)
    threading.Event().wait(2.0)  # the stranger is decoding before the class arrives
    t0 = time.time()
    m: dict[str, Any] = run_round(url, args, True)
    t1 = max((r["end"] for r in m["runs"] if r["ok"]), default=t0)
    theirs = sum(t0 <= t <= t1 for t in stop())
    ours = sum(r["ok"] for r in m["runs"])
    share = ours / max(1, ours + theirs)
    return (run_line("beside a stranger", m).replace("(a)", "(c) runs", 1) + f" | the stranger's Runs finished "
            f"meanwhile {theirs}; the class's share of the decode places {100 * share:.0f} %")
