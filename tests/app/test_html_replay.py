"""The self-contained HTML replay (components/files/html_replay.py): every frame is the app's view of that step, the page
is bounded in size, every string from the trace is inert, and the CLI writes one without importing gradio.
(tests/browser/test_share.py opens the pages in Chromium.)"""
from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent.parent
ROOT = HERE.parent
from fixtures import trace_factory as tf
from tests.support.html_replay import frames_of, hostile_trace, join, page_data, text_content, token_classes
from fixtures.upload_fuzz import legit_trace

from components.files import html_replay as he
from components.views.canvas import position_state, visible_text
from components.files.examples import list_examples, load_pair
from components.replay.handlers import step_views
from components.views.story import single_story
from components.views.trace_index import index_of
from components.files.traces import load_example, make_state

ASSETS = ROOT / "assets" / "traces"
SHIPPED = sorted(ASSETS.glob("*.json"))


def _traces():
    cases = [(p.name, lambda p=p: load_example(p)) for p in SHIPPED]
    return cases + [(name, make) for name, make in sorted(tf.SCENARIOS.items())]


@pytest.mark.parametrize("name,make", _traces(), ids=[n for n, _ in _traces()])
@pytest.mark.slow
def test_every_frame_is_the_apps_view_of_that_step(name, make):
    trace = make()
    page = he.replay_html(trace).html
    frames = frames_of(page)
    assert len(frames) == len(trace.steps) + 1
    state = make_state(trace, name)
    idx = index_of(trace)
    for step, (canvas, strip, summary) in enumerate(frames):
        app = step_views(state, step)  # what the Replay tab's handler shows at this step
        assert (canvas, strip, summary) == (app["canvas"], app["strip"], app["summary"]), step
        states = [(pos, next(c[3:] for c in cls.split() if c.startswith("st-"))) for pos, cls in
                  token_classes(canvas)]
        assert states and all(position_state(idx, step, pos)[0] == st for pos, st in states), step


def test_fragment_runs_round_trip():
    assert he.runs([4, 5, 6, 9]) == [4, -2, 9] and he.runs([]) == [] and he.runs([3, 3]) == [3, 3]
    rng = random.Random(0)
    pieces = [f"<p{i}>" for i in range(50)]
    for _ in range(200):
        ids = [rng.randrange(50) if rng.random() < 0.3 else i % 50 for i in range(rng.randrange(60))]
        assert join(pieces, he.runs(ids)) == "".join(pieces[i] for i in ids)


def test_opens_at_the_story_step_or_the_one_asked_and_never_past_the_end():
    trace = load_example(SHIPPED[1]) if SHIPPED else tf.mixed()
    assert page_data(he.replay_html(trace).html)["start"] == single_story(trace).step
    assert page_data(he.replay_html(trace, 2).html)["start"] == 2
    assert page_data(he.replay_html(trace, 10**9).html)["start"] == len(trace.steps)
    assert page_data(he.replay_html(trace, "junk").html)["start"] == 0  # type: ignore[arg-type]


def test_a_replay_over_the_bound_stops_at_the_last_step_that_fits_and_says_so():
    trace = tf.large(256, 16)
    whole = he.replay_html(trace)
    assert whole.frames == len(trace.steps) + 1 and not whole.note
    bound = whole.size // 3
    cut = he.replay_html(trace, max_bytes=bound)
    assert cut.size <= bound < whole.size and 1 < cut.frames < whole.frames
    assert cut.note == (f"This replay stops at step {cut.frames - 1} of {len(trace.steps)}: the whole run would make "
                        f"the file larger than {bound / 2**20:g} MB. The app replays all of it.")
    assert f'<p class="note" role="status">{cut.note}</p>' in cut.html
    assert frames_of(cut.html) == frames_of(whole.html)[: cut.frames]  # the steps kept are whole and unchanged
    assert page_data(cut.html)["start"] <= cut.frames - 1


def test_a_trace_whose_first_step_alone_is_too_large_is_refused():
    trace = tf.large(256, 16)
    bound = next(b for b in range(4_000, 200_000, 500) if _fits(trace, b))
    page = he.replay_html(trace, max_bytes=bound)
    assert page.frames == 1 and page.size <= bound and "stops at step 0 of" in page.note
    with pytest.raises(he.ExportError, match="too large for an HTML replay: its first step alone exceeds"):
        he.replay_html(trace, max_bytes=bound - 500)


def _fits(trace, bound: int) -> bool:
    try:
        he.replay_html(trace, max_bytes=bound)
    except he.ExportError:
        return False
    return True


@pytest.mark.slow
def test_the_largest_recording_the_app_makes_fits_the_default_bound():
    page = he.replay_html(legit_trace())
    assert page.frames == page.total + 1 == 513 and page.size <= he.MAX_HTML_BYTES


def test_every_string_from_the_trace_is_inert():
    trace = hostile_trace()
    page = he.replay_html(trace).html
    page.encode("utf-8")  # lone surrogates became escapes: the file is valid UTF-8
    head, rest = page.split('<script type="application/json" id="s2d2-data">')
    data, _ = rest.split("</script>", 1)
    for needle in ("<img", "<svg", "<!--", 'onmouseover="', "\u2028", "\u2029"):  # outside the data: escaped text
        assert needle not in head, needle
    assert "&lt;/script&gt;&lt;img src=x onerror=window.__pwned=1&gt;" in head  # the model name, shown as text
    assert "<" not in data and "\u2028" not in data and "\u2029" not in data  # so no "</script", no "<!--"
    assert page.lower().count("<script") == 2 and page.lower().count("</script") == 2  # data block + page script
    shown = ""
    for canvas, strip, _ in frames_of(page):
        assert not any(tag in (canvas + strip).lower() for tag in ("<img", "<svg", "<script")), (canvas, strip)
        shown += text_content(canvas) + text_content(strip)
    used = {c.text for s in trace.steps for c in s.commits} | set(trace.header.prompt_tokens)
    assert len(used) >= 3 and all(visible_text(w) in shown for w in used)  # every hostile token shown, as text


def test_cli_writes_a_replay_and_refuses_bad_input_in_one_line(tmp_path, capsys):
    src = SHIPPED[1] if SHIPPED else tmp_path / "t.json"
    if not SHIPPED:
        src.write_text(tf.mixed().to_json())
    out = tmp_path / "replay.html"
    assert he.main([str(src), str(out), "--step", "1"]) == 0
    assert page_data(out.read_text(encoding="utf-8"))["start"] == 1
    assert capsys.readouterr().out.startswith(f"written: {out} (")
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema_version": 1}')
    for args in ([str(bad)], [str(tmp_path / "missing.json")], [str(src), "--max-mb", "0"],
                 [str(src), str(tmp_path / "no" / "such" / "dir.html")]):
        assert he.main(args) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err


def test_cli_is_library_level_it_never_imports_gradio(tmp_path):
    src = SHIPPED[0] if SHIPPED else None
    if src is None:
        src = tmp_path / "t.json"
        src.write_text(tf.mixed().to_json())
    code = ("import sys; from components.files import html_replay as he; rc = he.main([sys.argv[1], sys.argv[2]]); "
            "assert 'gradio' not in sys.modules, 'gradio imported'; sys.exit(rc)")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code, str(src), str(tmp_path / "x.html")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "x.html").stat().st_size > 0


@pytest.mark.skipif(not SHIPPED, reason="no shipped examples")
def test_shipped_examples_export_well_under_the_bound():
    for label, example in list_examples(ASSETS).items():
        for trace in filter(None, load_pair(example)):
            page = he.replay_html(trace)
            assert page.frames == len(trace.steps) + 1 and page.size < 300_000, label
