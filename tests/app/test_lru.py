"""components/replay/lru.py: the bound, the order it drops in, and reads under many threads."""
from __future__ import annotations

import threading

from components.replay.lru import Lru


def test_the_least_recently_used_entry_goes_first_and_a_read_counts_as_a_use():
    kept = Lru(2)
    kept.put("a", 1)
    kept.put("b", 2)
    assert kept.get("a") == 1  # "a" is now the most recent
    kept.put("c", 3)
    assert (kept.get("a"), kept.get("b"), kept.get("c"), len(kept)) == (1, None, 3, 2)


def test_many_threads_never_take_it_past_its_bound():
    kept = Lru(5)

    def work(t: int) -> None:
        for i in range(300):
            kept.put((t, i % 9), i)
            kept.get((t, (i + 1) % 9))

    threads = [threading.Thread(target=work, args=(t,)) for t in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(kept) == 5
