"""Share a moment: a link that opens the app on an example, run and step, and the HTML replay as a download.

A link is `?example=<slug>&run=s2d2|baseline&step=<n>`, the slug being the example's file name without its numeric
prefix (`verifier-catches-a-wrong-digit`). Every parameter is untrusted: bounded in length, matched against the
shipped examples only (never a path), and a step is a whole number within the run. What does not check out is
ignored and said in one line above the canvas; unknown parameters (Gradio's `__theme`, trackers) are left alone.
Handlers return {component name: value} like components/replay/handlers.py.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional

import gradio as gr

from components.serve import gpu_slot
from components.serve.disk_budget import DISK
from components.files.examples import Example, examples_dir, list_examples, load_pair
from components.replay.handlers import RUNS, open_example
from components.files.html_replay import ExportError, replay_html
from components.escape import md_text
from components.views.trace_index import clamp_step
from components.files.traces import TraceError, export_folder, export_name, export_path, trace_from_state
from components.views.plural import plural

KEYS = ("example", "run", "step")
MAX_VALUE_CHARS = 120  # a longer value is not one of ours
RUN_KEYS = {"s2d2": "s2d2", "baseline": "baseline", "diffusion": "baseline"}
STEP_RE = re.compile(r"[0-9]{1,6}")  # ASCII digits only (\d would also take "３")


def example_slug(example: Example) -> str:
    """The example's name in a link: its file name without the ordering prefix."""
    return re.sub(r"^\d+-", "", example.path.stem)


def find_example(value: str, examples: Mapping[str, Example]) -> Optional[Example]:
    """The shipped example a link names, by slug, file name or label (case-insensitive); None otherwise."""
    wanted = value.strip().casefold()
    for label, ex in examples.items():
        if wanted in (example_slug(ex).casefold(), ex.path.stem.casefold(), label.casefold()):
            return ex
    return None


@dataclass
class Moment:
    """What a link asks for, after validation: an example label, a run key, a step (None: the story's step)."""

    label: str
    run: str = "s2d2"
    step: Optional[int] = None
    ignored: list[str] = field(default_factory=list)


def _param(params: Mapping[str, Any], key: str) -> Optional[str]:
    value = params.get(key)
    if isinstance(value, (list, tuple)):
        value = value[-1] if value else None
    return None if value is None else str(value)


def _shown(value: str) -> str:
    return f"“{md_text(value, 30)}{'…' if len(value) > 30 else ''}”"


def read_moment(params: Mapping[str, Any], directory: Optional[Path] = None) -> Optional[Moment]:
    """The moment a link's query parameters name, None when they name none; `ignored` lists what was dropped."""
    values = {k: _param(params, k) for k in KEYS}
    if all(v is None for v in values.values()):
        return None
    examples = list_examples(directory or examples_dir())
    if not examples:
        return Moment("", ignored=["no examples are shipped with this app"])
    name, run, step = values["example"], values["run"], values["step"]
    ignored: list[str] = []
    example = next(iter(examples.values()))
    if name is not None:
        found = find_example(name, examples) if len(name) <= MAX_VALUE_CHARS else None
        if found is None:
            return Moment(example.label, ignored=[f"example {_shown(name)} is not one of the shipped examples, so "
                                                  "the link opened the first one"])
        example = found
    key = "s2d2"
    if run is not None:
        key = RUN_KEYS.get(run.strip().casefold()[:MAX_VALUE_CHARS], "")
        if not key:
            ignored.append(f"run {_shown(run)} is neither s2d2 nor baseline")
            key = "s2d2"
        elif key == "baseline" and example.baseline is None:
            ignored.append("this example has no diffusion-alone run")
            key = "s2d2"
    moment = Moment(example.label, key, None, ignored)
    if step is not None:
        moment.step = _valid_step(step, example, key, ignored)
    return moment


def _valid_step(step: str, example: Example, run: str, ignored: list[str]) -> Optional[int]:
    if not STEP_RE.fullmatch(step.strip()):
        ignored.append(f"step {_shown(step)} is not a whole number")
        return None
    try:
        main, partner = load_pair(example)
    except TraceError:
        return None
    trace = partner if run == "baseline" and partner is not None else main
    value = int(step.strip())
    if value > len(trace.steps):
        ignored.append(f"step {value} is past the end of this run ({plural(len(trace.steps), 'step')})")
        return None
    return value


def open_moment(params: Mapping[str, Any], directory: Optional[Path] = None) -> dict[str, Any]:
    """The app opened where a link points: the example, run and step it names, one line for what was ignored."""
    moment = read_moment(params, directory)
    if moment is None:
        return {}
    out = open_example(moment.label, RUNS[moment.run], moment.step, directory) if moment.label else {}
    if moment.ignored:
        line = "⚠ Part of this link was ignored: " + "; ".join(moment.ignored) + "."
        out["share_note"] = gr.Markdown(line, visible=True)
    return out


def link_params(request: gr.Request) -> dict[str, Any]:
    """Page load: the page's link parameters into the session's `moment` (their change opens it), bounded in
    length; nothing at all for a page opened without them, so the first screen never waits on this."""
    params = getattr(request, "query_params", None) or {}
    found = {k: str(_param(params, k))[: MAX_VALUE_CHARS + 1] for k in KEYS if _param(params, k) is not None}
    return {"moment": found} if found else {}


def page_load(state: Any, request: gr.Request) -> dict[str, Any]:
    """Page load: a link's moment (link_params; opening it sets the download too), else the download of the trace
    on screen. The download is set here rather than as the button's built-in value, which Gradio would publish in
    /config (a server path, to every visitor) and which would outlive a pruned file."""
    found = link_params(request)
    if found:
        return found
    trace = trace_from_state(state)
    return {"download": export_path(trace)} if trace is not None else {}


def open_link(moment: Any) -> dict[str, Any]:
    """The moment read from a link (link_params) opened: open_moment of the session's `moment`."""
    return open_moment(moment) if isinstance(moment, dict) else {}


def share_link(state: Any, run: Any, step: Any) -> dict[str, Any]:
    """The query string of the moment on screen (the browser turns it into a full link and copies it)."""
    trace = trace_from_state(state)
    name = state.get("name") if isinstance(state, dict) else None
    example = list_examples(examples_dir()).get(name) if isinstance(name, str) else None
    if trace is None or example is None:
        return {"share_link": gr.Textbox(visible=False),
                "share_status": "Links open the shipped examples only. To share this trace, make an HTML replay "
                                "(the button beside) or download the trace (JSON) from the panel below."}
    key = "baseline" if run == RUNS["baseline"] and example.baseline is not None else "s2d2"
    query = f"?example={example_slug(example)}&run={key}&step={clamp_step(trace, step)}"
    return {"share_link": gr.Textbox(value=query, visible=True), "share_status": ""}


def html_replay(state: Any, step: Any) -> dict[str, Any]:
    """Write the HTML replay of the session's trace, opened at the step on screen; show its download button. Its
    work is bounded (html_export.frame_bound), cached per trace content, and it stops at the next frame when the
    visitor's job is stopped (Stop, a closed tab, nobody listening: gpu_slot.stop_requested)."""
    trace = trace_from_state(state)
    if trace is None:
        return {"share_status": "No trace loaded: pick an example, upload a trace or record a run first."}
    start = clamp_step(trace, step)
    try:
        page = replay_html(trace, start, should_stop=gpu_slot.stop_requested)
        path = export_folder(trace) / f"{export_name(trace, 'replay')}-step{start}.html"
        if not path.exists() and not DISK.make_room(len(page.html.encode())):
            return {"html_file": gr.DownloadButton(visible=False),
                    "share_status": "⚠ The server's disk space for downloads is full: try again in a few minutes."}
        if not path.exists():
            path.write_text(page.html, encoding="utf-8")
    except (ExportError, OSError) as exc:
        return {"html_file": gr.DownloadButton(visible=False), "share_status": f"⚠ {md_text(exc, 300)}"}
    status = (f"HTML replay ready: one file, {page.size / 1000:.0f} kB, opens at step {start}; it needs no server "
              "or network (put it on a course page, or open it in a slide).")
    return {"html_file": gr.DownloadButton(f"⬇ Download the HTML replay ({page.size / 1000:.0f} kB)", value=str(path),
                                           visible=True),
            "share_status": status + (f" {md_text(page.note, 300)}" if page.note else "")}


# The export is CPU work one visitor can repeat: app.py wires it as that visitor's one job, like a decode (one at a
# time per session and per client, refused while a decode runs, stoppable).

def html_replay_refused(message: str) -> dict[str, Any]:
    """What an export that may not start shows (gpu_slot.one_job): the visitor already has a job."""
    return {"html_file": gr.DownloadButton(visible=False), "share_status": md_text(message, 300)}


html_replay_job = gpu_slot.one_job(html_replay, html_replay_refused)


def reset_share() -> dict[str, Any]:
    """A new trace on screen: the previous trace's link and replay file are gone."""
    return {"share_link": gr.Textbox(value="", visible=False), "html_file": gr.DownloadButton(value=None,
                                                                                               visible=False),
            "share_status": ""}
