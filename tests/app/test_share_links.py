"""Share a moment (components/replay/share_links.py): a link's query parameters -> the app's first state, hostile parameters
ignored with one readable line, the link of the moment on screen, and the HTML replay download."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from urllib.parse import parse_qs, urlsplit

import pytest

HERE = Path(__file__).resolve().parent.parent
from fixtures import trace_factory as tf
from tests.support.html_replay import page_data

from components.replay import share_links as share
from components.files.examples import list_examples, load_pair
from components.replay.handlers import RUNS, open_example
from components.files.html_replay import ExportError, replay_html
from components.views.story import pair_story
from components.files.traces import make_state, trace_from_state

ASSETS = HERE.parent / "assets" / "traces"
EXAMPLES = list_examples(ASSETS)
PAIR = next((ex for ex in EXAMPLES.values() if ex.baseline is not None), None)
SINGLE = next((ex for ex in EXAMPLES.values() if ex.baseline is None), None)
pytestmark = pytest.mark.skipif(PAIR is None or SINGLE is None, reason="needs the shipped example traces")


@pytest.fixture(autouse=True)
def shipped(monkeypatch, tmp_path):
    monkeypatch.setenv("S2D2_EXAMPLE_TRACES", str(ASSETS))
    monkeypatch.setenv("S2D2_EXPORT_DIR", str(tmp_path / "exports"))


def _open(**params):
    return share.open_moment(params, ASSETS)


def _slider(out):
    return out["slider"].value


def test_a_link_opens_its_example_run_and_step():
    slug = share.example_slug(PAIR)
    out = _open(example=slug, run="baseline", step="3")
    _, baseline = load_pair(PAIR)
    assert trace_from_state(out["state"]).to_json() == baseline.to_json()
    assert _slider(out) == 3 and out["toggle"].value == RUNS["baseline"] and out["example"]["value"] == PAIR.label
    assert "share_note" not in out
    assert out["canvas"] == open_example(PAIR.label, RUNS["baseline"], 3, ASSETS)["canvas"]
    s2d2 = _open(example=slug, run="s2d2")  # no step: the moment its story names
    main, partner = load_pair(PAIR)
    assert _slider(s2d2) == pair_story(main, partner).step and s2d2["toggle"].value == RUNS["s2d2"]


@pytest.mark.parametrize("name", ["slug", "stem", "label", "upper"])
def test_an_example_is_named_by_slug_file_name_or_label(name):
    value = {"slug": share.example_slug(SINGLE), "stem": SINGLE.path.stem, "label": SINGLE.label,
             "upper": share.example_slug(SINGLE).upper()}[name]
    out = _open(example=value, step="1")
    assert out["example"]["value"] == SINGLE.label and _slider(out) == 1 and "share_note" not in out


def test_no_parameters_or_only_foreign_ones_change_nothing():
    assert _open() == {} and _open(__theme="dark", utm_source="x") == {}
    assert share.link_params(SimpleNamespace(query_params={"__theme": "dark"})) == {}  # the load leaves state alone
    assert share.link_params(SimpleNamespace()) == {}  # a request without parameters
    assert share.open_link(None) == {} and share.open_link("junk") == {}


def test_page_load_reads_the_link_bounded_and_its_change_opens_it():
    slug = share.example_slug(PAIR)
    moment = share.link_params(SimpleNamespace(query_params={"example": slug, "step": "2", "utm": "x"}))["moment"]
    assert moment == {"example": slug, "step": "2"}
    out = share.open_link(moment)
    assert out["example"]["value"] == PAIR.label and _slider(out) == 2
    huge = share.link_params(SimpleNamespace(query_params={"example": "x" * 10**6}))["moment"]["example"]
    assert len(huge) == share.MAX_VALUE_CHARS + 1
    _one_line(share.open_link({"example": huge}), "is not one of the shipped examples")


def test_page_load_sets_the_download_unless_a_link_opens_a_moment():
    """The opening trace's download comes with the page load (never in the published /config); a link's moment
    sets its own download when it opens."""
    main, _ = load_pair(PAIR)
    state = open_example(PAIR.label, RUNS["s2d2"])["state"]
    out = share.page_load(state, SimpleNamespace(query_params={}))
    assert set(out) == {"download"} and Path(out["download"]).read_text(encoding="utf-8") == main.to_json()
    linked = share.page_load(state, SimpleNamespace(query_params={"example": share.example_slug(PAIR)}))
    assert set(linked) == {"moment"} and "download" in share.open_link(linked["moment"])
    assert share.page_load(None, SimpleNamespace(query_params={})) == {}


HOSTILE_EXAMPLES = ["../../etc/passwd", "/etc/passwd", "assets/traces/01-x.json", "x" * 10_000, "",
                    "<script>alert(1)</script>", "`**x**` [a](javascript:alert(1))", "\u202e\u0000"]


@pytest.mark.parametrize("value", HOSTILE_EXAMPLES, ids=range(len(HOSTILE_EXAMPLES)))
def test_an_unknown_example_opens_the_first_one_with_one_line(value):
    out = _open(example=value, run="baseline", step="2")
    first = next(iter(EXAMPLES.values()))
    assert out["example"]["value"] == first.label and out["toggle"].value == RUNS["s2d2"]  # run and step went with it
    _one_line(out, "is not one of the shipped examples")


@pytest.mark.parametrize("step,why", [("abc", "is not a whole number"), ("-1", "is not a whole number"),
                                      ("2.5", "is not a whole number"), ("1e3", "is not a whole number"),
                                      ("9" * 40, "is not a whole number"), ("\uff13", "is not a whole number"),
                                      ("999", "is past the end of this run"),
                                      ("<img src=x onerror=alert(1)>", "is not a whole number")])
def test_a_bad_step_is_ignored_and_the_story_step_shown(step, why):
    out = _open(example=share.example_slug(PAIR), step=step)
    main, partner = load_pair(PAIR)
    assert _slider(out) == pair_story(main, partner).step
    _one_line(out, why)


def test_a_bad_run_or_a_missing_partner_falls_back_to_the_s2d2_run():
    out = _open(example=share.example_slug(PAIR), run="<b>evil</b>", step="1")
    assert out["toggle"].value == RUNS["s2d2"] and _slider(out) == 1
    _one_line(out, "is neither s2d2 nor baseline")
    out = _open(example=share.example_slug(SINGLE), run="baseline")
    assert out["example"]["value"] == SINGLE.label and out["toggle"].visible is False
    _one_line(out, "this example has no diffusion-alone run")


def test_every_problem_is_named_in_the_same_line_and_repeated_keys_take_the_last():
    out = _open(example=[share.example_slug(SINGLE), share.example_slug(PAIR)], run="nope", step="x")
    assert out["example"]["value"] == PAIR.label
    note = _one_line(out, "is neither s2d2 nor baseline")
    assert "is not a whole number" in note


def _one_line(out, why: str) -> str:
    note = out["share_note"]
    assert note.visible is True
    text = note.value
    assert text.startswith("⚠ Part of this link was ignored: ") and why in text and "\n" not in text
    assert "<" not in text.replace("&lt;", "") and len(text) < 400  # escaped, bounded
    return text


def test_the_link_of_the_moment_on_screen_opens_that_moment():
    opened = open_example(PAIR.label, RUNS["baseline"], 2, ASSETS)
    out = share.share_link(opened["state"], RUNS["baseline"], 2)
    query = out["share_link"].value
    assert out["share_link"].visible is True and query == f"?example={share.example_slug(PAIR)}&run=baseline&step=2"
    back = share.open_moment({k: v[-1] for k, v in parse_qs(urlsplit(query).query).items()}, ASSETS)
    assert back["state"]["key"] == opened["state"]["key"] and _slider(back) == 2  # the same pinned trace
    junk = share.share_link(opened["state"], "junk", "x")  # a bad toggle or step from the browser: clamped, s2d2
    assert junk["share_link"].value.endswith("&run=s2d2&step=0")


def test_a_trace_that_is_not_a_shipped_example_gets_no_link_but_a_way_to_share_it():
    for state in (make_state(tf.mixed(), "upload"), make_state(tf.mixed(), "run"), None, {"name": 3}):
        out = share.share_link(state, RUNS["s2d2"], 1)
        assert out["share_link"].visible is False and "HTML replay" in out["share_status"]


def test_the_html_replay_is_written_for_the_trace_and_step_on_screen():
    opened = open_example(PAIR.label, RUNS["s2d2"], 2, ASSETS)
    out = share.html_replay(opened["state"], 2)
    value = out["html_file"].value  # the button's file, as Gradio serves it
    path = Path(value["path"] if isinstance(value, dict) else value)
    assert out["html_file"].visible is True and path.suffix == ".html" and path.name.endswith("-step2.html")
    trace = trace_from_state(opened["state"])
    assert path.read_text(encoding="utf-8") == replay_html(trace, 2).html
    assert page_data(path.read_text(encoding="utf-8"))["start"] == 2
    assert "opens at step 2" in out["share_status"] and "kB" in out["html_file"].label


def test_the_html_replay_refuses_in_one_line(monkeypatch):
    assert "No trace loaded" in share.html_replay(None, 0)["share_status"]

    def too_big(*_, **__):
        raise ExportError("This trace is too large for an HTML replay: its first step alone exceeds 5 MB.")

    monkeypatch.setattr(share, "replay_html", too_big)
    out = share.html_replay(make_state(tf.mixed(), "upload"), 1)
    assert out["html_file"].visible is False and out["share_status"].startswith("⚠ This trace is too large")


def test_a_new_trace_hides_the_previous_link_and_file():
    out = share.reset_share()
    assert out["share_link"].visible is False and out["html_file"].visible is False and out["share_status"] == ""
