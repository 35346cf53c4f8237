"""The self-contained HTML replay: page size and build time per trace (not a test).

    python benchmarks/html_export.py

Rows: every shipped example trace (and its baseline partner), a 512-token synthetic S2D2 trace at B = 16
(tests/trace_factory.large), the largest recording the app makes (tests/upload_fuzz.legit_trace: a 2048-token
prompt, 512 generated tokens at B = 64, one step per token, 14 MB of trace JSON) and the heaviest trace an upload
may hold (upload_fuzz.worst_trace). For each: steps, frames kept under the bound, page size, its ratio to the trace
JSON, and the build time (CPU time of this thread, best of `--repeat`; wall time too, noisy on a shared machine).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import trace_factory as tf  # noqa: E402
import upload_fuzz as uf  # noqa: E402

from components.html_export import MAX_HTML_BYTES, replay_html  # noqa: E402
from components.traces_io import load_example  # noqa: E402
from s2d2.limits import limits  # noqa: E402


def measure(name: str, trace, repeat: int) -> str:
    best_cpu = best_wall = float("inf")
    page = None
    for _ in range(repeat):
        trace.__dict__.pop("_s2d2_index", None)  # build the lookup tables again, as a fresh load does
        c0, w0 = time.thread_time(), time.perf_counter()
        page = replay_html(trace)
        best_cpu = min(best_cpu, time.thread_time() - c0)
        best_wall = min(best_wall, time.perf_counter() - w0)
    json_kb = len(trace.to_json()) / 1000
    return (f"| {name} | {len(trace.steps)} | {page.frames} | {page.size / 1000:,.0f} kB | "
            f"{page.size / 1000 / json_kb:.2f} | {best_cpu:.2f} s | {best_wall:.2f} s |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print(f"bound: {MAX_HTML_BYTES / 2**20:g} MiB ({MAX_HTML_BYTES:,} bytes)\n")
    print("| trace | steps | frames | page | page / trace JSON | build CPU | build wall |")
    print("|---|---|---|---|---|---|---|")
    for path in sorted((ROOT / "assets" / "traces").glob("*.json")):
        print(measure(path.stem, load_example(path), args.repeat))
    print(measure("synthetic 512 tokens, B = 16", tf.large(), args.repeat))
    print(measure("largest recording (legit_trace)", uf.legit_trace(), 1))
    print(measure("heaviest upload (worst_trace)", uf.worst_trace(limits().max_upload_bytes), 1))


if __name__ == "__main__":
    main()
