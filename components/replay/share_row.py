"""The Replay tab's "Share this moment" row: copy a link to the step on screen, or make a one-file HTML replay.

Layout only (components registered in the Ctx by name); app.py wires the events to components/replay/share_links.py.
"""
from __future__ import annotations

import gradio as gr

from components.ui import Ctx

# The server returns the moment's query string; the browser makes it a full link to this page, copies it, and says
# whether the copy worked (the clipboard needs a secure context, https or localhost, and the page's permission).
COPY_JS = """
async (query, status) => {
  if (typeof query !== 'string' || query[0] !== '?') { return [query, status]; }
  const link = window.location.origin + window.location.pathname + query;
  try {
    await navigator.clipboard.writeText(link);
    return [link, 'Copied to the clipboard: paste it anywhere to open the app at this moment.'];
  } catch (e) {
    return [link, 'This browser did not allow copying: select the link in the box, or use its copy button.'];
  }
}
"""
COPY_LABEL = "Copy link to this moment"
MAKE_LABEL = "Make an HTML replay (one file, works offline)"


def build_share_note(ctx: Ctx) -> None:
    """The line under the headline that says what part of an opened link was ignored (hidden otherwise)."""
    ctx["share_note"] = gr.Markdown("", visible=False, elem_id="share-note")
    ctx["moment"] = gr.State(None)  # the link parameters read on load (components/replay/share_links.py link_params)


def build_share_row(ctx: Ctx) -> None:
    """Copy a link to the moment on screen; make, then download, the HTML replay of the trace on screen."""
    with gr.Group():
        with gr.Row(elem_id="share-row", equal_height=True):
            ctx["share"] = gr.Button(COPY_LABEL, size="sm", elem_id="share-btn", scale=1, min_width=200)
            ctx["make_html"] = gr.Button(MAKE_LABEL, size="sm", elem_id="make-html", scale=1, min_width=200)
            ctx["html_file"] = gr.DownloadButton("⬇ Download the HTML replay", visible=False, size="sm",
                                                 elem_id="html-file", scale=1, min_width=200)
        ctx["share_link"] = gr.Textbox("", label="Link to this moment", visible=False,
                                       interactive=False, buttons=["copy"], elem_id="share-link")
        ctx["share_status"] = gr.Markdown("", elem_id="share-status")
