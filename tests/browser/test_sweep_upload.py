"""Issue 28 row 9: uploading a results file to the Sweep tab logs nothing in the browser console (Gradio's file
box opened an upload-progress stream whose close() warns "Method not implemented."; the tab's upload is a button,
as the Replay tab's is, which opens no such stream) and the verdict follows the file.

Skips when Playwright or /usr/bin/chromium is missing.
"""
from __future__ import annotations

import json
import os
import socket

import pytest

from tests.support.browser_env import DESKTOP, WAIT_MS, require_browser

require_browser()


def _results(path, s2d2_nfe: float):
    from s2d2.sweeps.grid import COLUMNS, add_speedups

    cells = add_speedups([
        {"name": "ar", "method": "ar", "accuracy": 0.8, "nfe_per_token": 1.0, "wall_per_token": 0.1, "n": 50},
        {"name": "dyn", "method": "dynamic", "accuracy": 0.8, "nfe_per_token": 0.5, "wall_per_token": 0.06, "n": 50},
        {"name": "mine", "method": "s2d2", "accuracy": 0.8, "nfe_per_token": s2d2_nfe, "wall_per_token": 0.07,
         "n": 50},
    ])
    path.write_text(json.dumps({"version": 1, "meta": {"model": "t", "task": "arithmetic", "n": 50},
                                "cells": [{k: c.get(k) for k in COLUMNS} | c for c in cells]}))
    return path


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    import gradio as gr

    from components.sweep import panel as sw

    os.environ["GRADIO_TEMP_DIR"] = str(tmp_path_factory.mktemp("gradio"))
    shipped = _results(tmp_path_factory.mktemp("results") / "sweep.json", 0.6)
    with gr.Blocks() as demo:
        sw.build_sweep_tab(sweeps={"shipped": shipped})
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    demo.launch(prevent_thread_lock=True, server_port=port, quiet=True)
    yield f"http://127.0.0.1:{port}/"
    demo.close()


def test_a_sweep_upload_logs_nothing_in_the_console(browser, url, tmp_path):
    pg = browser.new_page(viewport=DESKTOP)
    logged: list[str] = []
    pg.on("console", lambda m: logged.append(f"{m.type}: {m.text}") if m.type in ("warning", "error") else None)
    pg.on("pageerror", lambda e: logged.append(f"pageerror: {e}"))
    pg.goto(url)
    pg.wait_for_function("document.querySelector('#sweep-status')?.innerText.includes('does not win')",
                         timeout=WAIT_MS)
    with pg.expect_file_chooser() as fc:
        pg.locator("#sweep-upload").click()
    fc.value.set_files(str(_results(tmp_path / "results.json", 0.4)))
    pg.wait_for_function("document.querySelector('#sweep-status')?.innerText.includes('S2D2 wins')",
                         timeout=WAIT_MS)
    assert "uploaded file" in pg.locator("#sweep-status").inner_text()
    pg.wait_for_function("document.querySelectorAll('#sweep-nfe .js-plotly-plot').length >= 1", timeout=WAIT_MS)
    assert not logged, logged
