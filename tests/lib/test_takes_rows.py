"""Whether a model's forward takes `rows` (forwards.py `takes_rows`) is read once per forward function, not once
per sequence (a batch makes a Recorder per sequence, and `inspect.signature` costs ~25 µs), and a forward set on
the instance itself is still read each time."""
from __future__ import annotations

import inspect
from typing import Any

from s2d2.decoding import forwards


class WithRows:
    def forward(self, cache: Any, ids: Any, positions: Any, attention: Any, keep: int, last: Any = None,
                rows: Any = None) -> None:
        return None


class Without:
    def forward(self, *args: Any) -> None:
        return None


def test_a_class_forward_is_read_once_and_an_instance_forward_each_time(monkeypatch):
    seen: list[Any] = []
    real = inspect.signature

    def counted(fn: Any, *a: Any, **k: Any) -> Any:
        seen.append(fn)
        return real(fn, *a, **k)

    monkeypatch.setattr(forwards.inspect, "signature", counted)
    assert all(forwards.takes_rows(WithRows()) for _ in range(5))
    assert not any(forwards.takes_rows(Without()) for _ in range(5))
    assert len(seen) == 2  # one read per class's forward, whatever the number of instances
    patched = WithRows()
    patched.forward = lambda *args: None  # type: ignore[method-assign]
    assert not forwards.takes_rows(patched) and not forwards.takes_rows(patched)
    assert len(seen) == 4  # an instance's own forward is read every time
