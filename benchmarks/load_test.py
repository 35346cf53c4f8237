"""Concurrent visitors on loopback through gradio_client: latency of upload, step and run; errors; server RSS.

    python -m benchmarks.load_test                          # 16 sessions, bundled model, 32-token runs
    python -m benchmarks.load_test --sessions 32 --gen 64 --budget-s 600
    python -m benchmarks.load_test --attack                 # honest visitor beside each attacker (issue 19)
    python -m benchmarks.load_test --classroom              # 30 visitors press Run within 10 s, sharing off/on
    python -m benchmarks.load_test --classroom --attack     # ... and the class again beside each attacker
    python -m benchmarks.load_test --classroom --one-address --budget-s 900   # the class behind ONE address

Starts the app (`app.py`) in a subprocess on a free port, trusting one proxy hop (X-Forwarded-For names the
visitor, as on a Space). Default mode: N client sessions at once, each its own visitor: upload a
shipped trace, scrub it (`--steps` calls of /step), record one run (/run, --gen tokens on --model), and send a
second /run while the first is still running (the one-job-per-session rule must refuse it). Reports p50/p95/max
of each call, errors, refusals, the server's RSS before and after, and whether every session completed. Bounded:
--sessions, --steps and --budget-s (sessions still running then count as errors).

`--attack`: one honest visitor (its own address) repeats a replay step, a --gen-token run and a Stop of a long run,
first alone, then beside each attacker of benchmarks/attackers.py (fresh session hashes, the REST route, a replay
flood of the heaviest accepted trace, other spellings of Content-Type, heartbeat-minted sessions, cancelled runs;
`--phases` picks some), each from one address, for --phase-s seconds; reports the honest p50/p95
per phase and how the attacker's requests were answered. The server trusts one proxy hop (X-Forwarded-For names
the visitor, as on a Space).

`--classroom` (issue 25): --visitors honest visitors press Run (the default preset, each its own question) within
--spread-s seconds, on a server with decode sharing off and then on (benchmarks/classroom.py); ends with
`classroom: p95 shared/alone = R (lone run shared/alone = L)`. `--classroom --attack` adds the class beside each
attacker (sharing on).

`--classroom --one-address` (issue 35): the class behind ONE forwarded address, as a school's NAT shows it, on one
server: (a) --visitors press Run within --spread-s (refused ones press again every --retry-s), compared with the same
class from their own addresses; (b) the class steps through Replay every --step-every-s for --phase-s; (c) the same
beside a heavy-step flooder on the class's address, then on another; (d) one honest visitor beside eight flooding
addresses (benchmarks/one_address.py). Every figure printed as it exists; bounded by --budget-s. The stepping
students use light pages (plain HTTP, benchmarks/light_client.py) unless `--client gradio`.
"""
from __future__ import annotations

import argparse
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

from benchmarks.one_address import add_options as add_one_address_options
from benchmarks.percentiles import pct
from benchmarks.server import free_port, knobs, server_cpu_s, server_rss_mb, start_server, stop_server

TRACE = ROOT / "assets" / "traces" / "03-verify-when-it-pays--block-4.json"
PROMPT = "Tom has 12 apples. He buys 7 more. How many apples does Tom have now?"


def session(url: str, args: argparse.Namespace, deadline: float, visitor: int = 0) -> dict:
    from gradio_client import Client, handle_file
    from gradio_client.utils import Status

    out: dict = {"upload": [], "step": [], "run": [], "errors": [], "refused": 0, "done": False}
    # Each session is its own visitor (its own address, as the proxy would report it); a shared, loaded CPU is
    # slow, not broken (the long timeout).
    client = Client(url, verbose=False, headers={"X-Forwarded-For": f"10.3.{visitor // 250}.{visitor % 250 + 1}"},
                    httpx_kwargs={"timeout": 300})
    try:
        t0 = time.perf_counter()
        status = client.predict(handle_file(str(TRACE)), api_name="/upload_trace")[0]
        out["upload"].append(time.perf_counter() - t0)
        if status != "Loaded the uploaded trace.":
            out["errors"].append(f"upload: {status[:80]}")
        for step in range(args.steps):
            t0 = time.perf_counter()
            client.predict(step % 6, "auto", "state", api_name="/step")
            out["step"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        job = client.submit(PROMPT, args.model, *knobs(args.gen), api_name="/run")
        while job.status().code in (Status.STARTING, Status.JOINING_QUEUE) and time.time() < deadline:
            time.sleep(0.02)  # the first run is admitted to the queue
        try:  # a second job from the same session while the first waits or runs: refused at the queue
            client.predict(PROMPT, args.model, *knobs(args.gen), api_name="/run")
            out["errors"].append("second run was not refused")
        except Exception as exc:
            out["refused"] += "already have a run" in str(exc)
        status = job.result(timeout=max(1.0, deadline - time.time()))[0]
        out["run"].append(time.perf_counter() - t0)
        if not str(status).startswith("✓"):
            out["errors"].append(f"run: {str(status)[:80]}")
        out["done"] = True
    except Exception as exc:  # timeouts, HTTP errors
        out["errors"].append(f"{type(exc).__name__}: {str(exc)[:80]}")
    finally:
        client.close()
    return out


def run_sessions(args: argparse.Namespace) -> int:
    """The default mode: --sessions visitors at once, each its own address; latencies, refusals, errors, RSS."""
    port = free_port()
    t_start = time.time()
    proc = start_server(port, {"S2D2_TRUSTED_PROXY_HOPS": "1"})
    try:
        url = f"http://127.0.0.1:{port}/"
        session(url, argparse.Namespace(steps=1, gen=8, model=args.model), time.time() + 120)  # warm-up: load
        rss_before, cpu_before = server_rss_mb(proc.pid), server_cpu_s(proc.pid)
        print(f"server up in {time.time() - t_start:.0f} s, RSS {rss_before:.0f} MB; {args.sessions} sessions x "
              f"(upload, {args.steps} steps, one {args.gen}-token run on {args.model})", flush=True)
        deadline = time.time() + args.budget_s
        t0 = time.time()
        peak = [rss_before]

        def watch() -> None:
            while time.time() < deadline and proc.poll() is None and not stop.is_set():
                peak[0] = max(peak[0], server_rss_mb(proc.pid))
                time.sleep(0.5)

        stop = threading.Event()
        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        with ThreadPoolExecutor(args.sessions) as pool:
            results = list(pool.map(lambda i: session(url, args, deadline, i + 1), range(args.sessions)))
        stop.set()
        wall = time.time() - t0
        rss_after = server_rss_mb(proc.pid)
        for name in ("upload", "step", "run"):
            values = [v for r in results for v in r[name]]
            print(f"{name:6s}: n={len(values):4d}  p50 {pct(values, 0.5) * 1e3:7.0f} ms  p95 "
                  f"{pct(values, 0.95) * 1e3:7.0f} ms  max {max(values, default=float('nan')) * 1e3:7.0f} ms")
        errors = [e for r in results for e in r["errors"]]
        done = sum(r["done"] for r in results)
        print(f"sessions completed: {done}/{args.sessions} in {wall:.1f} s; second runs refused: "
              f"{sum(r['refused'] for r in results)}/{args.sessions}; errors: {len(errors)}"
              + (f" (first: {errors[0]})" if errors else ""))
        print(f"server RSS: {rss_before:.0f} MB before, {rss_after:.0f} MB after, peak {peak[0]:.0f} MB; server CPU "
              f"{server_cpu_s(proc.pid) - cpu_before:.0f} s over {wall:.0f} s wall", flush=True)
    finally:
        stop_server(proc)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=16)
    ap.add_argument("--steps", type=int, default=10, help="/step calls per session")
    ap.add_argument("--gen", type=int, default=32, help="tokens per run")
    ap.add_argument("--model", default="tiny")
    ap.add_argument("--budget-s", type=float, default=600.0)
    ap.add_argument("--attack", action="store_true", help="honest visitor beside each attacker (issue 19)")
    ap.add_argument("--phase-s", type=float, default=60.0, help="--attack: seconds per phase")
    ap.add_argument("--threads", type=int, default=8, help="--attack: attacker threads")
    ap.add_argument("--phases", default="", help="--attack: comma-separated attackers to run (default: all)")
    ap.add_argument("--classroom", action="store_true", help="a class presses Run, sharing off then on (issue 25)")
    ap.add_argument("--visitors", type=int, default=30, help="--classroom: visitors")
    ap.add_argument("--spread-s", type=float, default=10.0, help="--classroom: seconds over which they press Run")
    ap.add_argument("--lone-reps", type=int, default=5, help="--classroom: lone runs per mode")
    ap.add_argument("--batch-max", type=int, default=16, help="--classroom: S2D2_BATCH_MAX with sharing on")
    add_one_address_options(ap)
    args = ap.parse_args(argv)
    if args.classroom and args.one_address:
        from benchmarks.one_address import run_one_address, validated

        if (problem := validated(args)) is not None:
            ap.error(problem)
        return run_one_address(args)
    if args.classroom:
        from benchmarks.classroom import run_classroom

        return run_classroom(args)
    if args.attack:
        from benchmarks.attack_run import run_attacks

        return run_attacks(args)
    return run_sessions(args)


if __name__ == "__main__":
    sys.exit(main())
