"""Reading an exported HTML replay back (what its script does, in Python), and a trace full of hostile strings."""
from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from typing import Any

from fixtures import trace_factory as tf

from s2d2.trace import Trace

DATA_RE = re.compile(r'<script type="application/json" id="s2d2-data">(.*?)</script>', re.S)
TOKEN_RE = re.compile(r'<span class="([^"]*)"[^>]*? data-pos="(\d+)"')
# Strings that break out of a script block, an attribute or a comment, run code, or are not valid UTF-8. Thirteen
# of them, so the factory's token picker (position * 7 mod the word count) uses every one.
HOSTILE = ["</script><img src=x onerror=window.__pwned=1>", "<svg onload=window.__pwned=1>", "<!--", "-->",
           "\u2028", "\u2029", "\ud800", "\" onmouseover=\"window.__pwned=1", "</SCRIPT >", "&lt;b&gt;",
           "<script>window.__pwned=1</script>", "`**x**`", "\u202e evil"]


def page_data(page: str) -> dict[str, Any]:
    return json.loads(DATA_RE.search(page).group(1))


def join(pieces: list[str], ids: list[int]) -> str:
    """The page script's join: fragment ids, a negative -k continuing the previous id with its k successors."""
    out, prev = [], 0
    for x in ids:
        if x >= 0:
            out.append(pieces[x])
            prev = x
            continue
        out += [pieces[prev + j] for j in range(1, -x + 1)]
        prev -= x
    return "".join(out)


def frames_of(page: str) -> list[tuple[str, str, str]]:
    """(canvas HTML, strip HTML, summary) of every frame in the page."""
    data = page_data(page)
    return [(join(data["pieces"], f[0]), join(data["pieces"], f[1]), f[2]) for f in data["frames"]]


def token_classes(canvas_html: str) -> list[tuple[int, str]]:
    """(position, class list) of every token of a canvas, in order."""
    return [(int(pos), cls) for cls, pos in TOKEN_RE.findall(canvas_html)]


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []

    def handle_data(self, data: str) -> None:
        self.parts.append(data)


def text_content(fragment: str) -> str:
    """What a browser's textContent gives for an HTML fragment."""
    p = _Text()
    p.feed(fragment)
    p.close()
    return "".join(p.parts)


def hostile_trace() -> Trace:
    """An S2D2 trace (a rejection, a resample, a diffusion block) whose every string is hostile. Built in memory: the
    trace validator refuses lone surrogates in a file, but a recorder's trace is never validated."""
    t = tf.build_trace([[tf.V("10"), tf.V("111")], [tf.D(4, "fallback")]], prompt_len=4, words=HOSTILE)
    t.header.model.name = HOSTILE[0]
    t.header.prompt_text = "".join(HOSTILE)
    t.footer.output_text = "".join(HOSTILE)
    return t
