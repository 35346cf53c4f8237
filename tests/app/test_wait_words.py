"""The Run's place in the queue in words (components/run/js/wait_words.js, issue 35 item 5): Gradio's progress text
under the Run button becomes a sentence saying how many runs are ahead and about how long, under Node."""
from __future__ import annotations

import re
from pathlib import Path

import gradio
import pytest

from components.serve.page_modules import MODULE_DIRS, RUN_JS
from components.run.wait_line import WATCH_JS
from tests.support.node_runner import run_module

pytestmark = pytest.mark.slow  # a Node process

CASES = [
    ("queue: 3/3 | 1.2/5.0s", "2 runs are ahead of yours in line: about 4 s to go."),
    ("queue: 2/5 | 0.4/3.1s", "1 run is ahead of yours in line: about 3 s to go."),
    ("queue: 1/4 | 0.2/0.9s", "Your run is next in line for a free place: about 1 s to go."),
    ("queue: 4/9 | 12.0s", "3 runs are ahead of yours in line."),  # no estimate yet: no time promised
    ("queue: 2/2 | 9.0/6.0s", "1 run is ahead of yours in line."),  # past its estimate: no time promised
    ("processing | 2.0s", None),
    ("", None),
]


def test_gradio_progress_text_becomes_a_sentence_of_runs_ahead_and_time():
    texts = [text for text, _ in CASES]
    got = run_module(RUN_JS / "wait_words.js", "output = input.map((t) => m.waitWords(t));", texts)
    for (text, want), line in zip(CASES, got):
        if want is None:
            assert line is None, text
        else:
            assert line.startswith(want) and "Stop" in line, (text, line)


def test_the_words_read_the_format_this_gradio_writes():
    """Bound to the installed Gradio: its status tracker writes 'queue: P/N |' then the seconds, which the module
    parses; a Gradio that words it otherwise fails here, not silently in the page."""
    trackers = list((Path(gradio.__file__).parent / "templates").rglob("statustracker*.js"))
    assert trackers, "Gradio's status tracker bundle not found"
    source = "".join(path.read_text(errors="replace") for path in trackers)
    assert re.search(r"queue: \$\{[^}]*\+1\)\}/\$\{", source), "Gradio's queue line changed"


def test_the_page_imports_the_module_from_a_served_folder():
    assert RUN_JS in MODULE_DIRS and "wait_words.js" in WATCH_JS and "m.watch(document)" in WATCH_JS
