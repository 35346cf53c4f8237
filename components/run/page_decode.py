"""Decode in my browser: the Run tab's choice to decode a bundled model in the visitor's page.

A Run with "Decode in my browser" ticked asks the server for a plan (`plan`): the prompt checked and tokenized, the
settings checked as for a server Run, and the URLs of the exported model and the runtime. The page then decodes in a
Web Worker (components/run/js/page_run.js, s2d2_web/worker.js), streams the tokens into the Run's live output as
blocks commit, and hands the finished (or stopped) trace back in one event (`receive`), which reads it exactly as an
uploaded trace (components/files/traces.parse_text: size, schema, bounds, the records' rules) before it becomes the
session's trace, opened in Replay like a server run.

The page decodes only what it reproduces (`page_problem`: a bundled export; the block loop, honest AR or the LLaDA2
editing loop on a position-aligned model; a policy that does not route by this machine's timings); anything else runs
on the server, with one line saying why (`where_line`). Its random draws come from the shared counter stream (rng="counter",
docs/random-stream.md), as do the server's decodes of the same models (components/run/random_stream.py), so where
a Run decodes never changes its answer.
"""
from __future__ import annotations

import json
from typing import Any, Optional

from s2d2 import __version__
from s2d2.api import check_fits, encode_prompt
from s2d2.config import DecodeConfig
from s2d2.limits import limits
from s2d2.trace import Trace

from components.escape import md_text
from components.files.traces import TraceError, make_state, parse_upload
from components.run.config_check import check_prompt, config_from_inputs
from components.run.handlers import IN_REPLAY, before_replay
from components.run.random_stream import app_config
from components.serve import browser_files
from components.serve.model_pool import check_model, get_model
from components.serve.page_modules import PAGE_DECODER, RUN_JS, file_url, module_url
from components.views.canvas import live_rows, render_live
from components.views.plural import plural
from components.views.token_state import AFTER_END, PAST_LENGTH, STATES

SERVER_POLICIES = ("cost_aware",)  # routes by this machine's own timings
ON_SERVER = "Decoded on the server: {why}."


# Browser code of the Run's events. Before Run: the prompt capped as ui.within_js does, the status saying at once that
# the run is on its way (components/run/js/status_line.js: a queued Run otherwise showed the last status for
# seconds), and what the page lacks to decode (its 4th input). The hand-off: the page decodes the plan and sends the
# trace text instead. Stop: the page's decode stops too.
def before_run_js(cap: int) -> str:
    """The Run's browser code before it is sent (see above)."""
    return f"""async (...args) => {{
  if (typeof args[0] === 'string' && args[0].length > {cap}) args[0] = args[0].slice(0, {cap + 1});
  try {{ (await import({module_url(RUN_JS, 'status_line.js')})).recordPressed(document); }} catch (e) {{}}
  try {{ args[3] = (await import({module_url(RUN_JS, 'page_run.js')})).pageAbility(); }}
  catch (e) {{ args[3] = 'the page could not load its decoder'; }}
  return args;
}}"""


DECODE_JS = f"""async (planText, file) => {{
  const m = await import({module_url(RUN_JS, 'page_run.js')});
  return await m.handOff(planText);
}}"""
STOP_JS = f"""async () => {{
  const m = await import({module_url(RUN_JS, 'page_run.js')});
  m.stop();
}}"""


_FOUND: list[browser_files.BrowserFiles] = []


def offered() -> browser_files.BrowserFiles:
    """What this server lets the page fetch (the exports and the runtime), found once the runtime is there (until
    then, looked for again at each Run: on a Space it is installed in the background at start)."""
    if not _FOUND or _FOUND[0].runtime is None:
        _FOUND[:] = [browser_files.find()]
    return _FOUND[0]


def page_problem(cfg: DecodeConfig, alignment: str) -> Optional[str]:
    """Why the page decoder (s2d2_web/decoding/api.js `unsupported`) cannot decode `cfg`, or None."""
    if alignment != "aligned":
        return "the page decodes position-aligned models only"
    if cfg.loop not in ("block", "editing", "pipeline"):
        return f"the page does not decode the {cfg.loop} loop (it runs the block, editing and pipeline loops, and AR)"
    if cfg.method == "ar" and cfg.ar_accounting != "fused":
        return "the page decodes AR with the fused accounting only"
    if cfg.method == "s2d2" and cfg.policy in SERVER_POLICIES:
        return f"the {cfg.policy} policy routes with this server's own measurements"
    return None


def model_urls(name: str, found: browser_files.BrowserFiles) -> dict[str, str]:
    """The page-relative URLs of model `name`'s manifest, tokenizer and packed graph, and of the packed runtime."""
    files = {p.name: p for p in found.models[name]}
    runtime = {p.name: p for p in found.runtime or []}
    return {"manifest": file_url(files["manifest.json"]), "tokenizer": file_url(files["tokenizer.json"]),
            "model_gz": file_url(files["model.onnx.gz"]), "runtime": file_url(runtime["ort.wasm.min.mjs"]),
            "wasm_gz": file_url(runtime["ort-wasm-simd-threaded.wasm.gz"]),
            "worker": file_url(PAGE_DECODER / "worker.js")}


def export_dtype(name: str, found: browser_files.BrowserFiles) -> str:
    """What model `name`'s export computes in (its manifest's graph.compute_dtype)."""
    manifest = next(p for p in found.models[name] if p.name == "manifest.json")
    return str(json.loads(manifest.read_text(encoding="utf-8"))["graph"]["compute_dtype"])


def where_line(in_page: bool, dtype: str = "", why: str = "") -> str:
    """The one line under Run saying where this Run decodes and, on the server, why. (Which random stream it draws
    from is said beside the Seed: the same wherever it decodes, components/run/random_stream.py.)"""
    if not in_page:
        return ON_SERVER.format(why=why)
    return (f"This Run decodes in your browser ({browser_files.RUNTIME} {browser_files.pinned_version()}, {dtype}, "
            "in a background worker); the server only checks the finished trace.")


def plan(prompt: Any, model_name: Any, page_can: Any, *knobs: Any) -> tuple[Optional[dict[str, Any]], str]:
    """(the page's plan, its line) when the page can decode this Run; (None, why it runs on the server) otherwise.
    Bad input is not judged here: the server Run refuses it with its own one line."""
    if check_prompt(prompt) or check_model(model_name):
        return None, ""
    cfg, seed, error = config_from_inputs(*knobs)
    if error or cfg is None:
        return None, ""
    found = offered()
    if isinstance(page_can, str) and page_can.strip():
        return None, ON_SERVER.format(why=md_text(page_can, 120))
    if found.runtime is None:
        return None, ON_SERVER.format(why="this server does not offer the browser runtime")
    if model_name not in found.models:
        return None, ON_SERVER.format(why=f"{md_text(model_name, 80)} has no in-browser export (only "
                                      f"{', '.join(found.models)} do)")
    model = get_model(model_name)
    why = page_problem(cfg, model.spec.alignment)
    if why:
        return None, ON_SERVER.format(why=why)
    run_cfg = app_config(cfg, model_name)  # the counter stream, as the server's Run of this model
    try:
        ids, text = encode_prompt(model, prompt)
        check_fits(model, run_cfg, len(ids))
    except ValueError:
        return None, ""  # the server Run says what is wrong with it
    spec = model.spec
    dtype = export_dtype(model_name, found)
    page_plan = {"model": model_name, "config": run_cfg.to_dict(), "seed": seed, "prompt_ids": ids,
                 "prompt_text": text, "library_version": __version__, "files": model_urls(model_name, found),
                 "runtime_version": browser_files.pinned_version(), "dtype": dtype,
                 "handoff_bytes": limits().max_upload_bytes,
                 "live": {"states": {k: list(v) for k, v in STATES.items()}, "after_end": AFTER_END,
                          "past_length": PAST_LENGTH, "stop_ids": list(spec.stop_ids),
                          "keep": len(ids) + run_cfg.gen_length}}
    return page_plan, where_line(True, dtype)


def refused(line: str) -> dict[str, Any]:
    """The Run's views after a hand-off the server refuses: one line, nothing kept, the live view cleared."""
    return {"run_status": f"⚠ {line} Nothing was kept.", "live": render_live([]), "output": "", "run_ok": False,
            "run_final": {"run_status": f"⚠ {line} Nothing was kept.", "output": "", "strip": "empty"}}


def receive(note: Any, file: Any) -> dict[str, Any]:
    """The trace the page decoded, uploaded as a file and read exactly as an uploaded trace is (size, schema,
    bounds, rules), then required to say it was decoded in the browser; the session's trace when it holds, else
    one line. `note` is the page's own word when it has no trace (an error, a Stop before loading); nothing at all
    (a Run the server decoded) changes nothing."""
    path = getattr(file, "name", file)
    if isinstance(path, str) and path:
        try:
            trace = parse_upload(path)
        except TraceError as exc:
            return refused(f"The trace your page sent was refused: {md_text(exc, 300)}")
        d = trace.header.decoded_in
        if d is None or d.where != "browser":
            return refused("The trace your page sent was refused: it does not say it was decoded in the browser.")
        return finished(trace)
    if not isinstance(note, str) or not note.startswith("{"):
        return {}
    try:
        said = json.loads(note)
    except ValueError:
        said = {}
    said = said if isinstance(said, dict) else {}
    line = not_handed(said)
    if line is not None:
        return refused(line)
    if said.get("page_stopped") is True:
        status = "■ Stopped before the model was loaded in your browser: nothing to replay."
        return {"run_status": status, "live": render_live([]), "output": "", "run_ok": False,
                "run_final": {"run_status": status, "output": "", "strip": "empty"}}
    why = said.get("page_error")
    why = md_text(why if isinstance(why, str) else "no reason given", 200)
    return refused(f"Your browser could not decode this run ({why}). Untick **Decode in my browser** to decode on "
                   "the server.")


def not_handed(said: dict[str, Any]) -> Optional[str]:
    """The line for a page that decoded the run but could not hand its trace over (page_run.js `handOff`): too large
    for the server, or its upload refused (a busy server); None for any other note. Untrusted: only plain numbers
    from it are shown."""
    if "page_too_big" in said:
        return too_big_line(said.get("page_too_big"), said.get("limit"))
    if "page_upload_refused" in said:
        code = said["page_upload_refused"]
        http = f" (HTTP {code})" if isinstance(code, int) and not isinstance(code, bool) and 100 <= code <= 599 else ""
        return (f"Your browser decoded this run, but the server did not take its trace{http}. Press Run again in a "
                "moment, or untick **Decode in my browser** to decode on the server.")
    return None


def too_big_line(size: Any, limit: Any) -> str:
    """The line for a page whose finished trace is more than the server takes (the page sent nothing): the sizes as
    the page measured them when they are plain byte counts, and what to do instead."""
    def shown(n: Any) -> Optional[str]:  # in the units of S2D2_MAX_UPLOAD_MB (MB = 2^20 bytes, kB = 2^10)
        if not isinstance(n, int) or isinstance(n, bool) or not 0 < n < 1 << 50:
            return None
        return f"{n / 2 ** 20:.1f} MB" if n >= 2 ** 20 else f"{max(1, round(n / 2 ** 10))} kB"

    sizes = (f" ({shown(size)}, more than the {shown(limit)} the server takes)" if shown(size) and shown(limit)
             else "")
    return (f"Your browser decoded this run, but its trace is too large to hand to the server{sizes}. Untick "
            "**Decode in my browser** to decode it on the server, or shorten the **Generation length**.")


def finished(trace: Trace) -> dict[str, Any]:
    """The Run tab's status, live strip and answer for a page-decoded trace, and the session's trace."""
    footer = trace.footer
    reason = footer.finish_reason if footer else ""
    size = f"{plural(len(trace.steps), 'step')}, {plural(len(trace.forwards), 'forward')}"
    keep = len(trace.header.prompt_ids) + trace.header.gen_length
    live = render_live(live_rows(trace.steps), stop_ids=trace.header.model.stop_ids, keep=keep)
    if reason == "cancelled" and not trace.blocks:
        status = f"■ Stopped before the first block was complete ({size}): nothing to replay."
        return {"run_status": status, "live": render_live([]), "output": "", "run_ok": False,
                "run_final": {"run_status": status, "output": "", "strip": "empty"}}
    if reason == "cancelled":
        status = f"■ Stopped in your browser — partial trace kept ({size}). {IN_REPLAY}"
    else:
        wall = footer.wall_s if footer else 0.0
        # the decode's own time: the page's running clock also counted the queue and loading the model (walk: "Done
        # in 10.1 s" beside a clock at 48 s read as a contradiction)
        status = (f"✓ Done in your browser: decoding took {wall:.1f} s ({size}; loading the model is not counted). "
                  f"The server checked the trace. {IN_REPLAY}")
    output = footer.output_text if footer else ""
    final = {"run_status": status, "output": output, "strip": "trace"}
    return before_replay({"run_status": status, "live": live, "output": output, "state": make_state(trace, "run"),
                          "run_ok": True, "run_final": final})
