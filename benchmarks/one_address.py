"""`python -m benchmarks.load_test --classroom --one-address`: a class behind ONE address, as a school's NAT shows it.

`--classroom` alone gives every visitor its own forwarded address, so it cannot see what a class behind one public
address meets. This mode sends every student's requests with the same X-Forwarded-For (CLASS_IP) and measures, on
one server (defaults as shipped; one trusted proxy hop, read only from loopback), the figures of issue 35:

(a) runs: --visitors students press Run (default preset, a question each) at evenly spread moments within
    --spread-s, pressing again every --retry-s after a refusal until --round-s has passed; first the same class
    from one address each (the comparison), then from one address. Finished / refusals / class p50 and p95 (from
    the first press to the finished run) and the ratio of the two p95s.
(b) replay: the students open the first example and step through it every --step-every-s for --phase-s seconds:
    steps served and refused, step p50 / p95, server CPU per served step.
(c) the replay class again beside a heavy-step flooder (benchmarks/attackers.py's replay flood, in its own process)
    on the class's own address, then on another address: the same figures and the flooder's answers; then the
    class presses Run beside a stranger on another address pressing Run from --flood-threads tabs: the class's
    share of the decode places (benchmarks/decode_share.py).
(d) eight flooding addresses (one replay flooder each, --flood-threads threads): one honest visitor on its own
    address steps every 0.5 s; its step p50 / p95 and served share.

`--figures` picks some (letters a, b, c, r: figure (c)'s decode half, d). Each figure is printed as soon as it
exists. Bounded: --visitors, --round-s, --phase-s and --budget-s for the whole run (a phase that no longer fits is
skipped, and says so); every request goes to the server on 127.0.0.1 (the forwarded addresses are only header
values).
"""
from __future__ import annotations

import argparse
import json
import os
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Optional

from benchmarks.percentiles import pct
from benchmarks.server import free_port, server_cpu_s, start_server, stop_server

CLASS_IP = "10.9.0.1"  # the school's one public address
OTHER_IP = "10.66.0.1"  # a stranger elsewhere
HONEST_IP = "10.1.0.1"  # phase (d)'s honest visitor
FLOOD_IPS = [f"10.66.1.{i + 1}" for i in range(8)]  # phase (d)'s eight flooding addresses
SERVER_ENV = {"S2D2_TRUSTED_PROXY_HOPS": "1", "S2D2_TRUSTED_PROXIES": "127.0.0.1"}


def address_of(visitor: int, one_address: bool) -> str:
    """The forwarded address student `visitor` is seen from: the class's one address, or one of its own."""
    return CLASS_IP if one_address else f"10.7.{visitor // 250}.{visitor % 250 + 1}"


def client(url: str, address: str) -> Any:
    from gradio_client import Client

    return Client(url, verbose=False, headers={"X-Forwarded-For": address}, httpx_kwargs={"timeout": 300})


def summary(times: list[float]) -> str:
    return (f"p50 {pct(times, 0.5):6.2f} s  p95 {pct(times, 0.95):6.2f} s  max "
            f"{max(times, default=float('nan')):6.2f} s")


class Budget:
    """The run's one deadline: phases ask for time and are skipped, with a line, when it is spent."""

    def __init__(self, seconds: float) -> None:
        self.end = time.time() + seconds

    def left(self) -> float:
        return self.end - time.time()

    def fits(self, label: str, needed_s: float) -> bool:
        if self.left() >= needed_s:
            return True
        print(f"{label}: skipped, the budget has {max(0.0, self.left()):.0f} s left and it needs about "
              f"{needed_s:.0f} s", flush=True)
        return False


# -- (a) a class presses Run --------------------------------------------------------------------------------------

def press_until_done(c: Any, prompt: str, model: str, retry_s: float, until: float) -> dict[str, Any]:
    """Press Run; after a refusal (an error, or a final status other than ✅) wait `retry_s` and press again, until
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
        if status.startswith("✅"):
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


# -- (b)-(d) stepping through Replay ------------------------------------------------------------------------------

def first_example_steps() -> tuple[str, int]:
    """The label of the app's first example and how many steps it has."""
    from components.files.examples import examples_dir, list_examples

    label, example = next(iter(list_examples(examples_dir()).items()))
    return label, max(1, len(json.loads(Path(example.path).read_text())["steps"]))


def stepper(url: str, address: str, every_s: float, until: float, start_at: float) -> dict[str, Any]:
    """One student: load the page and open the first example (again at each tick until both worked), then step
    every `every_s`."""
    label, steps = first_example_steps()
    out: dict[str, Any] = {"step": [], "refused": Counter(), "opened": False}
    c, tick, k = None, start_at, 0
    try:
        while time.time() < until:
            threading.Event().wait(max(0.0, tick - time.time()))  # the student's own pace
            tick += every_s
            t0 = time.perf_counter()
            try:
                if c is None:  # the page itself (its config and API info) may be refused
                    c = client(url, address)
                if not out["opened"]:
                    c.predict(label, api_name="/open_example")
                    out["opened"] = True
                    continue
                k += 1
                c.predict(k % steps + 1, "auto", "state", api_name="/step")
                out["step"].append(time.perf_counter() - t0)
            except Exception as exc:  # a refusal (429 at the door, the CPU share) or an error
                out["refused"][f"{'open' if not out['opened'] else 'step'}: {str(exc)[:60]}"] += 1
    finally:
        if c is not None:
            c.close()
    return out


def step_round(url: str, proc: Any, addresses: list[str], every_s: float, seconds: float) -> dict[str, Any]:
    """Visitors at `addresses` step every `every_s` for `seconds` (their ticks staggered over the first period)."""
    n = len(addresses)
    start, cpu0 = time.time() + 2.0, server_cpu_s(proc.pid)
    until = start + seconds
    with ThreadPoolExecutor(n) as pool:
        results = list(pool.map(lambda i: stepper(url, addresses[i], every_s, until, start + i * every_s / n),
                                range(n)))
    steps = [s for r in results for s in r["step"]]
    refused: Counter = sum((r["refused"] for r in results), Counter())
    return {"steps": steps, "refused": refused, "cpu": server_cpu_s(proc.pid) - cpu0,
            "not_opened": sum(not r["opened"] for r in results)}


def step_line(label: str, m: dict[str, Any]) -> str:
    served, refused = len(m["steps"]), sum(v for k, v in m["refused"].items() if k.startswith("step"))
    opening = sum(v for k, v in m["refused"].items() if k.startswith("open"))
    total = served + refused
    first = next(iter(m["refused"]), "")
    per_step = f"{1e3 * m['cpu'] / served:.0f} ms per served step" if served else "no step served"
    return (f"{label}: steps served {served}/{total} ({100 * served / max(1, total):.0f} %), refused {refused}; "
            f"page or example refused {opening} times, never opened by {m['not_opened']} visitors; step "
            f"{summary(m['steps'])}; server CPU {m['cpu']:.1f} s, {per_step}"
            + (f" | first refusal: {first}" if first else ""))


def _flood(url: str, fns: dict[str, int], threads: int, heavy: Path, address: str, ready: Any, stop: Any,
           answers: Any) -> None:
    """A spawned process: benchmarks/attackers.py's replay flood from `address`."""
    import benchmarks.attackers as attackers
    from benchmarks.attack_run import long_knobs

    attackers.ATTACKER_IP = address  # this process is the flooder alone: its module-wide address is this one
    flooder = attackers.ReplayFlood(url, fns, long_knobs, threads=threads, trace_path=heavy)
    try:
        flooder.start()  # its uploads may be refused or time out on a server already flooded
    except Exception as exc:  # noqa: BLE001 (the figure says how many flooders could start)
        answers.put({f"flooder could not start ({type(exc).__name__})": 1})
        ready.set()
        return
    ready.set()
    stop.wait()
    answers.put(dict(flooder.stop()))


def start_floods(url: str, fns: dict[str, int], threads: int, heavy: Path, addresses: list[str]) -> Callable[[], dict]:
    """One flooder process per address, each running before this returns; the returned call stops them all and
    gives their answers by HTTP status, summed."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    started = []
    for address in addresses:
        ready, stop, answers = ctx.Event(), ctx.Event(), ctx.Queue()
        p = ctx.Process(target=_flood, args=(url.rstrip("/"), fns, threads, heavy, address, ready, stop, answers),
                        daemon=True)
        p.start()
        while not ready.wait(timeout=1) and p.is_alive():
            pass  # its uploads done, or it died (its answers then read "flooder lost")
        started.append((p, stop, answers))

    def stop_all() -> dict:
        codes: Counter = Counter()
        for p, stop, answers in started:
            stop.set()
        for p, stop, answers in started:
            try:
                codes.update(answers.get(timeout=120 if p.is_alive() else 1))
            except Exception:  # noqa: BLE001 (a flooder that died: its answers are lost, the figure says so)
                codes["flooder lost"] += 1
            p.join(timeout=30)
        return dict(sorted(codes.items(), key=str))

    return stop_all


# -- the run ------------------------------------------------------------------------------------------------------

def heavy_trace() -> Path:
    from fixtures.upload_fuzz import worst_trace
    from s2d2.limits import limits

    path = Path(tempfile.mkdtemp()) / "heaviest.json"
    path.write_text(worst_trace(limits().max_upload_bytes).to_json())
    return path


def warm(url: str, args: argparse.Namespace) -> None:
    """One Run (it loads the model) and one open of the example, from an address of its own."""
    from benchmarks.classroom import questions

    c = client(url, "10.2.0.1")
    press_until_done(c, questions(1)[0], args.model, args.retry_s, time.time() + 300)
    c.predict(first_example_steps()[0], api_name="/open_example")
    c.close()


def run_one_address(args: argparse.Namespace) -> int:
    """All phases on one server; each figure printed as it exists; stops when done or the budget is spent."""
    import httpx

    budget = Budget(args.budget_s)
    print(f"one address: {args.visitors} students behind {CLASS_IP}; {os.cpu_count()} CPUs, load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}; budget {args.budget_s:g} s", flush=True)
    heavy = heavy_trace()
    port = free_port()
    proc = start_server(port, SERVER_ENV)
    url = f"http://127.0.0.1:{port}/"
    try:
        warm(url, args)
        fns = {d["api_name"]: d["id"] for d in httpx.get(url + "config", timeout=60).json()["dependencies"]
               if d.get("api_name")}
        phases(url, proc, fns, heavy, args, budget)
    finally:
        stop_server(proc)
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    return 0


def runs_figure(url: str, args: argparse.Namespace, budget: Budget) -> None:
    """(a): the class's Runs from their own addresses, then from one; the ratio of the two p95s."""
    p95: dict[bool, float] = {}
    for one, label in ((False, f"from {args.visitors} addresses"), (True, "from one address")):
        if budget.fits(f"(a) {label}", args.round_s + 10):
            m = run_round(url, args, one)
            p95[one] = pct([r["s"] for r in m["runs"] if r["ok"]], 0.95)
            print(run_line(label, m), flush=True)
    if len(p95) == 2:
        print(f"(a) class p95 one address / own addresses = {p95[True] / p95[False]:.2f}", flush=True)


def phases(url: str, proc: Any, fns: dict[str, int], heavy: Path, args: argparse.Namespace, budget: Budget) -> None:
    """The figures --figures asks for, in order, each while the budget lasts."""
    if "a" in args.figures:
        runs_figure(url, args, budget)
    students = [CLASS_IP] * args.visitors
    if "b" in args.figures and budget.fits("(b) replay", args.phase_s + 20):
        print(step_line("(b) replay, class alone", step_round(url, proc, students, args.step_every_s,
                                                            args.phase_s)), flush=True)
    for where, address in (("its own address", CLASS_IP), ("another address", OTHER_IP)):
        if "c" in args.figures and budget.fits(f"(c) beside a flooder on {where}", args.phase_s + 60):
            stop = start_floods(url, fns, args.flood_threads, heavy, [address])
            m = step_round(url, proc, students, args.step_every_s, args.phase_s)
            print(step_line(f"(c) replay beside a heavy-step flooder on {where}", m) + f" | flooder answers "
                  f"{stop()}", flush=True)
    if "r" in args.figures and budget.fits("(c) runs beside a stranger pressing Run", args.round_s + 30):
        from benchmarks.decode_share import decode_share_figure  # it builds on this module's rounds

        print(decode_share_figure(url, args), flush=True)
    if "d" in args.figures and budget.fits("(d) eight flooding addresses", args.phase_s + 120):
        stop = start_floods(url, fns, args.flood_threads, heavy, FLOOD_IPS)
        m = step_round(url, proc, [HONEST_IP], 0.5, args.phase_s)
        print(step_line("(d) honest visitor beside eight flooding addresses", m) + f" | flooders' answers "
              f"{stop()}", flush=True)


def add_options(ap: argparse.ArgumentParser) -> None:
    """This mode's options (load_test.py's parser holds --visitors, --spread-s, --phase-s, --model, --budget-s)."""
    ap.add_argument("--one-address", action="store_true",
                    help="--classroom: every student behind one address (issue 35's figures)")
    ap.add_argument("--round-s", type=float, default=120.0, help="--one-address: seconds a Run round lasts")
    ap.add_argument("--retry-s", type=float, default=5.0, help="--one-address: a refused student presses again")
    ap.add_argument("--step-every-s", type=float, default=2.0, help="--one-address: seconds between a student's steps")
    ap.add_argument("--flood-threads", type=int, default=4, help="--one-address: threads per flooding address")
    ap.add_argument("--figures", default="abcrd", help="--one-address: which figures to measure: a, b, c (steps "
                    "beside flooders), r (runs beside a stranger: figure (c)'s decode places), d; default all")


def validated(args: argparse.Namespace) -> Optional[str]:
    """One line saying what is out of bounds, or None."""
    bounds = {"visitors": (1, 100), "round_s": (5, 3600), "retry_s": (0.5, 600), "phase_s": (5, 3600),
              "step_every_s": (0.1, 60), "flood_threads": (1, 32), "budget_s": (10, 86_400), "spread_s": (0, 600)}
    if not args.figures or set(args.figures) - set("abcrd"):
        return f"--figures takes letters of abcrd, got {args.figures[:20]!r}"
    for name, (low, high) in bounds.items():
        value = getattr(args, name)
        if not low <= value <= high:
            return f"--{name.replace('_', '-')} must be within {low:g}..{high:g}, got {value:g}"
    return None
