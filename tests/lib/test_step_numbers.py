"""result.py `number_steps`: every step gets its index in the run, and a list numbered at every step (the stop
check) pays for its new steps only."""
from __future__ import annotations

from s2d2.decoding.result import number_steps


class Step:
    """A step record's index, counting how often it is written."""

    def __init__(self) -> None:
        self._index, self.writes = -1, 0

    @property
    def index(self) -> int:
        return self._index

    @index.setter
    def index(self, value: int) -> None:
        self._index, self.writes = value, self.writes + 1


def test_steps_are_numbered_by_position_and_only_new_steps_are_written():
    steps = [Step() for _ in range(3)]
    assert [s.index for s in number_steps(steps)] == [0, 1, 2]
    steps += [Step(), Step()]
    number_steps(steps)
    assert [s.index for s in steps] == [0, 1, 2, 3, 4]
    assert [s.writes for s in steps] == [1, 1, 1, 1, 1]  # the numbered run was not walked again
    del steps[2:]  # a rollback keeps a prefix (Kept.restore)
    steps.append(Step())
    assert [s.index for s in number_steps(steps)] == [0, 1, 2]
    assert number_steps([]) == []
