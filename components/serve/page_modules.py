"""The ES modules the page imports: their folders, served as static files, and the browser code for their URLs.

Gradio serves only the paths given to `gr.set_static_paths`, so every folder of page modules, and each file the page
needs to decode in the browser (components/serve/browser_files.py: the exported models and the onnxruntime-web
runtime, listed file by file, never their folders), is listed here and served by one call (`serve`, before the app is
built). A module is imported by an event's browser code on first use (a dynamic import, cached by the browser).
"""
from __future__ import annotations

import sys
from pathlib import Path

import gradio as gr

from components.serve import browser_files, runtime_install

ROOT = Path(__file__).resolve().parents[1]  # components/
REPLAY_JS = ROOT / "replay" / "js"  # Replay's stepping (components/replay/browser_steps.py)
RUN_JS = ROOT / "run" / "js"  # the Run's place in the queue in words, decoding in the page (components/run/)
MODULE_DIRS = (REPLAY_JS, RUN_JS)
PAGE_DECODER = ROOT.parent / "s2d2_web"  # the page decoder's modules (never its node_modules/: listed file by file)


def decoder_modules(folder: Path = PAGE_DECODER) -> list[Path]:
    """Every ES module of the page decoder (s2d2_web/*.js and its subfolders), node_modules/ left out."""
    return sorted(p for p in folder.rglob("*.js") if "node_modules" not in p.relative_to(folder).parts)


_SAID: list[str] = []  # the browser-decoding lines, each printed once per process
_INSTALLING: list[object] = []  # the start-up install of the runtime, started at most once per process


def say(line: str) -> None:
    """Print a browser-decoding line on stderr, once per process."""
    if line not in _SAID:
        _SAID.append(line)
        print(line, file=sys.stderr)


def serve() -> browser_files.BrowserFiles:
    """Let Gradio serve the module folders and the browser-decoding files (and nothing else of the repository) at
    /gradio_api/file=...; says once on stderr whether in-browser decoding is available. Where the runtime is missing
    and the operator wants it installed at start (runtime_install.wanted: on a Space), its future paths are served
    too and `npm ci` starts in the background. Returns what was found."""
    found = browser_files.find()
    files = browser_files.static_files(found)
    if found.runtime is None and runtime_install.wanted():
        files += browser_files.runtime_paths()
        if not _INSTALLING:
            _INSTALLING.append(runtime_install.start(browser_files.RUNTIME_DIST.parents[2], installed))
            say("In-browser decoding is off until onnxruntime-web is installed (npm ci is running); runs decode on "
                "the server.")
    gr.set_static_paths(list(MODULE_DIRS) + decoder_modules() + files)
    if not _INSTALLING:
        say(found.line)
    return found


def installed(problem: str | None) -> None:
    """After the start-up install: pack the runtime's binary and say whether in-browser decoding is now on."""
    say(f"In-browser decoding is off: {problem}; runs decode on the server." if problem else browser_files.find().line)


def file_url(path: Path) -> str:
    """The URL of a served file, relative to the page (the page resolves it against document.baseURI)."""
    return f"gradio_api/file={path.as_posix()}"


def module_url(folder: Path, name: str) -> str:
    """Browser code for the URL of module `name` in `folder`, resolved against the page (a Space behind a proxy
    path too)."""
    return f"new URL('gradio_api/file={(folder / name).as_posix()}', document.baseURI).href"
