"""`python -m benchmarks.page_cost`: the server's CPU for N GETs of /config and of the page (`/`), from one address.

Starts the app (benchmarks/server.py) on loopback, loads the page once (warm), then sends --requests GETs of each
route one after another from one forwarded address, paced at --rate a second (under the per-client request rate,
so none is refused for speed), and prints, per route: answered / refused, the server's CPU seconds for all of them
and per request, and the machine's load average. Bounded: --requests (1-2000) and --rate.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import httpx

from benchmarks.server import free_port, server_cpu_s, start_server, stop_server


def one_route(url: str, route: str, n: int, rate: float, pid: int) -> str:
    codes: dict[int, int] = {}
    cpu0, t0 = server_cpu_s(pid), time.perf_counter()
    with httpx.Client(headers={"x-forwarded-for": "10.8.0.1"}, timeout=60) as http:
        for i in range(n):
            time.sleep(max(0.0, t0 + i / rate - time.perf_counter()))  # pacing the client, not a test wait
            code = http.get(url + route).status_code
            codes[code] = codes.get(code, 0) + 1
    cpu = server_cpu_s(pid) - cpu0
    return (f"GET /{route:7s} x{n}: answers {dict(sorted(codes.items()))}; server CPU {cpu:.2f} s "
            f"({1e3 * cpu / n:.1f} ms a request) over {time.perf_counter() - t0:.1f} s")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--rate", type=float, default=10.0, help="requests a second (the per-client rate is 20)")
    args = ap.parse_args(argv)
    if not 1 <= args.requests <= 2000 or not 0.1 <= args.rate <= 1000:
        ap.error("--requests must be within 1..2000 and --rate within 0.1..1000")
    port = free_port()
    proc = start_server(port, {"S2D2_TRUSTED_PROXY_HOPS": "1", "S2D2_TRUSTED_PROXIES": "127.0.0.1"})
    url = f"http://127.0.0.1:{port}/"
    try:
        httpx.get(url, timeout=120)
        size = len(httpx.get(url + "config", timeout=120).content)
        print(f"/config is {size / 1e3:.0f} kB; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}",
              flush=True)
        for route in ("config", ""):
            print(one_route(url, route, args.requests, args.rate, proc.pid), flush=True)
        print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    finally:
        stop_server(proc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
