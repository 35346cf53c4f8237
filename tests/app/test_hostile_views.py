"""Issue 19, rows 10-15 at the handler level: every string from a file is inert wherever it is shown (the headline
included, no autolinks), and every bad value gets one readable line (no int beyond 64 bits reaches the encoder, no
RecursionError / OverflowError, no 1 MB echo)."""
from __future__ import annotations

import json
import re
from pathlib import Path

from fixtures import trace_factory as tf
from tests.support.payloads import PAYLOAD

from components.replay import handlers as h
from components.sweep import panel as sw
from components.escape import md_text

ROOT = Path(__file__).resolve().parents[2]
# the app's own in-page links (`<a href="#strip">`) are ours; a link from the file would point elsewhere
TAGS = re.compile(r"<\s*(img|form|button|h1|svg|script|iframe)\b|<\s*a\b(?![^>]*href=\"#[\w-]*\">)", re.I)
AUTOLINK = re.compile(r"(?i)(https?://|www\.|\w@\w)")
MARKDOWN_VIEWS = {"load_status", "headline", "title", "run_status", "preset_note", "cmp_status", "cmp_diff",
                  "wi_summary", "wi_status"}


def _strings(value, name=""):
    """Every string inside a handler's outputs (dicts, lists, gr.update dicts, Plotly figures as JSON)."""
    if isinstance(value, str):
        yield name, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(v, name)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _strings(v, name)
    elif hasattr(value, "to_plotly_json"):
        yield name, json.dumps(value.to_plotly_json(), default=str)


def assert_inert(outputs: dict) -> None:
    shown = {k: v for k, v in outputs.items() if k not in ("state", "cmp_state", "download")}  # never rendered
    for name, text in ((n, t) for key, value in shown.items() for n, t in _strings(value, key)):
        assert not TAGS.search(text), (name, TAGS.search(text).group(0), text[:300])
        if name in MARKDOWN_VIEWS:
            assert not AUTOLINK.search(text), (name, text[:300])


def hostile_file(tmp_path: Path) -> Path:
    data = tf.hostile().to_dict()
    data["header"]["model"]["name"] = PAYLOAD[:120]
    data["header"]["prompt_text"] = PAYLOAD
    data["footer"]["output_text"] = PAYLOAD  # the headline quotes the start of the answer
    path = tmp_path / "hostile.json"
    path.write_text(json.dumps(data))
    return path


def test_md_text_breaks_html_markdown_and_autolinks():
    out = md_text(PAYLOAD, 1000)
    assert not TAGS.search(out) and not AUTOLINK.search(out) and "](" not in out
    assert md_text("a" * 50, 10) == "a" * 9 + "…" and md_text("x\ud800y") == "x\ufffdy"


def test_a_hostile_upload_is_inert_in_every_view(tmp_path):
    out = h.upload_trace(str(hostile_file(tmp_path)))
    assert out["load_status"] == "Loaded the uploaded trace.", out["load_status"]
    assert "evil" in out["headline"]  # the answer is quoted, as text
    assert_inert(out)
    state = out["state"]
    for step in range(len(h.trace_from_state(state).steps) + 1):
        for color in ("state", "p", "q", "r"):
            assert_inert(h.step_views(state, step, "auto", color, 0))


def test_sweep_meta_model_url_is_not_a_link(tmp_path):
    good = json.loads((ROOT / "assets" / "results" / "sweep.json").read_text())
    path = tmp_path / "results.json"
    path.write_text(json.dumps(dict(good, meta=dict(good["meta"], model="https://evil.example/m www.evil.example"))))
    status = sw.sweep_views(path, "upload")[0]
    assert "evil" in status and not AUTOLINK.search(status), status
