"""A class stepping through the same example costs one render per step (components/replay/step_cache.py): the views
of (state key, step, switches) are drawn once and shared; other switches, another step or another trace draw
their own; the cache stays bounded; a state without a key is drawn every time."""
from __future__ import annotations

from components.replay import handlers as h
from components.replay.step_cache import StepCache
from components.views import step_views as views


def counted(monkeypatch) -> list:
    calls: list = []
    real = h.render_step

    def render(trace, step, options=views.StepOptions()):
        calls.append((step, options))
        return real(trace, step, options)

    monkeypatch.setattr(h, "render_step", render)
    monkeypatch.setattr(h, "STEPS", StepCache())
    return calls


def example_state() -> dict:
    label = next(iter(h.list_examples(h.examples_dir())))
    return h.open_example(label)["state"]


def test_thirty_pages_on_one_example_draw_each_step_once_and_see_the_same_views(monkeypatch):
    calls = counted(monkeypatch)
    state = example_state()
    calls.clear()  # opening the example drew its first step
    alone = views.render_step(h.trace_from_state(state), 2)
    pages = [h.step_views(dict(state), 2) for _ in range(30)]  # thirty pages hold the same handle
    assert len(calls) == 1
    assert all(p["canvas"] == alone["canvas"] and p["summary"] == alone["summary"] for p in pages)
    assert pages[0] is not pages[1]  # each page gets a dict of its own
    h.step_views(state, 3)
    h.step_views(state, 2, color_by="p")
    h.step_views(state, 2, selected=1)
    assert len(calls) == 4  # another step, colouring or pinned token: drawn on its own


def test_a_state_without_a_key_is_drawn_every_time_and_the_cache_is_bounded(monkeypatch):
    calls = counted(monkeypatch)
    trace = h.trace_from_state(example_state())
    calls.clear()
    bare = {"trace": trace.to_dict()}  # an older handle carried the trace itself
    h.step_views(bare, 1)
    h.step_views(bare, 1)
    assert len(calls) == 2
    cache = StepCache(size=3)
    for k in range(10):
        cache.views(("key", k), lambda: {"k": k})
    assert len(cache) == 3 and cache.views(("key", 9), lambda: {"k": -1}) == {"k": 9}


def test_a_flooders_drawings_push_out_only_its_own_views(monkeypatch):
    """Views are kept per unit of fairness (the request's address or account: components/serve/identity.py)."""
    from components.serve.identity import reset_current, set_current

    cache, drawn = StepCache(), []

    def views_as(unit: str, key) -> dict:
        token = set_current(unit)
        try:
            return cache.views(key, lambda: drawn.append(key) or {"k": key})
        finally:
            reset_current(token)

    for step in range(5):
        views_as("ip:10.9.0.1", ("example", step))
    for step in range(500):
        views_as("ip:10.66.1.1", ("heavy", step))
    drawn.clear()
    assert [views_as("ip:10.9.0.1", ("example", s)) for s in range(5)] == [{"k": ("example", s)} for s in range(5)]
    assert drawn == []
