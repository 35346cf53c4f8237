"""What one refused request costs the server: CPU microseconds per refusal, end to end (the connection, HTTP
parsing, the front door, the answer), and how many a second a flood of them gets answered.

    python -m benchmarks.refusal_cost [--seconds 10] [--threads 8] [--hold-ms 0]

It starts the app on its own core (benchmarks/cpu_pin.py) with a request rate of one event a second
(S2D2_CLIENT_RATE=1), so nearly every event is refused at the door for its rate; `--threads` clients on the other
cores, each a page's session behind one forwarded address, send Replay steps back to back for `--seconds` and wait
for each answer, as a script does. The server's CPU time (user + system, /proc) over the flood, divided by the
refusals, is the figure. `--hold-ms` is S2D2_REFUSAL_HOLD_MS: 0 measures the bare cost of answering a refusal;
the default hold shows what holding a persistent refuser's answers saves (components/serve/refusal_hold.py).
Issue 35 figure (d): eight flooding addresses kept the server's core busy answering refusals.
"""
from __future__ import annotations

import argparse
import threading
import time
import uuid
from collections import Counter
from typing import Optional

import httpx

from benchmarks.cpu_pin import pin_clients, plan, server_preexec
from benchmarks.server import free_port, server_cpu_s, start_server, stop_server

ENV = {"S2D2_TRUSTED_PROXY_HOPS": "1", "S2D2_TRUSTED_PROXIES": "127.0.0.1", "S2D2_CLIENT_RATE": "1"}


def flood(url: str, step: int, address: str, seconds: float, threads: int) -> Counter:
    """`threads` pages behind `address` sending steps back to back for `seconds`; the answers by HTTP status."""
    codes: Counter = Counter()
    lock = threading.Lock()
    until = time.monotonic() + seconds

    def page() -> None:
        session = uuid.uuid4().hex
        body = {"data": [None, 1, "auto", "p", None], "fn_index": step, "session_hash": session,
                "event_data": None, "trigger_id": None}
        with httpx.Client(headers={"x-forwarded-for": address}, timeout=30) as http:
            while time.monotonic() < until:
                try:
                    status = http.post(url + "gradio_api/queue/join", json=body).status_code
                except httpx.HTTPError as exc:
                    status = type(exc).__name__
                with lock:
                    codes[status] += 1

    workers = [threading.Thread(target=page, daemon=True) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return codes


def measure(seconds: float, threads: int, hold_ms: Optional[float]) -> str:
    """One flood against a fresh server; its figure as one line."""
    pinning = plan(None)
    env = dict(ENV)
    if hold_ms is not None:
        env["S2D2_REFUSAL_HOLD_MS"] = f"{hold_ms:g}"
    port = free_port()
    proc = start_server(port, env, server_preexec(pinning))
    pin_clients(pinning)
    url = f"http://127.0.0.1:{port}/"
    try:
        config = httpx.get(url + "config", timeout=120).json()
        step = next(d["id"] for d in config["dependencies"] if d.get("api_name") == "step")
        flood(url, step, "10.77.0.1", 2.0, threads)  # warm: imports, first refusals
        before = server_cpu_s(proc.pid)
        codes = flood(url, step, "10.77.0.2", seconds, threads)
        used = server_cpu_s(proc.pid) - before
    finally:
        stop_server(proc)
    refused = codes.get(429, 0)
    per = used / refused * 1e6 if refused else float("nan")
    hold = "default" if hold_ms is None else f"{hold_ms:g} ms"
    return (f"hold {hold}, {threads} connections, {seconds:g} s ({pinning.line()}): {refused} refused "
            f"({refused / seconds:.0f}/s), answers {dict(sorted(codes.items(), key=str))}; server CPU {used:.2f} s "
            f"({used / seconds:.0%} of a core), {per:.0f} us per refused request")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--hold-ms", type=float, default=None, help="S2D2_REFUSAL_HOLD_MS (default: the app's)")
    args = ap.parse_args()
    if not (1 <= args.seconds <= 600 and 1 <= args.threads <= 256):
        ap.error("--seconds in [1, 600], --threads in [1, 256]")
    print(measure(args.seconds, args.threads, args.hold_ms), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
