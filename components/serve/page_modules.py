"""The ES modules the page imports: their folders, served as static files, and the browser code for their URLs.

Gradio serves only the folders given to `gr.set_static_paths`, and each call replaces the last, so every folder of
page modules is listed here and served by one call (`serve`, before the app is built). A module is imported by an
event's browser code on first use (a dynamic import, cached by the browser).
"""
from __future__ import annotations

from pathlib import Path

import gradio as gr

ROOT = Path(__file__).resolve().parents[1]  # components/
REPLAY_JS = ROOT / "replay" / "js"  # Replay's stepping (components/replay/browser_steps.py)
RUN_JS = ROOT / "run" / "js"  # the Run's place in the queue, in words (components/run/wait_line.py)
MODULE_DIRS = (REPLAY_JS, RUN_JS)


def serve() -> None:
    """Let Gradio serve the module folders (and nothing else of the repository) at /gradio_api/file=..."""
    gr.set_static_paths(list(MODULE_DIRS))


def module_url(folder: Path, name: str) -> str:
    """Browser code for the URL of module `name` in `folder`, resolved against the page (a Space behind a proxy
    path too)."""
    return f"new URL('gradio_api/file={(folder / name).as_posix()}', document.baseURI).href"
