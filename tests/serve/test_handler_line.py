"""Issue 35: one fair line for every event handler (components/serve/handler_line.py). Every queued Python event that
names no places of its own runs in one line with S2D2_HANDLER_CONCURRENCY places in all; decodes, Compare and the
HTML export keep theirs; the line is kept in fair order with recent use breaking ties (unit, then page, least recent
use first), so a student's step goes ahead of a flooder's waiting steps. Injected clocks, no threads."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from components.serve import fair_queue, front_door, gpu_slot
from components.serve.cpu_share import CpuShare
from components.serve.fair_order import fair_order
from components.serve.handler_line import HANDLERS, handler_slots, one_line
from components.serve.roster import Roster

CLASS = "ip:10.0.0.1"
HONEST = "ip:10.1.0.1"


def block_fn(**kw) -> SimpleNamespace:
    defaults = dict(fn=print, queue=True, concurrency_limit="default", concurrency_id=str(id(kw)))
    return SimpleNamespace(**{**defaults, **kw})


def test_one_line_takes_every_queued_handler_that_names_no_places_of_its_own():
    step, load = block_fn(), block_fn()
    run = block_fn(concurrency_limit=16, concurrency_id=gpu_slot.GPU_RUN)
    export = block_fn(concurrency_limit=2, concurrency_id="html_export")
    stop = block_fn(queue=False)
    page_only = block_fn(fn=None)
    fns = dict(enumerate([step, load, run, export, stop, page_only]))
    ids = {k: f.concurrency_id for k, f in fns.items()}
    assert one_line(fns) == 2 and one_line(fns) == 2  # idempotent
    assert step.concurrency_id == load.concurrency_id == HANDLERS
    assert (run.concurrency_id, export.concurrency_id) == (gpu_slot.GPU_RUN, "html_export")
    assert (stop.concurrency_id, page_only.concurrency_id) == (ids[4], ids[5])


def test_the_apps_handlers_share_one_line_with_four_places_and_its_decodes_keep_their_own(monkeypatch):
    import app

    monkeypatch.delenv("S2D2_HANDLER_CONCURRENCY", raising=False)
    assert handler_slots() == 4 and app.demo._queue.default_concurrency_limit == 4
    lines = {f.name: f.concurrency_id for f in app.demo.fns.values() if f.fn is not None and f.queue is not False}
    for name in ("step_views", "server_step", "restyle", "open_example", "upload_trace", "page_load", "opened_run"):
        assert lines[name] == HANDLERS, name
    assert lines["run"] in gpu_slot.DECODE_SLOTS and lines["rerun_whatif"] in gpu_slot.DECODE_SLOTS
    assert lines["html_replay"] == "html_export"


def test_least_recent_use_breaks_ties_between_pages_and_between_units():
    flood = [(CLASS, f"f{k}") for k in range(8) for _ in range(5)]  # eight flooder pages, five steps each, first
    waiting = flood + [(CLASS, "student")]
    used = {**{(CLASS, f"f{k}"): 4.0 for k in range(8)}, (CLASS, "student"): 0.2}
    assert fair_order(waiting, {})[0] == 0  # by places and arrival alone, the flooder's first step goes first
    assert fair_order(waiting, {}, used)[0] == len(flood)  # by recent use, the student's does
    floods = [(f"ip:10.66.1.{k}", "~rest") for k in range(8) for _ in range(4)]
    waiting = floods + [(HONEST, "~rest")]
    unit_used = {**{f"ip:10.66.1.{k}": 3.0 for k in range(8)}, HONEST: 0.1}
    assert fair_order(waiting, {}, {}, unit_used)[0] == len(floods)  # one honest visitor beside eight addresses
    held = {(HONEST, "~rest"): 1}  # its step runs already: places held still come first (no unit takes them all)
    assert fair_order(waiting, held, {}, unit_used)[0] != len(floods)


def test_a_units_use_counts_its_idle_pages_too():
    now = [100.0]
    share = CpuShare(lambda: 0.75, lambda: 10.0, clock=lambda: now[0])
    share.charge((CLASS, "s1"), 1.0)
    share.charge((CLASS, "s2"), 2.0)
    members, units = share.recent([(CLASS, "s1")])
    assert members == {(CLASS, "s1"): pytest.approx(1.0)} and units == {CLASS: pytest.approx(3.0)}
    now[0] += 10.0  # one window: both decay by e
    assert share.recent([(CLASS, "s2")])[1][CLASS] == pytest.approx(3.0 / 2.718281828, rel=1e-6)


def fake_event(ip: str, session: str) -> SimpleNamespace:
    request = SimpleNamespace(headers={"x-forwarded-for": ip}, client=SimpleNamespace(host="127.0.0.1"))
    return SimpleNamespace(request=request, username=None, session_hash=session, concurrency_id=HANDLERS)


def test_in_the_handler_line_a_students_step_goes_ahead_of_a_flooders_waiting_steps(monkeypatch):
    monkeypatch.setenv("S2D2_TRUSTED_PROXY_HOPS", "1")
    roster = Roster()
    monkeypatch.setattr(fair_queue, "ROSTER", roster)
    for page in [f"f{k}" for k in range(8)] + ["student"]:  # every page is open: each counts as a member
        roster.arrive(CLASS, page)
    now = [100.0]
    share = CpuShare(lambda: 0.75, lambda: 10.0, clock=lambda: now[0])
    monkeypatch.setattr(fair_queue, "CPU_SHARE", share)
    for k in range(8):
        share.charge((CLASS, f"f{k}"), 2.0)  # the flooder's pages have stepped a heavy trace
    share.charge((CLASS, "student"), 0.1)
    fn = SimpleNamespace(concurrency_id=HANDLERS)
    line = SimpleNamespace(queue=[])
    queue = SimpleNamespace(event_queue_per_concurrency_id={HANDLERS: line}, active_jobs=[None, None],
                            create_event_queue_for_fn=lambda f: None)
    fair_queue.install(queue, fn, front_door.event_client)
    queue.active_jobs[0] = [fake_event("10.0.0.1", "f0")]  # two of its steps run (the line's two places)
    queue.active_jobs[1] = [fake_event("10.0.0.1", "f1")]
    for k in range(8):
        for _ in range(5):
            line.queue.append(fake_event("10.0.0.1", f"f{k}"))
    line.queue.append(fake_event("10.0.0.1", "student"))
    assert line.queue[0].session_hash == "student"  # next free place: the student's, not a flooder page's
