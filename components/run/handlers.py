"""The Run tab's handlers: knobs shown for the chosen method and preset, and Record as the session's one job,
streaming status and the live canvas; the finished (or stopped) run becomes the session's trace, which the Replay
tab then shows. Gradio values in, {component name: value} out, as components/replay/handlers.py."""
from __future__ import annotations

from typing import Any, Iterator

import gradio as gr

from s2d2.limits import SEED_MAX
from s2d2.trace import Trace

from components.escape import md_text
from components.files.traces import make_state, trace_from_state
from components.run.config_check import KNOB_BY_NAME, check_prompt, config_dict, config_from_inputs, setting_problem
from components.run.knobs import KNOB_NAMES, KNOBS, knob_info, preset_for_model, preset_values
from components.run.random_stream import app_config
from components.run.zerogpu import record
from components.serve.model_pool import allowed_models, check_model, on_gpu
from components.views.prompt_scope import real_checkpoints, scope_note
from components.run.knob_scope import is_main, shown
from components.serve.gpu_slot import stop_requested
from components.serve.input_numbers import as_int
from components.views.canvas import live_rows, render_live
from components.views.story import rounding_note
from components.views.plural import plural

RUN_OUT = ["run_status", "live", "output", "state", "run_ok", "run_final"]
FINAL_OUT = ["run_status", "output", "live"]  # what final_views writes again when Replay opens
KNOB_OUT = [f"knob_{name}" for name in KNOB_NAMES]
NOTES_OUT = [*KNOB_OUT, "advanced"]
FIELD_ERROR = "field-error"  # the class of a knob whose value Record refused (components/theme.py colours its line)
MAX_LATE_PROGRESS = 3  # progress events tolerated after Stop before the run is abandoned without a trace
# A kept run's status ends with IN_REPLAY only in the update that opens Replay (final_views, with the tab switch);
# the run's own last update, which reaches the page before that one (seconds before, on a busy server), says TO_REPLAY.
IN_REPLAY = "The Replay tab now shows this run."
TO_REPLAY = "Opening it in the Replay tab…"


def knob_visibility(method: str, policy: str, remasking: str, loop: str = "block") -> dict[str, Any]:
    """Show the knobs of the chosen method, policy, remasking rule and block loop; hide the others."""
    return {f"knob_{k}": gr.update(visible=shown(k, method, policy, remasking, loop)) for k in KNOB_NAMES}


PRESET_OUT = ["preset_note", "preset_drift"]  # what a preset's knobs change besides the knobs


def apply_preset(name: str, seed: Any = 0) -> dict[str, Any]:
    """Every knob set from a preset (the seed kept), the knobs that matter shown."""
    from components.views.describe import preset_note

    kept = 0 if seed is None else as_int(seed)
    valid_seed = kept is not None and 0 <= kept <= SEED_MAX
    try:
        values = dict(zip(KNOB_NAMES, preset_values(str(name)[:100], kept if valid_seed else 0)))
    except (ValueError, TypeError):
        return {}
    if not valid_seed:  # an out-of-range seed stays in its box (Run says why); it is never echoed back
        del values["seed"]
    shown_now = knob_visibility(values["method"], values["policy"], values["remasking"], values["loop"])
    return {**{f"knob_{k}": gr.update(value=v, visible=shown_now[f"knob_{k}"]["visible"]) for k, v in values.items()},
            "preset_note": preset_note(name), "preset_drift": ""}  # (every knob is the preset's again)


def model_changed(model_name: str, loop: str, seed: Any = 0) -> dict[str, Any]:
    """A model that edits (LLaDA2.x) opens on its family's preset, another model leaves the editing loop for the
    default preset; nothing changes when the loop already fits the model."""
    name = preset_for_model(model_name, loop)
    if name is None:
        return {}
    return {"preset": name, **apply_preset(name, seed)}


def prompt_scope(prompt: Any, model_name: Any) -> dict[str, Any]:
    """The line under the prompt box: empty for a prompt the chosen model knows, else what it knows and prompts
    that fit (and, on a machine with a GPU, the real checkpoints on the allow-list)."""
    return {"prompt_scope": _scope(prompt, model_name)}


def _scope(prompt: Any, model_name: Any) -> str:
    return scope_note(prompt, model_name, real_checkpoints(allowed_models(), on_gpu()))


def setting_notes(*knobs: Any) -> dict[str, Any]:
    """What Record's click shows beside the knobs, before the run starts: every knob's help line as it was, except
    the one whose value the run refuses, whose line says why (shown, and Advanced opened when it is there). The
    run's status says the same and where to look (`where`)."""
    name, message = setting_problem(*knobs)
    out: dict[str, Any] = {f"knob_{k.name}": gr.update(info=knob_info(k), elem_classes=[]) for k in KNOBS}
    if name is not None and message is not None:
        said = message.split(":", 1)[1].strip()
        out[f"knob_{name}"] = gr.update(info=f"⚠ {said[:1].upper()}{said[1:]}. Nothing was run.",
                                        elem_classes=[FIELD_ERROR], visible=True)
        if not is_main(name):
            out["advanced"] = gr.update(open=True)
    return out


def where(message: str) -> str:
    """Where the page shows a refused setting's message, as a clause for the status line: " (beside the **Seed**
    field, under Advanced)"; "" for a message about no one knob."""
    knob = KNOB_BY_NAME.get(message.removeprefix("Invalid setting — ").split(":", 1)[0].strip())
    if knob is None:
        return ""
    return f" (beside the **{knob.label}** field{'' if is_main(knob.name) else ', under Advanced'})"


def run_refused(message: str) -> dict[str, Any]:
    """What a Run that may not start shows (guard.one_job): the session runs another job, or Stop withdrew it."""
    return last({"run_status": message, "run_ok": False})


def last(out: dict[str, Any]) -> dict[str, Any]:
    """A run's final update, with the record of it that final_views writes again ("run_final", a session State):
    its status and answer as they are, and its token strip as "trace" (drawn again from the session's trace) or
    "empty". Small: the strip is never stored twice."""
    final = {k: out[k] for k in ("run_status", "output") if k in out}
    if "state" in out or "live" in out:
        final["strip"] = "trace" if "state" in out else "empty"
    return before_replay({**out, "run_final": final})


def before_replay(out: dict[str, Any]) -> dict[str, Any]:
    """A run's last update as it is streamed: its status says Replay is opening (TO_REPLAY), never yet that Replay
    shows the run; its record for final_views keeps IN_REPLAY, written with the tab switch, when it is true."""
    status = out.get("run_status")
    if isinstance(status, str) and IN_REPLAY in status:
        return {**out, "run_status": status.replace(IN_REPLAY, TO_REPLAY)}
    return out


def final_views(state: Any, ok: Any, final: Any) -> dict[str, Any]:
    """The Run tab's final status, answer and token strip, written again by the event that opens Replay after a
    run (app.py). Gradio runs a chained `.then` even when the run's own event ended without its last message
    reaching the page (a stream cut under load ends it as failed, while the server finished the run and stored its
    trace): Replay then opened on the run while the Run tab still said "Decoding…" with no answer. With this, the
    update that opens Replay carries the run's final views too, so they are never lost. {} before any run."""
    if not isinstance(final, dict):
        return {}
    out = {k: final[k] for k in ("run_status", "output") if isinstance(final.get(k), str)}
    trace = trace_from_state(state) if ok is True and final.get("strip") == "trace" else None
    if trace is not None:
        out["live"] = live_strip(trace)
    elif final.get("strip") in ("trace", "empty"):
        out["live"] = render_live([])
    return out


def run(prompt: str, model_name: str, *knobs: Any) -> Iterator[dict[str, Any]]:
    """Record a run as the session's one job (guard.one_job), streaming status and the live canvas. The session's
    trace changes only when a trace arrives: complete, or partial after Stop or the time limit. The run is the only
    writer of its status: Stop raises the job's flag, the decode ends within one forward, and the last line says
    what was kept."""
    problem = check_prompt(prompt) or check_model(model_name)
    cfg, seed, error = config_from_inputs(*knobs)
    if problem or error:  # the live view and output of an earlier run are not this run's answer: cleared
        said = problem or f"{(error or '').rstrip('.')}{where(error or '')}."
        yield last({"run_status": f"⚠ {said} Nothing was run.", "live": render_live([]), "output": "",
                    "run_ok": False})
        return
    assert cfg is not None
    yield {"run_status": "Loading the model and starting…", "live": render_live([]), "output": "", "run_ok": False,
           "run_final": None}  # an earlier run's final views are not this run's
    # The bundled models draw from the counter stream, as the page does (components/run/random_stream.py).
    events = record(prompt, model_name, config_dict(app_config(cfg, model_name)), seed)
    late = 0
    try:
        for event in events:
            if event["kind"] == "progress":
                stopping = stop_requested()
                late += stopping
                if late > MAX_LATE_PROGRESS:  # a worker that cannot see the flag (another process): abandon it
                    yield last({"run_status": "■ Stopped — the decoding worker ended without a partial trace.",
                                "run_ok": False})
                    return
                status = "Stopping…" if stopping else event.get("status") or progress_line(event)
                yield {"run_status": status, "live": render_live(event["commits"], stop_ids=event.get("stop_ids", ()),
                                                                 keep=event.get("keep"))}
            elif event["kind"] == "error":
                yield last({"run_status": f"⚠ {event['message']}", "run_ok": False})
                return
            elif event["kind"] == "stopped":  # withdrawn from the shared batch's queue: nothing ran
                yield last({"run_status": event["message"], "live": render_live([]), "run_ok": False})
                return
            elif event["kind"] == "done":
                done = _finished(event)
                note = _scope(prompt, model_name)
                if note and done["run_ok"]:  # the result says what the model knows, next to its answer
                    done["run_status"] += f"\n\n{note}"
                yield last(done)
                return
    finally:
        events.close()


def progress_line(event: dict[str, Any]) -> str:
    """The status while a run decodes: its steps and commits, and, in a shared batch, its place in the queue or
    how many others it decodes with."""
    if event.get("queued"):
        return (f"◷ Waiting to start in the shared batch: position {event['queued']} ({event['elapsed']:.1f} s). "
                "Stop withdraws it.")
    others = event.get("together") or 0
    together = f", decoding together with {others} other{'s' if others != 1 else ''}" if others else ""
    return (f"Decoding… {plural(event['steps'], 'step')}, "
            f"{plural(len(event['commits']), 'token')} committed ({event['elapsed']:.1f} s"
            f"{together}). Stop keeps the partial trace.")


def live_strip(trace: Trace) -> str:
    """A finished run's token strip: every decided position, greyed after the stop token and past the generation
    length (the answer is cut there: s2d2/output.py)."""
    keep = len(trace.header.prompt_ids) + trace.header.gen_length
    return render_live(live_rows(trace.steps), stop_ids=trace.header.model.stop_ids, keep=keep)


def _finished(event: dict[str, Any]) -> dict[str, Any]:
    try:
        trace = Trace.from_dict(event["trace"])
    except ValueError as exc:  # a run outside the limits in force (they changed, or a bug): no traceback
        return {"run_status": f"⚠ The run finished but its trace is refused: {md_text(exc, 300)}", "run_ok": False}
    reason = trace.footer.finish_reason if trace.footer else ""
    size = f"{plural(len(trace.steps), 'step')}, {plural(len(trace.forwards), 'forward')}"
    if reason == "cancelled" and not trace.blocks:
        return {"run_status": f"■ Stopped before the first block was complete ({size}): nothing to replay.",
                "live": render_live([]), "run_ok": False}
    if reason == "cancelled":
        status = f"■ Stopped — partial trace kept ({size}). {IN_REPLAY}"
    elif reason == "time_limit":
        status = f"■ Stopped at the time limit — partial trace kept ({size}). {IN_REPLAY}"
    else:
        status = f"✓ Done in {event['elapsed']:.1f} s: {size}{rounding_note(trace)}. {IN_REPLAY}"
    return {"run_status": status, "live": live_strip(trace),
            "output": event.get("text", ""), "state": make_state(trace, "run"), "run_ok": True}
