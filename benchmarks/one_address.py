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
    on the class's own address, then on another address: the same figures and the flooder's answers; then (figure
    letter r) the class keeps pressing Run beside a stranger on another address pressing Run from --stranger-tabs
    tabs: the class's share of the decode places while it asks (benchmarks/decode_share.py).
(d) eight flooding addresses (one replay flooder each, --flood-threads threads): one honest visitor on its own
    address steps every 0.5 s; its step p50 / p95 and served share.

With S2D2_BENCH_SHARE_LEDGER=FILE, the server keeps a ledger (benchmarks/share_ledger.py) and each (b), (c) and (d)
phase also prints how the handler CPU and the steps' places split between the students and the other pages, and where a
student's step spent its time (benchmarks/share_split.py).

`--client light` (the default) has each stepping student (figures b, c, d) speak Gradio's HTTP queue protocol itself
(benchmarks/light_client.py: config, heartbeat, queue join, result stream; about 2 ms of client CPU a step) instead of
through gradio_client (`--client gradio`: about 50 ms a step, which the thirty students' one core could not keep up
with); the header says which, and each step figure prints the client CPU per served step. The Runs (a, r) still
press through gradio_client.

`--pin` (the default with two or more usable cores; `--no-pin` turns it off) runs the server on one core and the
benchmark's students and flooders on the others (benchmarks/cpu_pin.py), so a figure stops measuring the benchmark's
own clients; the header says which.

`--figures` picks some (letters a, b, c, r: figure (c)'s decode half, d). Each figure is printed as soon as it
exists. Bounded: --visitors, --round-s, --phase-s and --budget-s for the whole run (a phase that no longer fits is
skipped, and says so); every request goes to the server on 127.0.0.1 (the forwarded addresses are only header
values).
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

from benchmarks.class_runs import CLASS_IP, OTHER_IP, client, press_until_done, run_line, run_round
from benchmarks.class_steps import first_example_steps, start_floods, step_line, step_round
from benchmarks.cpu_pin import pin_clients, plan, server_preexec
from benchmarks.decode_share import decode_share_figure
from benchmarks.light_client import light_page
from benchmarks.percentiles import pct
from benchmarks.server import free_port, start_server, stop_server

HONEST_IP = "10.1.0.1"  # phase (d)'s honest visitor
FLOOD_IPS = [f"10.66.1.{i + 1}" for i in range(8)]  # phase (d)'s eight flooding addresses
SERVER_ENV = {"S2D2_TRUSTED_PROXY_HOPS": "1", "S2D2_TRUSTED_PROXIES": "127.0.0.1"}
# --client: what a stepping student's page is (its maker, and the header's words for it)
CLIENTS = {"light": (light_page, "light pages (plain HTTP: config, heartbeat, queue join and result stream)"),
           "gradio": (client, "gradio_client")}


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
    pinning = plan(args.pin)
    print(f"one address: {args.visitors} students behind {CLASS_IP}, stepping through {CLIENTS[args.client][1]}; "
          f"{os.cpu_count()} CPUs, {pinning.line()}; load "
          f"average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; budget {args.budget_s:g} s", flush=True)
    heavy = heavy_trace()
    port = free_port()
    proc = start_server(port, SERVER_ENV, server_preexec(pinning))
    pin_clients(pinning)  # this process's threads, the students' and the flooders' processes spawned from it
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


def load() -> str:
    """The machine's load average now (1, 5, 15 minutes), printed with every figure: the machine may be shared."""
    return "load " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def runs_figure(url: str, args: argparse.Namespace, budget: Budget) -> None:
    """(a): the class's Runs from their own addresses, then from one; the ratio of the two p95s."""
    p95: dict[bool, float] = {}
    for one, label in ((False, f"from {args.visitors} addresses"), (True, "from one address")):
        if budget.fits(f"(a) {label}", args.round_s + 10):
            m = run_round(url, args, one)
            p95[one] = pct([r["s"] for r in m["runs"] if r["ok"]], 0.95)
            print(run_line(label, m) + f" | {load()}", flush=True)
    if len(p95) == 2:
        print(f"(a) class p95 one address / own addresses = {p95[True] / p95[False]:.2f}", flush=True)


def phases(url: str, proc: Any, fns: dict[str, int], heavy: Path, args: argparse.Namespace, budget: Budget) -> None:
    """The figures --figures asks for, in order, each while the budget lasts."""
    if "a" in args.figures:
        runs_figure(url, args, budget)
    students, page = [CLASS_IP] * args.visitors, CLIENTS[args.client][0]
    if "b" in args.figures and budget.fits("(b) replay", args.phase_s + 20):
        m = step_round(url, proc, students, args.step_every_s, args.phase_s, page)
        print(step_line("(b) replay, class alone", m) + f" | {load()}", flush=True)
        print_split(proc, m)
    for where, address in (("its own address", CLASS_IP), ("another address", OTHER_IP)):
        if "c" in args.figures and budget.fits(f"(c) beside a flooder on {where}", args.phase_s + 60):
            stop = start_floods(url, fns, args.flood_threads, heavy, [address])
            m = step_round(url, proc, students, args.step_every_s, args.phase_s, page)
            print(step_line(f"(c) replay beside a heavy-step flooder on {where}", m) + f" | flooder answers "
                  f"{stop()} | {load()}", flush=True)
            print_split(proc, m)
    if "r" in args.figures and budget.fits("(c) runs beside a stranger pressing Run", args.round_s + 60):
        print(f"(c) runs: {load()} before", flush=True)
        for line in decode_share_figure(url, proc, page, args):
            print(line, flush=True)
        print(f"(c) runs: {load()} after", flush=True)
    if "d" in args.figures and budget.fits("(d) eight flooding addresses", args.phase_s + 120):
        stop = start_floods(url, fns, args.flood_threads, heavy, FLOOD_IPS)
        m = step_round(url, proc, [HONEST_IP], 0.5, args.phase_s, page)
        print(step_line("(d) honest visitor beside eight flooding addresses", m) + f" | flooders' answers "
              f"{stop()} | {load()}", flush=True)
        print_split(proc, m)  # where the honest step's time went, with S2D2_BENCH_EVENT_SPLIT set


def print_split(proc: Any, m: dict[str, Any]) -> None:
    """With S2D2_BENCH_SHARE_LEDGER set (the server keeps a ledger, benchmarks/share_ledger.py): how the phase's
    handler CPU split between the students and the other pages, and where a student's step spent its time."""
    split = os.environ.get("S2D2_BENCH_EVENT_SPLIT")
    if split:  # where a step's wall went inside the server (benchmarks/event_split.py)
        from benchmarks.event_split import read as read_split, split_table

        for line in split_table(read_split(proc.pid, split)["events"], "step", *m["window"], m["sessions"]):
            print("    " + line, flush=True)
    path = os.environ.get("S2D2_BENCH_SHARE_LEDGER")
    if not path:
        return
    from benchmarks.share_ledger import mtime, read
    from benchmarks.share_split import split_lines

    ledger = read(proc.pid, path, mtime(path))
    for line in split_lines(ledger, m["sessions"], *m["window"]):
        print("    " + line, flush=True)


def add_options(ap: argparse.ArgumentParser) -> None:
    """This mode's options (load_test.py's parser holds --visitors, --spread-s, --phase-s, --model, --budget-s)."""
    ap.add_argument("--one-address", action="store_true",
                    help="--classroom: every student behind one address (issue 35's figures)")
    ap.add_argument("--round-s", type=float, default=120.0, help="--one-address: seconds a Run round lasts")
    ap.add_argument("--retry-s", type=float, default=5.0, help="--one-address: a refused student presses again")
    ap.add_argument("--step-every-s", type=float, default=2.0, help="--one-address: seconds between a student's steps")
    ap.add_argument("--flood-threads", type=int, default=4, help="--one-address: threads per flooding address")
    ap.add_argument("--stranger-tabs", type=int, default=16, help="--one-address: figure (c)'s decode half: tabs "
                    "of the stranger pressing Run (default 16, the shared batch's places)")
    ap.add_argument("--client", choices=sorted(CLIENTS), default="light",
                    help="--one-address: what a stepping student's page is: light (plain HTTP, benchmarks/"
                    "light_client.py; the default) or gradio (gradio_client, about 50 ms of client CPU a step)")
    ap.add_argument("--pin", action=argparse.BooleanOptionalAction, default=None,
                    help="--one-address: the server on one core, the benchmark's clients on the others (default: on "
                    "with two or more usable cores; benchmarks/cpu_pin.py)")
    ap.add_argument("--figures", default="abcrd", help="--one-address: which figures to measure: a, b, c (steps "
                    "beside flooders), r (runs beside a stranger: figure (c)'s decode places), d; default all")


def validated(args: argparse.Namespace) -> Optional[str]:
    """One line saying what is out of bounds, or None."""
    bounds = {"visitors": (1, 100), "round_s": (5, 3600), "retry_s": (0.5, 600), "phase_s": (5, 3600),
              "step_every_s": (0.1, 60), "flood_threads": (1, 32), "stranger_tabs": (1, 64),
              "budget_s": (10, 86_400), "spread_s": (0, 600)}
    if not args.figures or set(args.figures) - set("abcrd"):
        return f"--figures takes letters of abcrd, got {args.figures[:20]!r}"
    for name, (low, high) in bounds.items():
        value = getattr(args, name)
        if not low <= value <= high:
            return f"--{name.replace('_', '-')} must be within {low:g}..{high:g}, got {value:g}"
    return None
