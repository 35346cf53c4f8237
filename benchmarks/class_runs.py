"""The class's Runs for `load_test --classroom --one-address` (benchmarks/one_address.py): students at their
forwarded addresses press Run, pressing again after a refusal, and one line of what they got."""
from __future__ import annotations

import argparse
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from benchmarks.percentiles import pct

CLASS_IP = "10.9.0.1"  # the school's one public address
OTHER_IP = "10.66.0.1"  # a stranger elsewhere


def address_of(visitor: int, one_address: bool) -> str:
    """The forwarded address student `visitor` is seen from: the class's one address, or one of its own."""
    return CLASS_IP if one_address else f"10.7.{visitor // 250}.{visitor % 250 + 1}"


def client(url: str, address: str) -> Any:
    from gradio_client import Client

    return Client(url, verbose=False, headers={"X-Forwarded-For": address}, httpx_kwargs={"timeout": 300})


def summary(times: list[float]) -> str:
    return (f"p50 {pct(times, 0.5):6.2f} s  p95 {pct(times, 0.95):6.2f} s  max "
            f"{max(times, default=float('nan')):6.2f} s")



def press_until_done(c: Any, prompt: str, model: str, retry_s: float, until: float) -> dict[str, Any]:
    """Press Run; after a refusal (an error, or a final status other than ✓) wait `retry_s` and press again, until
    the run finishes or `until` passes. Seconds from the first press, refusals, the last status and the moment it
    ended (time.time())."""
    from benchmarks.classroom import default_knobs

    t0, refusals, status = time.perf_counter(), 0, ""
    while time.time() < until:
        try:
            out = c.submit(prompt, model, *default_knobs(), api_name="/run").result(
                timeout=max(1.0, until - time.time()))
            status = str(out[0])
        except Exception as exc:  # a refusal at the door or the validator, a timeout
            status = f"{type(exc).__name__}: {str(exc)[:100]}"
        if status.startswith("✓"):
            return {"s": time.perf_counter() - t0, "ok": True, "refusals": refusals, "status": status,
                    "end": time.time()}
        refusals += 1
        threading.Event().wait(min(retry_s, max(0.0, until - time.time())))  # the student presses again later
    return {"s": time.perf_counter() - t0, "ok": False, "refusals": refusals, "status": status, "end": time.time()}


def run_round(url: str, args: argparse.Namespace, one_address: bool) -> dict[str, Any]:
    """The class presses Run at evenly spread moments within --spread-s (sessions opened beforehand)."""
    from benchmarks.classroom import questions

    n = args.visitors
    with ThreadPoolExecutor(min(32, n)) as pool:
        clients = list(pool.map(lambda i: client(url, address_of(i + 1, one_address)), range(n)))
    until = time.time() + args.round_s
    t0 = time.perf_counter()
    results: list[Any] = [None] * n

    def student(i: int) -> None:
        threading.Event().wait(max(0.0, t0 + i * args.spread_s / max(1, n - 1) - time.perf_counter()))
        results[i] = press_until_done(clients[i], questions(n)[i], args.model, args.retry_s, until)

    threads = [threading.Thread(target=student, args=(i,), daemon=True) for i in range(n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for c in clients:
        c.close()
    return {"runs": results, "wall": time.perf_counter() - t0}


def run_line(label: str, m: dict[str, Any]) -> str:
    done = [r["s"] for r in m["runs"] if r["ok"]]
    refused = sum(r["refusals"] for r in m["runs"])
    last = next((r["status"] for r in m["runs"] if not r["ok"]), "")
    return (f"(a) {label:18s} finished {len(done):2d}/{len(m['runs'])}, refusals {refused:4d}, finished runs "
            f"{summary(done)}" + (f" | first unfinished: {last[:70]}" if last else ""))
