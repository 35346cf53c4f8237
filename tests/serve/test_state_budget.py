"""Issue 19, rows 7 and 8 at the unit level: session state is a small handle into a compressed store with a global
and a per-client byte budget, so a flood of sessions from one client evicts only that client's traces."""
from __future__ import annotations

import json
import random

import pytest

from fixtures import trace_factory as tf

from components.replay import handlers as h
from components.files import traces as traces_io
from components.serve.identity import reset_current, set_current
from components.serve.state_budget import StateStore


def as_client(key, fn, *args, **kwargs):
    token = set_current(key)
    try:
        return fn(*args, **kwargs)
    finally:
        reset_current(token)


def noise(seed: int) -> str:
    """About 900 bytes once compressed (random hex)."""
    return random.Random(seed).getrandbits(8 * 900).to_bytes(900, "big").hex()


def test_a_client_over_its_quota_evicts_only_its_own_values():
    store = StateStore(budget=10**9, client_budget=10_000)
    victim = store.put("v" * 50_000 + "victim", "ip:10.0.0.1")
    first = store.put("a0 " * 3000, "ip:6.6.6.6")
    for i in range(420):  # 420 fresh sessions' worth of distinct values
        store.put(f"a{i} " + "x" * 3000 + str(i), "ip:6.6.6.6")
    assert store.get(victim).endswith("victim") and store.get(first) is None
    assert store.bytes_used("ip:6.6.6.6") <= 10_000 + 200


def test_over_the_global_budget_the_heaviest_client_loses_first():
    store = StateStore(budget=6_000, client_budget=10**9)
    small = store.put("s" * 20_000 + "!", "ip:1.1.1.1")  # compresses to well under 1 kB
    kept = [store.put(noise(i), f"ip:2.2.2.{i % 3}") for i in range(30)]
    assert store.get(small) is not None and store.bytes_used() <= 6_000 + 1300
    assert store.get(kept[-1]) is not None and store.get(kept[0]) is None
    pinned = store.put("p" * 100, pinned=True)
    for i in range(50):
        store.put(noise(100 + i), "ip:3.3.3.3")
    assert store.get(pinned) == "p" * 100 and store.bytes_used("local") == 0  # kept, not charged


def test_state_is_a_compressed_handle_and_a_dropped_one_shows_no_trace(monkeypatch):
    monkeypatch.setattr(traces_io, "STORE", StateStore())  # this test's store alone (others fill the app's one)
    heavy = tf.large(512, 16)
    state = traces_io.make_state(heavy, "upload")
    text = traces_io.trace_json(heavy)
    assert len(json.dumps(state)) < 200 and traces_io.STORE.bytes_used() < len(text)
    blob = traces_io.STORE._entries[state["key"]].blob
    assert len(blob) * 3 < len(text), (len(blob), len(text))
    traces_io._PARSED.pop(state["key"], None)
    monkeypatch.setattr(traces_io.STORE, "_entries", {})  # what eviction does to this session's value
    assert traces_io.trace_from_state(state) is None
    assert h.step_views(state, 1)["summary"] == h.NO_TRACE


@pytest.mark.slow
def test_a_flood_of_sessions_from_one_client_keeps_a_victims_upload(tmp_path, monkeypatch):
    """Row 7 through the handlers: the victim uploads, then one client opens 420 sessions that each upload."""
    monkeypatch.setenv("S2D2_CLIENT_STATE_MB", "1")
    monkeypatch.setattr(traces_io, "PARSED_BUDGET", 1)  # no parse cache: every read goes to the store
    path = tmp_path / "victim.json"
    path.write_text(tf.hostile().to_json())
    victim = as_client("ip:10.0.0.7", h.upload_trace, str(path))["state"]
    for i in range(420):
        trace = tf.large(64, 8, seed=i)
        as_client("ip:6.6.6.6", traces_io.make_state, trace, "upload")
    assert traces_io.trace_from_state(victim).to_dict() == tf.hostile().to_dict()
    assert traces_io.STORE.bytes_used("ip:6.6.6.6") <= 2**20 + 64_000
