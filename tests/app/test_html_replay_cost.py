"""What one HTML-replay export may cost (issue 29, row 4): the work is bounded by what the file holds before it
starts, with a visible note; the frames are cached per trace content; a build can be stopped; and the app's export
runs as the visitor's one job, like a decode (gpu_slot.one_job)."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

HERE = Path(__file__).resolve().parent.parent
from tests.support.html_replay import page_data

from components.serve import gpu_slot
from components.replay import share_links
from components.files import html_replay as he
from components.escape import md_text
from components.files.traces import load_example, make_state

EDITING = HERE.parent / "assets" / "traces" / "08-editing-fixes-a-wrong-digit--LLaDA2.json"  # 17 steps


@pytest.fixture(autouse=True)
def fresh_cache():
    he.clear_cache()
    yield
    he.clear_cache()


@pytest.fixture
def frames_built(monkeypatch):
    """Counts the frames rendered (each one is the app's views of one step)."""
    calls = []
    real = he._frame_views

    def counted(trace, step):
        calls.append(step)
        return real(trace, step)

    monkeypatch.setattr(he, "_frame_views", counted)
    return calls


@pytest.mark.parametrize("bound", ["frames", "cells"])
def test_the_work_is_bounded_before_it_starts_with_a_visible_note(monkeypatch, frames_built, bound):
    trace = load_example(EDITING)
    if bound == "frames":
        monkeypatch.setattr(he, "MAX_EXPORT_FRAMES", 5)
    else:
        monkeypatch.setattr(he, "MAX_EXPORT_CELLS", 5 * trace.header.total_length + 3)
    assert he.frame_bound(trace) == 5
    page = he.replay_html(trace, 3)
    assert frames_built == [0, 1, 2, 3, 4]  # nothing past the bound was rendered
    assert page.frames == 5 and page.total == 17
    assert page.note.startswith("This replay stops at step 4 of 17: an HTML replay renders at most")
    assert page.note.split(":")[0] in page.html and len(page_data(page.html)["frames"]) == 5


def test_a_trace_within_the_bounds_is_whole():
    trace = load_example(EDITING)
    assert he.frame_bound(trace) == 18
    page = he.replay_html(trace)
    assert page.frames == 18 and page.note == ""


def test_the_frames_are_cached_per_trace_content(frames_built):
    first = he.replay_html(load_example(EDITING), 2)
    built = len(frames_built)
    again = he.replay_html(load_example(EDITING), 2)  # a fresh load of the same file
    other = he.replay_html(load_example(EDITING), 5)  # another opening step
    assert len(frames_built) == built == 18  # rendered once
    assert again.html == first.html
    assert page_data(other.html)["start"] == 5 and page_data(other.html)["frames"] == page_data(first.html)["frames"]
    he.clear_cache()
    assert he.replay_html(load_example(EDITING), 5).html == other.html  # the cache changes no byte


def test_the_cache_is_bounded(monkeypatch):
    monkeypatch.setattr(he, "CACHE_ENTRIES", 2)
    trace = load_example(EDITING)
    for max_bytes in (4 << 20, 5 << 20, 6 << 20):
        he.replay_html(trace, max_bytes=max_bytes)
    assert len(he._CACHE) == 2 and (he.content_key(trace), 4 << 20) not in he._CACHE


def test_a_build_can_be_stopped_and_leaves_nothing_cached(frames_built):
    asked = []

    def stop_after_three():
        asked.append(1)
        return len(asked) > 3

    with pytest.raises(he.ExportCancelled, match="Stopped"):
        he.replay_html(load_example(EDITING), should_stop=stop_after_three)
    assert frames_built == [0, 1, 2] and not he._CACHE


def _request(session: str) -> SimpleNamespace:
    return SimpleNamespace(session_hash=session, username=None, client=SimpleNamespace(host="198.51.100.7"),
                           headers={}, request=None)


def test_the_apps_export_runs_as_the_visitors_one_job(monkeypatch):
    """Counted like a decode: refused while the session has another job, stopped by the session's Stop."""
    assert getattr(share_links.html_replay_job, "_s2d2_one_job", False)
    state = make_state(load_example(EDITING), "upload")
    session = "export-session"
    running = gpu_slot.JOBS.claim(session)  # a decode of this session is running
    try:
        out = share_links.html_replay_job(_request(session), state, 2)
        assert out["html_file"].visible is False and out["share_status"] == md_text(gpu_slot.BUSY, 300)
    finally:
        gpu_slot.JOBS.finish(running)
    real = he._frame_views

    def stop_on_the_third_frame(trace, step):
        if step == 2:
            gpu_slot.JOBS.stop_session(session)  # what the visitor's Stop (or a closed tab) does
        return real(trace, step)

    monkeypatch.setattr(he, "_frame_views", stop_on_the_third_frame)
    out = share_links.html_replay_job(_request(session), state, 2)
    assert out["html_file"].visible is False and out["share_status"].startswith("⚠ Stopped")
    assert not gpu_slot.JOBS.running(session)  # the job is over: the visitor may export or run again
    monkeypatch.setattr(he, "_frame_views", real)
    out = share_links.html_replay_job(_request(session), state, 2)
    assert out["html_file"].visible is True, out["share_status"]
