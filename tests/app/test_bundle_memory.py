"""What a frame bundle (components/replay/frame_bundle.py) costs in memory: every upload builds one, and issue 8's
target is < 20 MB RSS growth per upload. Measured with tracemalloc (deterministic: the same allocations every run),
never with a clock: the frame count is fixed by the test, not by the CPU budget."""
from __future__ import annotations

import gc
import hashlib
import json
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from fixtures import trace_factory as tf
from fixtures import upload_fuzz as uf

from components.files.traces import load_example, parse_text
from components.replay import frame_bundle as fb
from components.replay.shared_values import Sharer

SHIPPED = sorted((Path(__file__).resolve().parent.parent.parent / "assets" / "traces").glob("*.json"))


def compact(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def test_shared_values_are_equal_and_write_the_same_json():
    value = {"z": [[1, 0], [1, 0], [True, False], [1.0, 0.0], [-0.0, 0.0], [0.0, 0.0]], "x": ["a", "b"],
             "y": ["a", "b"], "n": [None, "a", 1], "m": [None, "a", 1], "t": "a", "e": [], "f": []}
    got = Sharer().share(value)
    assert got == value and compact(got) == compact(value)
    assert got["z"][0] is got["z"][1] and got["x"] is got["y"] and got["n"] is got["m"]  # held once
    assert got["z"][2] is not got["z"][0] and got["z"][3] is not got["z"][0]  # [True, False], [1.0, 0.0]: not [1, 0]
    assert got["z"][4] is not got["z"][5] and compact(got["z"][4]) == b"[-0.0,0.0]"  # floats: 0.0 == -0.0
    assert got is not value and got["z"] is not value["z"]  # the containers around the rows are new


def test_a_bundles_masks_hold_each_distinct_row_once():
    trace = tf.large(256, 32)
    bundle = fb.build_bundle(trace)
    rows = [row for mask in bundle["masks"] for t in mask["data"] for row in t.get("z", [])]
    assert len(bundle["masks"]) > 4 and len(rows) > 10 * len({id(row) for row in rows})
    assert len({id(row) for row in rows}) == len({compact(row) for row in rows})


def test_the_bundle_key_names_the_content_as_before():
    """The key is a digest of the trace's text as the app keeps it: for a shipped example (its file is `to_json`'s
    text) the digest of `to_json`, as it always was; an upload formatted otherwise is named by its own bytes, and
    its bundle is otherwise the same."""
    trace = load_example(SHIPPED[0])
    assert fb.text_key(trace) == hashlib.sha256(trace.to_json().encode("utf-8")).hexdigest()
    text = trace.to_json(indent=2)
    indented = parse_text(text.encode())
    assert fb.text_key(indented) == hashlib.sha256(text.encode("utf-8")).hexdigest()
    whole, other = fb.build_bundle(trace), fb.build_bundle(indented)
    assert whole["key"] != other["key"] and {**whole, "key": ""} == {**other, "key": ""}


@pytest.fixture
def fixed_frames(monkeypatch):
    """Eight frames whatever the machine's speed (the CPU budget out of the way)."""
    monkeypatch.setattr(fb, "BUILD_CPU_S", 1e9)
    monkeypatch.setattr(fb, "MAX_BUNDLE_FRAMES", 8)


def test_an_uploads_bundle_keeps_and_peaks_at_a_few_times_its_json(fixed_frames):
    """A heavy upload (a 0.9 MB trace, 64-token blocks: 65 x 64 masks) through bundle_for, as the Upload box does.
    Kept: what the bundle holds once the cycle collector has run (what is garbage before depends on the whole
    heap, so on the tests run before). Before this work 4.2x its JSON (every mask's cells parsed afresh) and a 16x
    peak (the bundle encoded again to weigh it, on top); after: 1.5x and 8.4x. Naming the content no longer encodes
    the trace again either (test_the_bundle_key_names_the_content_as_before)."""
    text = uf.big_trace(256, 256, 64, 1, "<x>", "r", heavy=True, light_drafts=1, forwards_per_step=3).to_json()
    trace = parse_text(text.encode())
    fb.build_bundle(trace)  # the views' own per-trace caches, built once per trace, are not the bundle's
    gc.collect()
    tracemalloc.start()
    try:
        bundle = fb.bundle_for(trace)
        peak = tracemalloc.get_traced_memory()[1]
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
        fb.clear_cache()
    size = len(compact(bundle))
    assert bundle["last"] == 7 and len(bundle["masks"]) == 8
    assert kept < 2.5 * size, (kept, size)
    assert peak < 11 * size, (peak, size)
