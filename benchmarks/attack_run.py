"""`python -m benchmarks.load_test --attack`: the honest visitor's latency alone and beside each attacker.

Phases, each --phase-s seconds on one server: "none" (the honest visitor alone), then one per attacker of
benchmarks/attackers.py. The honest visitor (address 10.1.0.1, one session) repeats: three replay steps, one
--gen-token run, and a Stop of a 512-token run once it is decoding (Stop latency: from the Stop request to the
run's final status). Printed per phase: p50 / p95 / n of each, the runs and Stops that did not end as they
should, and the attacker's answers by HTTP status.
"""
from __future__ import annotations

import argparse
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent

from benchmarks.attackers import ATTACKS, ReplayFlood
from benchmarks.percentiles import pct
from benchmarks.server import free_port, knobs, server_cpu_s, server_rss_mb, start_server, stop_server

HONEST_IP = "10.1.0.1"
PROMPT = "Tom has 12 apples. He buys 7 more. How many apples does Tom have now?"
LONG_PROMPT = "It is a truth universally acknowledged, that"  # a continuation: the tiny model does not stop early


def long_knobs(gen: int) -> list:
    from components.run.knobs import KNOB_NAMES, preset_values

    values = dict(zip(KNOB_NAMES, preset_values("dynamic-baseline")))
    values.update(gen_length=gen, block_length=4)
    return list(values.values())


def honest_phase(url: str, fns: dict[str, int], args: argparse.Namespace, seconds: float) -> dict[str, Any]:
    from gradio_client import Client

    out: dict[str, Any] = {"step": [], "run": [], "wait": [], "stop": [], "bad": []}
    client = Client(url, verbose=False, headers={"X-Forwarded-For": HONEST_IP}, httpx_kwargs={"timeout": 300})
    deadline = time.time() + seconds
    try:
        while time.time() < deadline:
            for step in (1, 2, 3):
                t0 = time.perf_counter()
                client.predict(step, "auto", "state", api_name="/step")
                out["step"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            job = client.submit(PROMPT, args.model, *knobs(args.gen), api_name="/run")
            while not job.done() and not job.outputs():
                time.sleep(0.01)
            out["wait"].append(time.perf_counter() - t0)  # until the run started: the queue and the door
            status = str(job.result(timeout=300)[0])
            out["run"].append(time.perf_counter() - t0)
            if not status.startswith("✓"):
                out["bad"].append(f"run: {status[:70]}")
            out["stop"].append(stop_latency(client, url, fns, args, out["bad"]))
    except Exception as exc:  # the honest visitor failing is the finding: report it
        out["bad"].append(f"{type(exc).__name__}: {str(exc)[:80]}")
    finally:
        client.close()
    out["stop"] = [s for s in out["stop"] if s is not None]
    return out


def stop_latency(client: Any, url: str, fns: dict[str, int], args: argparse.Namespace, bad: list) -> Any:
    job = client.submit(LONG_PROMPT, args.model, *long_knobs(512), api_name="/run")
    deadline = time.time() + 120
    while time.time() < deadline and not job.done():
        if any(str(o[0]).startswith("Decoding") for o in job.outputs()):
            break
        time.sleep(0.02)
    t0 = time.perf_counter()
    httpx.post(url + "/gradio_api/run/predict", headers={"x-forwarded-for": HONEST_IP}, timeout=60,
               json={"data": [], "fn_index": fns["stop"], "session_hash": client.session_hash})
    status = str(job.result(timeout=120)[0])
    if status.startswith("✓"):  # it ended before the Stop arrived: nothing to measure
        return None
    if not status.startswith("■"):
        bad.append(f"stop: {status[:70]}")
        return None
    return time.perf_counter() - t0


def _attack(phase: str, url: str, fns: dict[str, int], threads: int, heavy: Path, ready: Any, stop: Any,
            answers: Any) -> None:
    extra = {"trace_path": heavy} if ATTACKS[phase] is ReplayFlood else {}
    attacker = ATTACKS[phase](url, fns, long_knobs, threads=threads, **extra)
    attacker.start()  # prepared (the replay attacker's uploads) and running
    ready.set()
    stop.wait()
    answers.put(dict(attacker.stop()))


def start_attacker(phase: str, url: str, fns: dict[str, int], threads: int, heavy: Path) -> tuple[Any, Any, Any]:
    import multiprocessing as mp

    ctx = mp.get_context("spawn")  # a fresh interpreter: no threads or locks inherited from this one
    ready, stop, answers = ctx.Event(), ctx.Event(), ctx.Queue()
    process = ctx.Process(target=_attack, args=(phase, url, fns, threads, heavy, ready, stop, answers), daemon=True)
    process.start()
    ready.wait(timeout=600)  # the honest phase starts once the attack runs
    return process, stop, answers


def line(name: str, values: list[float]) -> str:
    return (f"{name} p50 {pct(values, 0.5) * 1e3:6.0f} ms  p95 {pct(values, 0.95) * 1e3:6.0f} ms  "
            f"n={len(values):3d}")


def run_attacks(args: argparse.Namespace) -> int:
    from fixtures.upload_fuzz import worst_trace

    from s2d2.limits import limits

    heavy = Path(tempfile.mkdtemp()) / "heaviest.json"
    heavy.write_text(worst_trace(limits().max_upload_bytes).to_json())
    port = free_port()
    proc = start_server(port, {"S2D2_TRUSTED_PROXY_HOPS": "1"})
    url = f"http://127.0.0.1:{port}"
    try:
        deps = httpx.get(url + "/config", timeout=60).json()["dependencies"]
        fns = {d["api_name"]: d["id"] for d in deps if d.get("api_name")}
        honest_phase(url, fns, argparse.Namespace(**{**vars(args), "gen": 8}), 1)  # warm-up: model loaded
        print(f"server RSS {server_rss_mb(proc.pid):.0f} MB; honest visitor: 3 steps + one {args.gen}-token run + "
              f"one Stop per round on {args.model}; {args.phase_s:g} s per phase; attacker: {args.threads} "
              "threads from one address", flush=True)
        for phase in ["none", *(p for p in ATTACKS if not args.phases or p in args.phases.split(","))]:
            attacker = None
            if phase != "none":  # its own process: its threads must not slow the honest client's (the GIL)
                attacker, stop, answers = start_attacker(phase, url, fns, args.threads, heavy)
            cpu0 = server_cpu_s(proc.pid)
            result = honest_phase(url, fns, args, args.phase_s)
            cpu = server_cpu_s(proc.pid) - cpu0
            codes: dict = {}
            if attacker is not None:
                stop.set()
                codes = answers.get(timeout=120)
                attacker.join(timeout=30)
            print(f"[{phase:8s}] {line('step', result['step'])} | {line('run', result['run'])} (queue "
                  f"{pct(result['wait'], 0.5) * 1e3:.0f} ms p50) | {line('stop', result['stop'])}", flush=True)
            print(f"           attacker answers: {dict(sorted(codes.items(), key=str))}; honest failures: "
                  f"{len(result['bad'])}{' (' + result['bad'][0] + ')' if result['bad'] else ''}; server CPU "
                  f"{cpu:.0f} s, RSS {server_rss_mb(proc.pid):.0f} MB", flush=True)
            threading.Event().wait(3)  # let the attacker's last events drain before the next phase
    finally:
        stop_server(proc)
    return 0
