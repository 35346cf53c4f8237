"""The Replay tab's "Share this moment" row: copy a link to the step on screen, or make a one-file HTML replay.

Layout only (components registered in the Ctx by name); app.py wires the events to components/share.py.
"""
from __future__ import annotations

import gradio as gr

from .ui import Ctx

# The server returns the moment's query string; the browser makes it a full link to this page and copies it. The
# clipboard needs a secure context (https or localhost): elsewhere the link is still shown, with a copy button.
COPY_JS = """
(query) => {
  if (typeof query !== 'string' || query[0] !== '?') { return query; }
  const link = window.location.origin + window.location.pathname + query;
  try { navigator.clipboard.writeText(link).catch(() => {}); } catch (e) { /* no clipboard here */ }
  return link;
}
"""


def build_share_note(ctx: Ctx) -> None:
    """The line under the headline that says what part of an opened link was ignored (hidden otherwise)."""
    ctx["share_note"] = gr.Markdown("", visible=False, elem_id="share-note")


def build_share_row(ctx: Ctx) -> None:
    with gr.Group(elem_id="share"):
        with gr.Row(elem_id="share-row", equal_height=True):
            ctx["share"] = gr.Button("🔗 Copy link to this moment", size="sm", elem_id="share-btn", scale=1,
                                     min_width=200)
            ctx["make_html"] = gr.Button("🖼 Make an HTML replay (one file, works offline)", size="sm",
                                         elem_id="make-html", scale=1, min_width=200)
            ctx["html_file"] = gr.DownloadButton("⬇ Download the HTML replay", visible=False, size="sm",
                                                 elem_id="html-file", scale=1, min_width=200)
        ctx["share_link"] = gr.Textbox("", label="Link to this moment (copied to the clipboard)", visible=False,
                                       interactive=False, buttons=["copy"], elem_id="share-link")
        ctx["share_status"] = gr.Markdown("", elem_id="share-status")
