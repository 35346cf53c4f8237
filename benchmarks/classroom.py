"""`python -m benchmarks.load_test --classroom`: a whole class presses Run, with decode sharing off (today) and on.

Two servers, one after the other, in one run: sharing off (S2D2_BATCH_MAX=1: every Run decodes alone, one after
another) and on (S2D2_BATCH_MAX=--batch-max, S2D2_BATCH_WAIT_MS=0). On each: a warm-up Run, then --lone-reps lone
Runs one after another (a single visitor's time to a finished run), then the class: --visitors honest visitors, each
its own address and session, press Run (the default preset, a question of their own) at evenly spread moments within
--spread-s seconds. Printed per mode: p50 / p95 / max time from pressing Run to the finished run, the class's total
wall time (first press to last finished run), runs not finished with ✓, and the machine's load average; then how many
visitors got the same output text with sharing on as alone (float32 agreement: a shared forward sums in another
order), and the line `classroom: p95 shared/alone = R (lone run shared/alone = L)`. Bounded: --visitors,
--spread-s and --budget-s per mode (a run still going then counts as not finished).

`--classroom --attack`: then, on a server with sharing on, the class again beside each attacker of `--attack`
(--phases picks some), one line per phase: p95 against the class without an attacker and the runs not finished.
"""
from __future__ import annotations

import argparse
import os
import tempfile
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from benchmarks.percentiles import pct
from benchmarks.server import free_port, server_cpu_s, start_server, stop_server

NAMES = ["Tom", "Ana", "Noah", "Mia", "Liam", "Zoe", "Omar", "Ivy", "Ben", "Kate"]
ITEMS = ["apples", "pens", "shells", "cards", "stones", "books"]


def questions(n: int) -> list[str]:
    """n different word problems in the bundled model's style."""
    out = []
    for i in range(n):
        name, item = NAMES[i % len(NAMES)], ITEMS[(i // len(NAMES)) % len(ITEMS)]
        out.append(f"{name} has {10 + i} {item}. {name} buys {3 + i % 7} more. How many {item} does {name} have now?")
    return out


def default_knobs() -> list:
    from components.run.knobs import DEFAULT_PRESET, KNOB_NAMES, preset_values

    return list(dict(zip(KNOB_NAMES, preset_values(DEFAULT_PRESET))).values())


def client_for(url: str, visitor: int) -> Any:
    from gradio_client import Client

    return Client(url, verbose=False, headers={"X-Forwarded-For": f"10.7.{visitor // 250}.{visitor % 250 + 1}"},
                  httpx_kwargs={"timeout": 600})


def press_run(client: Any, prompt: str, model: str, deadline: float) -> dict[str, Any]:
    """One Run from pressing to its final status: seconds, the status line and the output text."""
    t0 = time.perf_counter()
    try:
        out = client.submit(prompt, model, *default_knobs(), api_name="/run").result(
            timeout=max(1.0, deadline - time.time()))
        status, text = str(out[0]), str(out[2]) if len(out) > 2 else ""
    except Exception as exc:  # a timeout, an HTTP error: not finished
        status, text = f"{type(exc).__name__}: {str(exc)[:80]}", ""
    return {"s": time.perf_counter() - t0, "ok": status.startswith("✓"), "status": status, "text": text}


def class_round(url: str, args: argparse.Namespace, proc: Any) -> dict[str, Any]:
    """The class: --visitors visitors (their own addresses and sessions, opened before the first press) press Run
    at evenly spread moments within --spread-s; each one's time to a finished run, the wall and the server CPU."""
    prompts = questions(args.visitors)
    with ThreadPoolExecutor(min(32, args.visitors)) as pool:
        clients = list(pool.map(lambda i: client_for(url, i + 1), range(args.visitors)))
    load0, cpu0 = os.getloadavg()[0], server_cpu_s(proc.pid)
    deadline = time.time() + args.budget_s
    t0 = time.perf_counter()
    results: list[Any] = [None] * args.visitors

    def visitor(i: int) -> None:
        delay = t0 + i * args.spread_s / max(1, args.visitors - 1) - time.perf_counter()
        threading.Event().wait(max(0.0, delay))  # the visitor's moment to press Run (pacing, not a sync)
        results[i] = press_run(clients[i], prompts[i], args.model, deadline)
        results[i]["end"] = time.perf_counter()

    threads = [threading.Thread(target=visitor, args=(i,), daemon=True) for i in range(args.visitors)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    wall = max(r["end"] for r in results) - t0
    cpu = server_cpu_s(proc.pid) - cpu0
    for c in clients:
        c.close()
    return {"runs": results, "wall": wall, "load": (load0, os.getloadavg()[0]), "cpu": cpu}


def warm_up(url: str, args: argparse.Namespace) -> list[float]:
    """A first Run (it loads the model), then --lone-reps lone Runs one after another: their seconds."""
    warm = client_for(url, 0)
    press_run(warm, questions(1)[0], args.model, time.time() + args.budget_s)
    lone = [press_run(warm, q, args.model, time.time() + args.budget_s)["s"] for q in questions(args.lone_reps)]
    warm.close()
    return lone


def one_mode(label: str, env: dict[str, str], args: argparse.Namespace) -> dict[str, Any]:
    port = free_port()
    proc = start_server(port, {"S2D2_TRUSTED_PROXY_HOPS": "1", **env})
    url = f"http://127.0.0.1:{port}/"
    try:
        lone = warm_up(url, args)
        return {"label": label, "lone": lone, **class_round(url, args, proc)}
    finally:
        stop_server(proc)


def under_attack(args: argparse.Namespace) -> list[str]:
    """With sharing on: the class alone, then the class again beside each attacker of benchmarks/attackers.py
    (--phases picks some; from one address, its own process); per phase the class's p50 / p95, runs not finished,
    and the attacker's answers. The bounds hold when every visitor still finishes and p95 stays near the no-attack
    figure: the attacker gets one decode of its own at most, and its floods are refused at the door."""
    from benchmarks.attack_run import start_attacker
    from benchmarks.attackers import ATTACKS
    from fixtures.upload_fuzz import worst_trace
    from s2d2.limits import limits

    import httpx

    heavy = Path(tempfile.mkdtemp()) / "heaviest.json"
    heavy.write_text(worst_trace(limits().max_upload_bytes).to_json())
    port = free_port()
    proc = start_server(port, {"S2D2_TRUSTED_PROXY_HOPS": "1", "S2D2_BATCH_MAX": str(args.batch_max),
                               "S2D2_BATCH_WAIT_MS": "0"})
    url = f"http://127.0.0.1:{port}/"
    lines = []
    try:
        warm_up(url, argparse.Namespace(**{**vars(args), "lone_reps": 0}))
        deps = httpx.get(url + "config", timeout=60).json()["dependencies"]
        fns = {d["api_name"]: d["id"] for d in deps if d.get("api_name")}
        base = None
        for phase in ["none", *(p for p in ATTACKS if not args.phases or p in args.phases.split(","))]:
            attacker = None
            if phase != "none":
                attacker, stop, answers = start_attacker(phase, url.rstrip("/"), fns, args.threads, heavy)
            m = class_round(url, args, proc)
            codes: dict = {}
            if attacker is not None:
                stop.set()
                codes = answers.get(timeout=120)
                attacker.join(timeout=30)
            times = [r["s"] for r in m["runs"]]
            bad = [r["status"] for r in m["runs"] if not r["ok"]]
            base = base or pct(times, 0.95)
            lines.append(f"classroom under attack [{phase}]: p95 {pct(times, 0.95):.1f} s "
                         f"({pct(times, 0.95) / base:.2f}x no attack), not finished {len(bad)}")
            print(f"[{phase:10s}] class p50 {pct(times, 0.5):6.1f} s  p95 {pct(times, 0.95):6.1f} s  max "
                  f"{max(times):6.1f} s  total wall {m['wall']:6.1f} s  not finished {len(bad)}"
                  + (f" (first: {bad[0][:60]})" if bad else "") + f" | attacker answers: "
                  f"{dict(sorted(codes.items(), key=str))}; server CPU {m['cpu']:.0f} s", flush=True)
            threading.Event().wait(3)  # the attacker's last events drain before the next phase
    finally:
        stop_server(proc)
    return lines


def report(off: dict[str, Any], on: dict[str, Any]) -> str:
    for m in (off, on):
        times = [r["s"] for r in m["runs"]]
        bad = [r["status"] for r in m["runs"] if not r["ok"]]
        print(f"{m['label']:12s} lone run median {statistics.median(m['lone']):6.2f} s (n={len(m['lone'])}) | class: "
              f"p50 {pct(times, 0.5):6.1f} s  p95 {pct(times, 0.95):6.1f} s  max {max(times):6.1f} s  total wall "
              f"{m['wall']:6.1f} s  not finished {len(bad)}" + (f" (first: {bad[0][:60]})" if bad else "")
              + f" | server CPU {m['cpu']:.0f} s; load average {m['load'][0]:.1f} -> {m['load'][1]:.1f}", flush=True)
    same = sum(a["ok"] and b["ok"] and a["text"] == b["text"] for a, b in zip(off["runs"], on["runs"]))
    print(f"same output text shared as alone: {same}/{len(on['runs'])} visitors (float32; a shared forward sums in "
          "another order)")
    r = pct([x["s"] for x in on["runs"]], 0.95) / pct([x["s"] for x in off["runs"]], 0.95)
    lone = statistics.median(on["lone"]) / statistics.median(off["lone"])
    return f"classroom: p95 shared/alone = {r:.2f} (lone run shared/alone = {lone:.2f})"


def run_classroom(args: argparse.Namespace) -> int:
    print(f"classroom: {args.visitors} visitors press Run (default preset, {args.model}) within {args.spread_s:g} s; "
          f"sharing off (S2D2_BATCH_MAX=1), then on (S2D2_BATCH_MAX={args.batch_max}); {os.cpu_count()} CPUs, load "
          f"average {os.getloadavg()[0]:.1f}", flush=True)
    off = one_mode("sharing off", {"S2D2_BATCH_MAX": "1"}, args)
    on = one_mode("sharing on", {"S2D2_BATCH_MAX": str(args.batch_max), "S2D2_BATCH_WAIT_MS": "0"}, args)
    summary = report(off, on)
    print(summary, flush=True)
    if args.attack:  # --classroom --attack: the class again beside each attacker, sharing on
        print(f"the class beside each attacker ({args.threads} threads from one address), sharing on:", flush=True)
        for line in under_attack(args):
            print(line, flush=True)
        print(summary, flush=True)
    return 0
