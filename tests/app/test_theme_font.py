"""The page's body font is a file Gradio serves itself, in every weight the theme asks for, and not Gradio's
"Montserrat" (its file is Montserrat Alternates: a barred Z, so the normaliser Z read "Ƶ", and no Greek)."""
from __future__ import annotations

import re
from pathlib import Path

import gradio as gr

from components.theme import BODY_FONT, MONO_FONT, THEME

STATIC = Path(gr.__file__).parent / "templates" / "frontend" / "static"


def test_the_fonts_are_served_by_gradio_in_every_weight_asked():
    """Regular and Bold only: Gradio's SemiBold (and Medium) files of these fonts are subsets of a few dozen glyphs,
    so text at 600 mixed two weights in one word."""
    assert (BODY_FONT.name, MONO_FONT.name) == ("IBM Plex Sans", "IBM Plex Mono")
    for font in (BODY_FONT, MONO_FONT):
        assert font.weights == (400, 700)
        files = re.findall(r"url\('(static/fonts/[^']+)'\)", font.stylesheet()["css"])
        assert [f.rsplit("-", 1)[1] for f in files] == ["Regular.woff2", "Bold.woff2"]
        missing = [f for f in files if not (STATIC.parent / f).exists()]
        assert not missing, missing


def test_the_page_asks_for_it_first_then_the_system_font_never_a_download():
    assert THEME.font == "'IBM Plex Sans', ui-sans-serif, system-ui, sans-serif"
    assert "Montserrat" not in THEME.font
    assert BODY_FONT.stylesheet()["url"] is None  # no request to a font service: the page works offline
