"""Text from a file (or a visitor) made inert wherever it is shown: gr.Markdown, gr.HTML and Plotly labels.

Every string that comes from an uploaded trace, a sweep results file or a request goes through one of these
before it reaches a view. `md_text` is for Markdown: HTML is escaped, Markdown punctuation is backslashed, and the
triggers of GitHub-flavoured autolinks are broken (GFM turns a bare `http://…`, `www.…` or `a@b.c` into a live link
even when every other character is escaped), so a URL in a model name stays text. `html_text` is for HTML and for
Plotly labels (Plotly renders `<a href>` and `<b>` in hover text).
"""
from __future__ import annotations

import html
import re
from typing import Any

_MD_PUNCT = re.compile(r"([\\`*_{}\[\]()#+!|~-])")
_SCHEME = re.compile(r"(?i)\b(https?|ftps?|mailto|xmpp)(:)")
_WWW = re.compile(r"(?i)\b(www)\.")
LONE_SURROGATE = re.compile("[\ud800-\udfff]")  # half a UTF-16 pair: no encoder can write it, so it never leaves


def without_surrogates(text: str) -> str:
    """`text` with every lone surrogate replaced by U+FFFD (the same object when there is none)."""
    return LONE_SURROGATE.sub("\ufffd", text) if LONE_SURROGATE.search(text) else text


def clean_text(value: Any, limit: int) -> str:
    """str(value) cut to `limit` characters (with an ellipsis), lone surrogates replaced (they cannot be encoded)."""
    text = str(value)
    if len(text) > limit:
        text = text[: max(0, limit - 1)] + "…"
    return without_surrogates(text)


def md_text(value: Any, limit: int = 120) -> str:
    """Inert Markdown: HTML escaped, Markdown punctuation backslashed, no autolink (':' after a scheme, 'www.'
    and '@' become character references, which render as the same characters)."""
    text = _MD_PUNCT.sub(r"\\\1", clean_text(value, limit))
    text = html.escape(text, quote=True)
    text = _SCHEME.sub(r"\1&#58;", text)
    text = _WWW.sub(r"\1&#46;", text)
    return text.replace("@", "&#64;")


def html_text(value: Any, limit: int = 200) -> str:
    """Inert HTML text or attribute value (and Plotly label)."""
    return html.escape(clean_text(value, limit), quote=True)
