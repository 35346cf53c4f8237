"""Issue 19, rows 10 and 15 in a real browser: text escaped by components/escape.py, shown by Gradio's own Markdown
renderer (GitHub-flavoured, with autolinks), renders as text: no element, no link, no request to the URL."""
from __future__ import annotations

import json
import socket

import pytest

from tests.support.browser_env import WAIT_MS, require_browser

require_browser()
pytestmark = pytest.mark.browser  # drives Chromium: left out by -m "not browser"


def test_escaped_file_text_renders_inert_in_gradio_markdown(browser, tmp_path):
    import gradio as gr
    from fixtures import trace_factory as tf

    from components.escape import md_text
    from components.views.story import single_story
    from components.files.traces import parse_text
    from tests.support.payloads import PAYLOAD

    data = tf.hostile().to_dict()
    data["footer"]["output_text"] = PAYLOAD
    headline = single_story(parse_text(json.dumps(data))).text
    with gr.Blocks() as demo:
        gr.Markdown(md_text(PAYLOAD, 1000), elem_id="md")
        gr.Markdown(headline, elem_id="headline")
        gr.Markdown("control: https://example.org/x", elem_id="control")  # unescaped: GFM does autolink it
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    demo.launch(prevent_thread_lock=True, server_port=port, quiet=True)
    try:
        page = browser.new_page()
        fetched: list[str] = []
        page.on("request", lambda r: fetched.append(r.url) if "evil" in r.url else None)
        page.goto(f"http://127.0.0.1:{port}/")
        page.wait_for_selector("#control a", timeout=WAIT_MS)  # the renderer autolinks plain text
        for box in ("#md", "#headline"):
            page.wait_for_selector(f"{box} p", timeout=WAIT_MS)
            for tag in ("a", "img", "form", "button", "h1", "svg", "script"):
                assert page.locator(f"{box} {tag}").count() == 0, (box, tag, page.inner_html(box)[:400])
        text = page.inner_text("#md")
        assert "<img src=https://evil.example/x.png>" in text and "http://evil.example/a" in text
        assert "www.evil.example" in text and "b@evil.example" in text
        assert "“<img src=https://evil.example/…”" in page.inner_text("#headline")  # quoted as text
        assert fetched == []
    finally:
        demo.close()
