"""What one code-benchmark sample costs in the sandbox, per layer, measured side by side in one run:

    S2D2_ALLOW_CODE_EVAL=1 python benchmarks/sandbox_overhead.py --runs 20

Arms: all layers (bubblewrap + cgroups + Python guards, the default), no bubblewrap (the fallback the user must
accept), and a plain `python -I -c` subprocess (no sandbox) for scale. The program is a passing HumanEval-style
check (a small function and three asserts). Runs are interleaved; the figures are the median and the 90th percentile wall seconds per
sample. Nothing is asserted.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from s2d2.sandbox import ALLOW_ENV, run_program  # noqa: E402
from s2d2.sandbox import isolation as iso  # noqa: E402

PROGRAM = ("def add(a, b):\n    return a + b\n\n\ndef check(candidate):\n    assert candidate(1, 2) == 3\n"
           "    assert candidate(-1, 1) == 0\n    assert candidate(0, 0) == 0\n\n\ncheck(add)\n")


def plain() -> bool:
    return subprocess.run([sys.executable, "-I", "-c", PROGRAM], capture_output=True).returncode == 0


ARMS = {
    "sandbox (all layers)": lambda: run_program(PROGRAM).passed,
    "sandbox (no namespaces)": lambda: run_program(PROGRAM, namespaces=False).passed,
    "plain subprocess": plain,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    if os.environ.get(ALLOW_ENV) != "1":
        sys.exit(f"set {ALLOW_ENV}=1 to run programs in the sandbox")
    exe, why = iso.bwrap_available()
    print(f"bubblewrap: {'available' if exe else 'unavailable (' + why + ')'}; uid {os.geteuid()}")
    times: dict[str, list[float]] = {name: [] for name in ARMS}
    for i in range(args.runs):
        order = list(ARMS) if i % 2 == 0 else list(reversed(ARMS))
        for name in order:
            t0 = time.perf_counter()
            assert ARMS[name](), name
            times[name].append(time.perf_counter() - t0)
    for name, ts in times.items():
        ts.sort()
        p90 = ts[min(len(ts) - 1, int(0.9 * len(ts)))]
        print(f"{name:26s} median {statistics.median(ts):.3f} s   p90 {p90:.3f} s   ({len(ts)} runs)")


if __name__ == "__main__":
    main()
