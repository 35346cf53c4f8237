"""The page Run's hand-off (components/run/js/page_run.js `handOff`) and the server's reading of it
(components/run/page_decode.receive), bound together under Node: a finished trace over the size the server takes is
never sent, and the Run says so in one readable line with what to do; a trace within it is uploaded as a file.

The page's worker is a stand-in (it answers with a shipped example's trace as the page would send it), and so is
fetch (it records the upload): what is tested is the page's decision and the server's words, not the decode.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from components.run import page_decode
from components.serve.page_modules import RUN_JS
from tests.support.node_runner import run_module

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "assets" / "traces" / "03-verify-when-it-pays--block-4.json"
BROWSER = {"where": "browser", "runtime": "onnxruntime-web", "runtime_version": "1.30.0", "backend": "wasm",
           "dtype": "float32"}
# A Worker that answers any request with the trace it was built with, and a fetch that records an upload.
HAND_OFF = """
const trace = input.trace;
globalThis.Worker = class {
  constructor() { setTimeout(() => this.onmessage({ data: { type: 'done', trace } }), 0); }
  postMessage() {}
  terminate() {}
};
const uploads = [];
globalThis.fetch = async (url, init) => {
  uploads.push(String(url));
  return input.status ? { ok: false, status: input.status } : { ok: true, json: async () => ['/tmp/x'] };
};
const doc = { baseURI: 'http://localhost/', querySelector: () => null };
const plan = { files: { worker: 'w.js' }, handoff_bytes: input.limit, live: {} };
const [note, file] = await m.handOff(JSON.stringify(plan), doc);
output = { note, file, uploads };
"""


def _hand_off(limit: int, status: int = 0) -> dict:
    """handOff's [note, file] and the URLs it posted to, its upload answered with HTTP `status` (0: accepted)."""
    trace = json.loads(EXAMPLE.read_text(encoding="utf-8"))
    trace["header"]["decoded_in"] = dict(BROWSER)
    return run_module(RUN_JS / "page_run.js", HAND_OFF, {"trace": trace, "limit": limit, "status": status})


@pytest.mark.skipif(not EXAMPLE.exists(), reason="the shipped example traces are missing")
def test_a_trace_over_the_limit_is_not_sent_and_the_run_says_what_to_do():
    size = len(json.dumps(json.loads(EXAMPLE.read_text(encoding="utf-8"))))
    got = _hand_off(size // 2)
    assert got["file"] is None and got["uploads"] == []  # nothing sent
    note = json.loads(got["note"])
    assert set(note) == {"page_too_big", "limit"} and note["limit"] == size // 2 and note["page_too_big"] > size // 2
    out = page_decode.receive(got["note"], None)
    assert set(out) == {"run_status", "live", "output", "run_ok", "run_final"} and out["run_ok"] is False
    status = out["run_status"]
    mb = f"{round(note['page_too_big'] / 1024)} kB, more than the {round(note['limit'] / 1024)} kB the server takes"
    assert status == (f"⚠ Your browser decoded this run, but its trace is too large to hand to the server ({mb}). "
                      "Untick **Decode in my browser** to decode it on the server, or shorten the **Generation "
                      "length**. Nothing was kept."), status


@pytest.mark.skipif(not EXAMPLE.exists(), reason="the shipped example traces are missing")
def test_a_trace_within_the_limit_is_uploaded_as_a_file():
    got = _hand_off(10 ** 9)
    assert got["note"] == "" and got["file"]["path"] == "/tmp/x" and got["uploads"] == ["http://localhost/gradio_api/upload"]


@pytest.mark.parametrize("note", ['{"page_too_big": "huge", "limit": -1}', '{"page_too_big": true}',
                                  '{"page_too_big": 1e400, "limit": 5}'])
def test_a_forged_size_note_still_gets_one_plain_line(note):
    status = page_decode.receive(note, None)["run_status"]
    assert status.startswith("⚠ Your browser decoded this run, but its trace is too large to hand to the server. ")
    assert "\n" not in status and "huge" not in status


@pytest.mark.skipif(not EXAMPLE.exists(), reason="the shipped example traces are missing")
def test_an_upload_the_route_refuses_gets_one_line_saying_why_and_what_to_do():
    got = _hand_off(10 ** 9, status=413)
    assert got["file"] is None and len(got["uploads"]) == 1
    assert page_decode.receive(got["note"], None)["run_status"].startswith(
        "⚠ Your browser decoded this run, but its trace is too large to hand to the server (")
    busy = page_decode.receive(_hand_off(10 ** 9, status=429)["note"], None)["run_status"]
    assert busy == ("⚠ Your browser decoded this run, but the server did not take its trace (HTTP 429). Press Run "
                    "again in a moment, or untick **Decode in my browser** to decode on the server. Nothing was kept.")
    forged = page_decode.receive('{"page_upload_refused": "<b>x</b>"}', None)["run_status"]
    assert forged.startswith("⚠ Your browser decoded this run, but the server did not take its trace. Press")


def test_sizes_read_in_the_upload_settings_units():
    line = page_decode.too_big_line(6 * 2 ** 20 + 1, 5 * 2 ** 20)  # S2D2_MAX_UPLOAD_MB=5
    assert "(6.0 MB, more than the 5.0 MB the server takes)" in line
    assert "(2 kB, more than the 1 kB the server takes)" in page_decode.too_big_line(2000, 100)
