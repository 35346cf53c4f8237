"""What the browser tests of a Run decoded in the page share: the skip when this checkout cannot decode in the page,
the trace files the page uploaded, and Replay's trace header line."""
from __future__ import annotations

import json
import os
from pathlib import Path
from urllib.parse import urlparse

import pytest

from tests.support.browser_env import WAIT_MS

ROOT = Path(__file__).resolve().parents[2]


def require_page_decoding() -> None:
    from components.run.page_decode import offered

    found = offered()
    if not (ROOT / "assets" / "tiny").exists():
        pytest.skip("the bundled tiny model is missing (python -m s2d2 train-tiny)")
    if found.runtime is None or "tiny" not in found.models:
        pytest.skip(found.line)


class Uploads:
    """The trace files the page uploaded (Gradio's /upload route), as the server stored them in its upload folder."""

    def __init__(self, pg) -> None:
        self.posts = 0
        self.before = set(self._files())
        pg.on("request", self._seen)

    @staticmethod
    def _files() -> list[Path]:
        return list(Path(os.environ["GRADIO_TEMP_DIR"]).rglob("page-trace.json"))

    def _seen(self, request) -> None:
        if urlparse(request.url).path.endswith("/upload") and request.method == "POST":
            self.posts += 1

    def trace(self) -> dict:
        """The one trace uploaded, read from the file the server received."""
        files = [f for f in self._files() if f not in self.before]
        assert self.posts == 1 and len(files) == 1, (self.posts, files)
        return json.loads(files[0].read_text(encoding="utf-8"))


def title(pg) -> str:
    """Replay's trace header line (in the closed "This trace: details" box)."""
    pg.get_by_role("tab", name="Replay", exact=True).click()
    pg.locator("#files").get_by_text("This trace: details").click()
    return pg.locator("#trace-title").inner_text(timeout=WAIT_MS // 6)
