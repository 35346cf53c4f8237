"""Equal JSON leaves held once: a frame bundle's parsed figures share their equal rows and strings.

Why: a frame bundle (frame_bundle.py) keeps one attention-mask figure per distinct mask, each parsed from Plotly's
JSON. Parsing makes fresh objects for every value, so 48 masks of 128 x 129 cells held ~9 MB of Python lists for
~2.5 MB of JSON, and the bundle lives in the cache after the upload that built it. Yet the masks of one trace are
made of few distinct rows (a row is 1s up to a block edge, then 0s) and the same token labels, step after step.

`Sharer.share(value)` gives back `value` with every flat list of exact ints, strings, bools and Nones, and every
string, replaced by the first equal one it has seen. Invariants: the result is equal to `value` and serialises to
the same JSON byte for byte (a list is shared only with one of the same types position by position, so [1] never
stands for [True] nor [1.0]; a list holding a float is never shared, as 0.0 == -0.0); dicts and the other lists
are new objects, so the caller may still edit the top level. Shared lists must not be edited in place: the bundle is
read-only once built (the cache hands the same bundle to every page), which is what makes sharing safe.
"""
from __future__ import annotations

from typing import Any

_FLAT = frozenset((int, str, bool, type(None)))  # exact types whose equal values write the same JSON


class Sharer:
    """A memo of the rows and strings seen so far (drop it with the build: it holds a key per distinct row)."""

    def __init__(self) -> None:
        self._strings: dict[str, str] = {}
        self._rows: dict[tuple[tuple[type, ...], tuple[Any, ...]], list[Any]] = {}

    def share(self, value: Any) -> Any:
        kind = type(value)
        if kind is str:
            return self._strings.setdefault(value, value)
        if kind is dict:
            return {self.share(k): self.share(v) for k, v in value.items()}
        if kind is list:
            return self._list(value)
        return value

    def _list(self, value: list[Any]) -> list[Any]:
        types = tuple(map(type, value))  # C loops: a mask's 16k cells cost well under a millisecond
        if not _FLAT.issuperset(types):
            return [self.share(v) for v in value]
        key = (types, tuple(value))
        row = self._rows.get(key)
        if row is None:  # its strings shared too: labels recur across masks inside differing lists
            row = self._rows[key] = [self._strings.setdefault(v, v) if type(v) is str else v for v in value]
        return row
