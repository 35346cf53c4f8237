"""Figure (c) of `load_test --classroom --one-address`, its decode half: the class's share of the decode places
*while the class asks*, beside a stranger on another address who presses Run over and over from several tabs.

Both sides keep asking for the whole window: each of the --visitors students behind the class's address (CLASS_IP)
presses Run with its own question and presses again as soon as its answer is in (a class working through
exercises); each of the stranger's --stranger-tabs tabs (OTHER_IP, each its own session) does the same. A refused
press (a non-✓ status or an error) is pressed again after REPRESS_S. Every Run uses the same preset on the same model,
so a finished Run held one decode place for about as long whichever side pressed it: the class's share of the
decode places is its Runs finished inside the window over all Runs finished inside it. With
S2D2_BENCH_SHARE_LEDGER set (benchmarks/share_ledger.py) the server also says how long each side's Run events held a
place (their walls in Gradio's line, cut at the window's ends): the place-seconds share, measured rather than
proxied. Issue 35 asks for at least 45 %.

The window opens SETTLE_S after the last page opened (both sides pressing by then) and lasts --round-s; afterwards
nobody presses again and the Runs in flight finish (they are not counted). The stranger's tabs default to the
batch's places (S2D2_BATCH_MAX, 16), so the stranger alone could hold every place: what it gets beside the class
is then the scheduler's doing, not the limit of its own demand.

Dropped: the earlier figure (each student pressed once; the class's finished Runs over every Run that finished
between the class's first press and its last answer, 28 %). The class was never waiting then (p95 0.85 s), so that
window was mostly the stranger's Runs while the class asked for nothing: it measured demand, not fairness.
"""
from __future__ import annotations

import argparse
import threading
import time
from typing import Any, Callable, Iterable, Mapping

from benchmarks.class_runs import CLASS_IP, OTHER_IP
from benchmarks.percentiles import pct

REPRESS_S = 0.5  # a refused press is pressed again this much later, like a person
SETTLE_S = 5.0  # from the last page opened to the window's start: every page has pressed once by then
TARGET = 0.45  # issue 35: the class keeps at least this share of the decode places
CLASS, STRANGER = "class", "stranger"

Page = Callable[[str, str], Any]  # (url, forwarded address) -> a page with predict(..., api_name), session_hash


class Tally:
    """What every page of both sides got: each finished Run (side, moment it finished on time.monotonic(), seconds
    from press to answer) and each refused press, by side. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.finished: list[tuple[str, float, float]] = []
        self.refused: dict[str, int] = {CLASS: 0, STRANGER: 0}
        self.sessions: dict[str, set[str]] = {CLASS: set(), STRANGER: set()}
        self.first_refusal: str = ""

    def opened(self, side: str, session: str) -> None:
        with self._lock:
            self.sessions[side].add(session)

    def done(self, side: str, seconds: float) -> None:
        with self._lock:
            self.finished.append((side, time.monotonic(), seconds))

    def refusal(self, side: str, why: str) -> None:
        with self._lock:
            self.refused[side] += 1
            self.first_refusal = self.first_refusal or f"{side}: {why[:90]}"


def window_counts(finished: Iterable[tuple[str, float, float]], t0: float, t1: float) -> dict[str, int]:
    """Runs each side finished within [t0, t1)."""
    counts = {CLASS: 0, STRANGER: 0}
    for side, at, _ in finished:
        if t0 <= at < t1:
            counts[side] += 1
    return counts


def place_seconds(events: Iterable[list], sides: Mapping[str, set[str]], t0: float, t1: float,
                  fn: str = "run") -> dict[str, float]:
    """Seconds of decode places each side's `fn` events held within [t0, t1), from the server ledger's events
    (started, session, unit, member, api name, wait, wall), each cut at the window's ends."""
    held = {side: 0.0 for side in sides}
    for started, session, _, _, name, _, wall in events:
        if name != fn:
            continue
        for side, sessions in sides.items():
            if session in sessions:
                held[side] += max(0.0, min(started + wall, t1) - max(started, t0))
    return held


def share(mine: float, theirs: float) -> float:
    """`mine` over both (0 when neither has any)."""
    return mine / (mine + theirs) if mine + theirs > 0 else 0.0


def _presser(url: str, page: Page, address: str, side: str, prompt: str, args: argparse.Namespace,
             tally: Tally, opened: threading.Barrier, stop: threading.Event) -> None:
    """One page: open it, wait for every page to be open, then press Run until `stop`, again right after each
    answer (after REPRESS_S following a refusal)."""
    from benchmarks.classroom import default_knobs

    p = None
    try:
        p = page(url, address)
        tally.opened(side, p.session_hash)
    except Exception as exc:  # noqa: BLE001 (the door paced the page's opening: this page never presses)
        tally.refusal(side, f"page not opened: {type(exc).__name__}: {exc}")
    finally:
        opened.wait(timeout=300)
    if p is None:
        return
    knobs = default_knobs()
    try:
        while not stop.is_set():
            t = time.monotonic()
            try:
                status = str(p.predict(prompt, args.model, *knobs, api_name="/run")[0])
            except Exception as exc:  # noqa: BLE001 (a refusal at the door or in the queue, a cut stream)
                status = f"{type(exc).__name__}: {exc}"
            if status.startswith("✓"):
                tally.done(side, time.monotonic() - t)
                continue
            tally.refusal(side, status)
            stop.wait(REPRESS_S)
    finally:
        p.close()


def both_asking(url: str, page: Page, args: argparse.Namespace) -> tuple[Tally, float, float]:
    """Both sides press Run for the window (module docstring); the tally and the window (time.monotonic())."""
    from benchmarks.classroom import questions

    tally, stop = Tally(), threading.Event()
    n, tabs = args.visitors, args.stranger_tabs
    opened = threading.Barrier(n + tabs + 1)
    asks = [(CLASS_IP, CLASS, q) for q in questions(n)] + [(OTHER_IP, STRANGER, q) for q in questions(tabs)]
    threads = [threading.Thread(target=_presser, args=(url, page, ip, side, q, args, tally, opened, stop),
                                daemon=True) for ip, side, q in asks]
    for th in threads:
        th.start()
    opened.wait(timeout=300)
    t0 = time.monotonic() + SETTLE_S
    t1 = t0 + args.round_s
    stop.wait(max(0.0, t1 - time.monotonic()))
    stop.set()
    for th in threads:
        th.join(timeout=300)
    return tally, t0, t1


def decode_share_lines(tally: Tally, t0: float, t1: float, held: Mapping[str, float] | None = None) -> list[str]:
    """The figure's lines: counts, shares, the class's Run times, refusals and the verdict against TARGET."""
    counts = window_counts(tally.finished, t0, t1)
    ours = share(counts[CLASS], counts[STRANGER])
    times = [s for side, at, s in tally.finished if side == CLASS and t0 <= at < t1]
    theirs = [s for side, at, s in tally.finished if side == STRANGER and t0 <= at < t1]
    lines = [f"(c) runs while both ask for {t1 - t0:.0f} s: {len(tally.sessions[CLASS])} students on {CLASS_IP}, "
             f"{len(tally.sessions[STRANGER])} stranger tabs on {OTHER_IP}; Runs finished: class {counts[CLASS]}, "
             f"stranger {counts[STRANGER]}; class share {100 * ours:.1f} %, stranger share "
             f"{100 * share(counts[STRANGER], counts[CLASS]):.1f} %",
             f"    press to answer: class p50 {pct(times, 0.5):.2f} s p95 {pct(times, 0.95):.2f} s, stranger p50 "
             f"{pct(theirs, 0.5):.2f} s p95 {pct(theirs, 0.95):.2f} s; refused presses: class {tally.refused[CLASS]}, "
             f"stranger {tally.refused[STRANGER]}" + (f" (first: {tally.first_refusal})" if tally.first_refusal else "")]
    verdict = ours
    if held is not None:
        verdict = share(held[CLASS], held[STRANGER])
        lines.append(f"    decode place-seconds (server ledger): class {held[CLASS]:.1f}, stranger "
                     f"{held[STRANGER]:.1f}; class share {100 * verdict:.1f} %")
    lines.append(f"    class share of the decode places while it asks {100 * verdict:.1f} % "
                 f"({'place-seconds' if held is not None else 'finished Runs'}) against >= {100 * TARGET:.0f} %: "
                 f"{'PASS' if verdict >= TARGET else 'FAIL'}"
                 + ("" if held is not None else "; set S2D2_BENCH_SHARE_LEDGER=FILE for the place-seconds"))
    return lines


def decode_share_figure(url: str, proc: Any, page: Page, args: argparse.Namespace) -> list[str]:
    """Measure the figure on the server at `url` (process `proc`); its lines. Place-seconds are added when the
    server keeps a ledger (S2D2_BENCH_SHARE_LEDGER)."""
    import os

    tally, t0, t1 = both_asking(url, page, args)
    held = None
    path = os.environ.get("S2D2_BENCH_SHARE_LEDGER")
    if path:
        from benchmarks.share_ledger import mtime, read

        ledger = read(proc.pid, path, mtime(path))
        held = place_seconds(ledger["events"], tally.sessions, t0, t1)
    return decode_share_lines(tally, t0, t1, held)
