"""Values a frozen config computes once and keeps (`FrozenCache`): its hash and its dict.

Why: a config is frozen, so anything computed from its fields alone stays true; and the batch-first engine asks
for the same ones again and again (it groups its rows by config at every step, a dict key thousands of times per
batch decode; every trace of a batch writes the config's dict into its header). Computing each once per config
object turns that per-row, per-step work into a lookup.

Invariants: the cache is not a field, so equality (the fields) ignores it and equal configs hash equally; it is
never pickled or copied (a hash holds for one process only: string hashes are salted per process), so a copy or an
unpickled config computes its own.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable


class FrozenCache:
    """A base for a frozen dataclass: `once(name, build)` keeps `build()`'s value on the object; `fields_hash` is
    the fields' hash, kept so (the subclass names it as its `__hash__`: a dataclass keeps only its own)."""

    def once(self, name: str, build: Callable[[], Any]) -> Any:
        """`build()` the first time `name` is asked for on this object, the kept value after."""
        kept = self.__dict__.get(name)
        if kept is None:
            kept = build()
            object.__setattr__(self, name, kept)  # past the frozen guard: a cache, not a field
        return kept

    def fields_hash(self) -> int:
        """The hash of the fields' values, in field order (what a frozen dataclass's own hash takes), once (read
        without `once`'s call: every row of every batch-first step hashes its config)."""
        kept = self.__dict__.get("_hash")
        return kept if kept is not None else self.once(
            "_hash", lambda: hash(tuple(getattr(self, f.name) for f in dataclasses.fields(self))))

    def __getstate__(self) -> dict[str, Any]:
        """Pickled and copied without its caches (their names start with "_"; a field's never does)."""
        return {k: v for k, v in self.__dict__.items() if not k.startswith("_")}
