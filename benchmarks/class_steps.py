"""Stepping through Replay for `load_test --classroom --one-address` (benchmarks/one_address.py): students step
at their own pace, and heavy-step flooders (benchmarks/attackers.py's replay flood) run beside them, one process
per flooding address."""
from __future__ import annotations

import json
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

from benchmarks.class_runs import client, summary
from benchmarks.server import server_cpu_s

def first_example_steps() -> tuple[str, int]:
    """The label of the app's first example and how many steps it has."""
    from components.files.examples import examples_dir, list_examples

    label, example = next(iter(list_examples(examples_dir()).items()))
    return label, max(1, len(json.loads(Path(example.path).read_text())["steps"]))


def stepper(url: str, address: str, every_s: float, until: float, start_at: float,
            page: Callable[[str, str], Any] = client) -> dict[str, Any]:
    """One student: load the page (`page(url, address)`: gradio_client's Client, or benchmarks/light_client.py's
    light page) and open the first example (again at each tick until both worked), then step every `every_s`."""
    label, steps = first_example_steps()
    out = student_record()
    tick = start_at
    try:
        while time.time() < until:
            threading.Event().wait(max(0.0, tick - time.time()))  # the student's own pace
            tick += every_s
            student_tick(out, lambda: page(url, address), label, steps)
    finally:
        if out["page"] is not None:
            out["page"].close()
    return out


def student_record() -> dict[str, Any]:
    """A student's tally: its page (None until loaded), served steps' seconds, refusals by reason, whether its
    example opened, the steps it asked for."""
    return {"page": None, "step": [], "refused": Counter(), "opened": False, "k": 0}


def student_tick(out: dict[str, Any], open_page: Callable[[], Any], label: str, steps: int) -> None:
    """One moment of a student's pace: load the page and open the example until both worked, else one step. A step
    counts as served (its seconds in out["step"]) only when the page's predict returned its outputs; a refusal or
    an error is counted in out["refused"] by its reason, prefixed "open" or "step"."""
    t0 = time.perf_counter()
    try:
        if out["page"] is None:  # the page itself (its config and API info) may be refused
            out["page"] = open_page()
            out["session"] = out["page"].session_hash
        if not out["opened"]:
            out["page"].predict(label, api_name="/open_example")
            out["opened"] = True
            return
        out["k"] += 1
        out["page"].predict(out["k"] % steps + 1, "auto", "state", api_name="/step")
        out["step"].append(time.perf_counter() - t0)
    except Exception as exc:  # a refusal (429 at the door, the CPU share) or an error
        out["refused"][f"{'open' if not out['opened'] else 'step'}: {reason(exc)}"] += 1


def reason(exc: Exception) -> str:
    """A refusal in a few words: the server's own line where the answer carries one (the door's 429s say which rule
    refused), else the exception's."""
    response = getattr(exc, "response", None)
    try:
        detail = response.json().get("detail") if response is not None else None
    except Exception:  # noqa: BLE001 (not JSON: the status line says enough)
        detail = None
    text = detail or str(exc)
    return f"{getattr(response, 'url', '') and str(response.url.path)[-24:]} {text}".strip()[:90]


def step_line_refusals(m: dict[str, Any]) -> str:
    """Every refusal reason of a round with its count, most frequent first."""
    return "; ".join(f"{n} x {why}" for why, n in m["refused"].most_common(6))


def step_round(url: str, proc: Any, addresses: list[str], every_s: float, seconds: float,
               page: Callable[[str, str], Any] = client) -> dict[str, Any]:
    """Visitors at `addresses` step every `every_s` for `seconds` (their ticks staggered over the first period), each
    through a page made by `page(url, address)`."""
    n = len(addresses)
    start, cpu0, own0 = time.time() + 2.0, server_cpu_s(proc.pid), time.process_time()
    until, t0, wall0 = start + seconds, time.monotonic() + 2.0, time.monotonic()
    with ThreadPoolExecutor(n) as pool:
        results = list(pool.map(lambda i: stepper(url, addresses[i], every_s, until, start + i * every_s / n, page),
                                range(n)))
    steps = [s for r in results for s in r["step"]]
    refused: Counter = sum((r["refused"] for r in results), Counter())
    clients = (time.process_time() - own0, time.monotonic() - wall0)  # the students' threads: CPU s, wall s
    return {"steps": steps, "refused": refused, "cpu": server_cpu_s(proc.pid) - cpu0, "clients": clients,
            "not_opened": sum(not r["opened"] for r in results), "window": (t0, t0 + seconds),
            "sessions": {r["session"] for r in results if r.get("session")}}


def step_line(label: str, m: dict[str, Any]) -> str:
    served, refused = len(m["steps"]), sum(v for k, v in m["refused"].items() if k.startswith("step"))
    opening = sum(v for k, v in m["refused"].items() if k.startswith("open"))
    total = served + refused
    first = next(iter(m["refused"]), "")
    per_step = f"{1e3 * m['cpu'] / served:.0f} ms per served step" if served else "no step served"
    return (f"{label}: steps served {served}/{total} ({100 * served / max(1, total):.0f} %), refused {refused}; "
            f"page or example refused {opening} times, never opened by {m['not_opened']} visitors; step "
            f"{summary(m['steps'])}; server CPU {m['cpu']:.1f} s, {per_step}"
            + (f"; the students' client threads used {m['clients'][0]:.1f} CPU s in {m['clients'][1]:.0f} s"
               + (f", {1e3 * m['clients'][0] / served:.0f} ms of client CPU per served step" if served else "")
               if "clients" in m else "")
            + (f" | refusals: {step_line_refusals(m)}" if first else ""))


def flood(url: str, fns: dict[str, int], threads: int, heavy: Path, address: str, ready: Any, stop: Any,
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
    started, readies = [], []
    for address in addresses:  # all at once: one after another, eight flooders' uploads took 13 min on a busy machine
        ready, stop, answers = ctx.Event(), ctx.Event(), ctx.Queue()
        p = ctx.Process(target=flood, args=(url.rstrip("/"), fns, threads, heavy, address, ready, stop, answers),
                        daemon=True)
        p.start()
        started.append((p, stop, answers))
        readies.append((p, ready))
    for p, ready in readies:
        while not ready.wait(timeout=1) and p.is_alive():
            pass  # its uploads done, or it died (its answers then read "flooder lost")

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
