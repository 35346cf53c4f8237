"""The decode line (components/serve/fair_queue.py's FairLine, as the gpu_run line is) in steady state, as in
`load_test --classroom --one-address --figures r`: both sides keep asking, each page pressing Run again as soon as
its answer is in. Gradio is played by hand: when a place frees it reads the head (`line[0]`) and removes it, as
`Queue.get_events` does. Every Run takes one turn; the oldest running one finishes first. Discrete, exact counts."""
from __future__ import annotations

from collections import Counter
from types import SimpleNamespace

from components.serve.fair_queue import FairLine

CLASS, STRANGER = "ip:10.9.0.1", "ip:10.66.0.1"
PLACES = 16  # S2D2_BATCH_MAX: the gpu_run line's places


def run(class_pages: int, stranger_pages: int, finishes: int) -> tuple[Counter, list[Counter]]:
    """Starts per (unit, page) over `finishes` finished Runs, and the places each unit held after every start.
    The stranger's pages press first (its Runs arrived before the class's)."""
    running: list = []
    line = FairLine([], lambda e: (e.unit, e.page), lambda: list(running))
    pages = [(STRANGER, f"x{i}") for i in range(stranger_pages)] + [(CLASS, f"s{i}") for i in range(class_pages)]
    for unit, page in pages:
        line.append(SimpleNamespace(unit=unit, page=page))
    starts: Counter = Counter()
    holding: list[Counter] = []

    def start() -> None:
        head = line[0]  # Gradio reads the head when a place is free (the line orders itself then)
        line.remove(head)
        running.append(head)
        starts[(head.unit, head.page)] += 1
        holding.append(Counter(e.unit for e in running))

    while len(running) < PLACES and line:
        start()
    for _ in range(finishes):
        done = running.pop(0)
        if line:
            start()  # the free place goes to whoever waits
        line.append(SimpleNamespace(unit=done.unit, page=done.page))  # its page presses again once answered
        if len(running) < PLACES:
            start()
    return starts, holding


def by_unit(starts: Counter) -> Counter:
    return Counter({unit: sum(n for (u, _), n in starts.items() if u == unit) for unit in (CLASS, STRANGER)})


def test_while_both_ask_the_places_split_equally_between_the_units_then_their_pages():
    starts, holding = run(class_pages=30, stranger_pages=48, finishes=960)
    assert by_unit(starts) == {CLASS: 488, STRANGER: 488}  # the 16 first places and every finish after, half each
    assert all(h == {CLASS: 8, STRANGER: 8} for h in holding[PLACES - 1:])  # from the batch's filling on, 8 and 8
    students = [starts[(CLASS, f"s{i}")] for i in range(30)]
    tabs = [starts[(STRANGER, f"x{i}")] for i in range(48)]
    assert max(students) - min(students) <= 1 and max(tabs) - min(tabs) <= 1  # a unit's part split by page


def test_the_stranger_with_more_pages_than_the_class_still_gets_only_half():
    starts, _ = run(class_pages=12, stranger_pages=48, finishes=800)
    assert by_unit(starts)[CLASS] == by_unit(starts)[STRANGER] == 408  # arrival order: 1 in 5


def test_places_one_side_does_not_ask_for_go_to_the_other():
    starts, holding = run(class_pages=30, stranger_pages=4, finishes=600)
    assert max(h[STRANGER] for h in holding) == 4  # the stranger's four tabs each get a place when they ask
    assert min(h[CLASS] for h in holding[PLACES - 1:]) == 12  # the rest stay the class's: no place sits idle
    assert by_unit(starts) == {CLASS: 470, STRANGER: 146}  # the class also takes a place while a tab re-presses
    tabs = [starts[(STRANGER, f"x{i}")] for i in range(4)]
    assert max(tabs) - min(tabs) <= 1
