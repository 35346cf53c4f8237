"""Session values too big for gr.State (a trace's JSON, a comparison's lanes), kept once, compressed, under budgets.

A session's gr.State holds only a small handle ({"key": ..., "name": ...}); the text lives here, zlib-compressed
(a trace's JSON shrinks 5-10x), charged to the visitor that loaded it (components/serve/identity.py). Two budgets
hold under attack:
- S2D2_CLIENT_STATE_MB per client: over it, that client's own least recently used values go first, so fresh
  sessions from one address only ever evict that address's values;
- S2D2_STATE_MB for everything: over it, the least recently used value of the client holding the most bytes goes
  first, so a visitor with a few traces is the last to lose one.
Pinned values (the bundled examples) are kept and not charged. A handle whose value was dropped reads as None:
the views then say "no trace loaded", never show another trace.
"""
from __future__ import annotations

import hashlib
import threading
import time
import zlib
from collections import OrderedDict
from dataclasses import dataclass
from typing import Optional

from components.serve.identity import LOCAL, current
from components.serve.settings import env_megabytes

LEVEL = 6  # zlib level: a 4 MB trace compresses in ~0.1 s to about a sixth


def state_budget_bytes() -> int:
    return env_megabytes("S2D2_STATE_MB", 128)


def client_budget_bytes() -> int:
    return env_megabytes("S2D2_CLIENT_STATE_MB", 32)


@dataclass
class Entry:
    blob: bytes
    client: str
    pinned: bool
    used: float


class StateStore:
    """Compressed text by key, LRU, with a global and a per-client byte budget (see the module docstring)."""

    def __init__(self, budget: Optional[int] = None, client_budget: Optional[int] = None) -> None:
        self._budget, self._client_budget = budget, client_budget
        self._lock = threading.Lock()
        self._entries: "OrderedDict[str, Entry]" = OrderedDict()  # least recently used first
        self._by_client: dict[str, int] = {}
        self._bytes = 0

    def put(self, text: str, client: Optional[str] = None, pinned: bool = False) -> str:
        """Keep `text` for `client` (default: the current request's visitor); returns its key. The same text from
        the same client is kept once."""
        client = LOCAL if pinned else (client or current())
        key = hashlib.sha256(f"{client}\0{text}".encode("utf-8", "surrogatepass")).hexdigest()[:32]
        blob = zlib.compress(text.encode("utf-8", "surrogatepass"), LEVEL)
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._charge(old, -1)
            entry = Entry(blob, client, pinned or bool(old and old.pinned), time.monotonic())
            self._entries[key] = entry
            self._charge(entry, 1)
            self._evict(keep=key)
        return key

    def get(self, key: str) -> Optional[str]:
        """The text, or None when the key is unknown or its value was dropped; marks it recently used."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            self._entries.move_to_end(key)
            entry.used = time.monotonic()
            blob = entry.blob
        return zlib.decompress(blob).decode("utf-8", "surrogatepass")

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def bytes_used(self, client: Optional[str] = None) -> int:
        return self._bytes if client is None else self._by_client.get(client, 0)

    def __len__(self) -> int:
        return len(self._entries)

    def _charge(self, entry: Entry, sign: int) -> None:
        if entry.pinned:
            return
        size = sign * len(entry.blob)
        self._bytes += size
        left = self._by_client.get(entry.client, 0) + size
        if left > 0:
            self._by_client[entry.client] = left
        else:
            self._by_client.pop(entry.client, None)

    def _evict(self, keep: str) -> None:
        """Drop values until both budgets hold (never `keep`, the value just stored, nor a pinned one)."""
        client = self._entries[keep].client
        per_client = self._client_budget or client_budget_bytes()
        while self._by_client.get(client, 0) > per_client and self._drop_lru(client, keep):
            pass
        budget = self._budget or state_budget_bytes()
        while self._bytes > budget:
            heaviest = sorted(self._by_client, key=self._by_client.__getitem__, reverse=True)
            if not any(self._drop_lru(c, keep) for c in heaviest):  # stops at the first client it could trim
                break

    def _drop_lru(self, client: str, keep: str) -> bool:
        for key, entry in self._entries.items():  # least recently used first
            if entry.client == client and not entry.pinned and key != keep:
                self._charge(self._entries.pop(key), -1)
                return True
        return False


STORE = StateStore()
