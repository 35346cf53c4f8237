"""components/replay/unit_lru.py: each unit of fairness keeps its own recent keys, a flooder pushes out only its own,
the total stays bounded however many units a client forges, values are shared, and reads under many threads."""
from __future__ import annotations

import threading

import pytest

from components.replay.unit_lru import UnitLru


def test_a_units_least_recently_used_key_goes_first_and_a_read_counts_as_a_use():
    kept = UnitLru(per_unit=2, total=10)
    kept.put("u", "a", 1)
    kept.put("u", "b", 2)
    assert kept.get("u", "a") == 1  # "a" is now u's most recent
    kept.put("u", "c", 3)
    assert (kept.get("u", "a"), kept.get("u", "b"), kept.get("u", "c"), len(kept)) == (1, None, 3, 2)


def test_a_flooder_stepping_500_steps_leaves_another_units_kept_steps_served():
    kept = UnitLru(per_unit=24, total=128)
    for step in range(5):  # the class's example
        kept.put("class", ("example", step), f"view {step}")
    for step in range(500):  # a flooder's heavy trace, every step new
        kept.put("flooder", ("heavy", step), step)
    assert [kept.get("class", ("example", s)) for s in range(5)] == [f"view {s}" for s in range(5)]
    assert kept.held("flooder") == 24 and len(kept) == 29


def test_past_the_total_the_unit_holding_most_lets_go_and_a_small_unit_keeps_its_keys():
    kept = UnitLru(per_unit=24, total=60)
    for step in range(5):
        kept.put("class", ("example", step), step)
    for step in range(200):  # eight flooders, each at its part: 8 x 24 > 60
        for flooder in range(8):
            kept.put(f"flooder {flooder}", (flooder, step), step)
    assert kept.held("class") == 5
    assert all(kept.get("class", ("example", s)) == s for s in range(5))
    assert sum(kept.held(f"flooder {f}") for f in range(8)) == 55


def test_forged_units_keep_the_total_bounded():
    kept = UnitLru(per_unit=4, total=50)
    for unit in range(5000):
        kept.put(f"forged {unit}", unit, "x" * 10)
    assert len(kept) == 50 and sum(kept.held(f"forged {u}") for u in range(5000)) == 50


def test_a_value_is_kept_once_for_every_unit_that_holds_it_and_goes_with_its_last_holder():
    kept = UnitLru(per_unit=1, total=10)
    shared = {"canvas": "drawn once"}
    kept.put("school a", "step 1", shared)
    assert kept.get("school b", "step 1") is shared  # another address's class: a hit, now held by both
    kept.put("school a", "step 2", "a's next")  # a lets go of step 1; b still holds it
    assert kept.get("school c", "step 1") is shared and len(kept) == 2
    kept.put("school b", "other", 0)
    kept.put("school c", "other", 0)  # the last holders let go of step 1: the value goes
    assert kept.get("school d", "step 1") is None and len(kept) == 2


def test_bounds_are_checked():
    with pytest.raises(ValueError):
        UnitLru(per_unit=5, total=4)
    with pytest.raises(ValueError):
        UnitLru(per_unit=0, total=4)


def test_many_threads_never_take_it_past_its_bounds():
    kept = UnitLru(per_unit=3, total=8)

    def work(t: int) -> None:
        for i in range(300):
            kept.put(t % 4, (t, i % 9), i)
            kept.get((t + 1) % 4, (t, (i + 1) % 9))

    threads = [threading.Thread(target=work, args=(t,)) for t in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(kept) <= 8 and all(kept.held(u) <= 3 for u in range(4))
    assert sum(kept.held(u) for u in range(4)) <= 8
