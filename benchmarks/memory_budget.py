"""Server RSS and disk under attack: heavy sessions, then back-to-back uploads at the size limit (issue 19, rows 8-9).

    python -m benchmarks.memory_budget                      # 300 heavy sessions, 100 uploads of 5 MB
    python -m benchmarks.memory_budget --sessions 50 --uploads 20

Starts the app (`app.py`) in a subprocess with its default limits (one trusted proxy hop, so each session can
come from its own address: the worst case, no per-client quota binds). Phase 1: --sessions sessions, each uploads
the heaviest trace the validator accepts with its candidate probabilities randomised (distinct, and hard to
compress) and renders one step of it; the sessions stay open in the server's memory (closed clients' state is kept
for an hour). Server RSS and the cache folder's bytes are sampled every 25 sessions. Phase 2: --uploads
back-to-back raw uploads of --upload-mb each, from one address, then from one address each. Prints the growth per
session, the peaks and the budgets they are measured against (S2D2_STATE_MB, S2D2_MAX_SESSIONS, S2D2_DISK_MB).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent

from benchmarks.server import free_port, server_rss_mb, start_server, stop_server


def heavy_trace_text(seed: int, base: dict) -> str:
    """The worst accepted trace with every candidate probability drawn afresh (valid, distinct, hard to
    compress)."""
    rng = random.Random(seed)

    def walk(node):
        if isinstance(node, dict):
            if set(node) == {"token", "text", "prob"}:  # a Candidate
                node["prob"] = round(rng.random(), 6)
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    data = json.loads(json.dumps(base))
    walk(data)
    return json.dumps(data)


def folder_bytes(folder: Path) -> int:
    """Bytes on disk under `folder` (a file linked under two names counted once)."""
    total, seen = 0, set()
    for dirpath, _, names in os.walk(folder):
        for name in names:
            try:
                st = (Path(dirpath) / name).stat()
            except OSError:
                continue
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_size
    return total


def one_session(url: str, i: int, path: Path) -> str:
    from gradio_client import Client, handle_file

    client = Client(url, verbose=False, headers={"X-Forwarded-For": f"10.{2 + i // 250}.{i % 250}.1"},
                    httpx_kwargs={"timeout": 300})
    try:
        status = client.predict(handle_file(str(path)), api_name="/upload_trace")[0]
        client.predict(1, "auto", "p", api_name="/step")
        return status
    finally:
        client.close()


def upload_phase(url: str, cache: Path, pid: int, args: argparse.Namespace) -> None:
    """--uploads back-to-back raw uploads of --upload-mb, from one address, then from one address each."""
    blob = b" " * int(args.upload_mb * 2**20 - 200)
    for label, address in (("one address", lambda i: "10.200.0.1"),
                           ("an address each", lambda i: f"10.201.{i // 250}.{i % 250}")):
        codes: Counter = Counter()
        disk_peak, t0 = 0, time.time()
        for i in range(args.uploads):
            r = httpx.post(url + "/gradio_api/upload", headers={"x-forwarded-for": address(i)}, timeout=120,
                           files={"files": (f"u{i}.json", blob, "application/json")})
            codes[r.status_code] += 1
            disk_peak = max(disk_peak, folder_bytes(cache))
        print(f"phase 2, {args.uploads} x {args.upload_mb:g} MB from {label}: {dict(codes)} in "
              f"{time.time() - t0:.1f} s; cache peak {disk_peak / 2**20:.0f} MB, now "
              f"{folder_bytes(cache) / 2**20:.0f} MB; RSS {server_rss_mb(pid):.0f} MB", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=300)
    ap.add_argument("--uploads", type=int, default=100)
    ap.add_argument("--upload-mb", type=float, default=5.0)
    ap.add_argument("--threads", type=int, default=3)
    args = ap.parse_args(argv)
    from fixtures.upload_fuzz import worst_trace

    from s2d2.limits import limits

    lim = limits()
    base = worst_trace(lim.max_upload_bytes).to_dict()
    work = Path(tempfile.mkdtemp(prefix="s2d2-membench-"))
    cache = work / "cache"
    port = free_port()
    proc = start_server(port, {"S2D2_TRUSTED_PROXY_HOPS": "1", "S2D2_CACHE_DIR": str(cache)})
    url = f"http://127.0.0.1:{port}"
    try:
        httpx.get(url + "/config", timeout=60)
        rss0, disk0 = server_rss_mb(proc.pid), folder_bytes(cache)
        print(f"server up: RSS {rss0:.0f} MB, cache {disk0 / 2**20:.1f} MB; limits: S2D2_MAX_SESSIONS "
              f"{lim.max_sessions}, S2D2_STATE_MB {os.environ.get('S2D2_STATE_MB', '128')}, S2D2_DISK_MB "
              f"{os.environ.get('S2D2_DISK_MB', '1024')}", flush=True)
        files = []
        for i in range(args.sessions):
            path = work / f"heavy-{i}.json"
            path.write_text(heavy_trace_text(i, base))
            files.append(path)
        print(f"{len(files)} distinct heavy traces of {files[0].stat().st_size / 1e6:.1f} MB", flush=True)
        statuses: Counter = Counter()
        peak, t0 = rss0, time.time()
        with ThreadPoolExecutor(args.threads) as pool:
            for start in range(0, args.sessions, 25):
                batch = range(start, min(args.sessions, start + 25))
                for status in pool.map(lambda i: one_session(url, i, files[i]), batch):
                    statuses[status[:40]] += 1
                rss = server_rss_mb(proc.pid)
                peak = max(peak, rss)
                print(f"  {batch.stop:4d} sessions: RSS {rss:6.0f} MB (+{rss - rss0:5.0f}), cache "
                      f"{folder_bytes(cache) / 2**20:6.1f} MB, {time.time() - t0:5.0f} s", flush=True)
        rss1 = server_rss_mb(proc.pid)
        print(f"phase 1: {dict(statuses)}; RSS {rss0:.0f} -> {rss1:.0f} MB (peak {peak:.0f}), "
              f"{(rss1 - rss0) / max(1, args.sessions):.2f} MB per session", flush=True)
        upload_phase(url, cache, proc.pid, args)
    finally:
        stop_server(proc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
