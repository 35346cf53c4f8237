"""The line under the Run button while a Run waits for a free place: Gradio's own progress text there ("queue: 3/3 |
1.2/5.0s") is put into words in the page by components/run/js/wait_words.js ("2 runs are ahead of yours in line:
about 4 s to go. ..."). Browser code only: the page load installs it, and nothing reaches the server."""
from __future__ import annotations

from components.serve.page_modules import RUN_JS, module_url

# A JS-only load event: watch the page for the wait line (the Run tab may mount it later).
WATCH_JS = f"""async () => {{
  const m = await import({module_url(RUN_JS, 'wait_words.js')});
  m.watch(document);
}}"""
