"""What every browser test shares: Debian's Chromium and its flags, the two viewports the app is judged at, and
the skip when Playwright or the browser is missing (`sync_api = require_browser()` at module level)."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = os.environ.get("S2D2_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--no-first-run", "--disable-sync"]
DESKTOP = {"width": 1366, "height": 900}
PHONE = {"width": 390, "height": 844}


def require_browser() -> Any:
    """Playwright's sync API; skips the calling test module when Playwright or Chromium is missing."""
    sync_api = pytest.importorskip("playwright.sync_api")
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium)", allow_module_level=True)
    return sync_api


def painted(pg: Any) -> None:
    """Wait until the page has rendered what it holds now: two animation frames (an event, not a guessed delay)."""
    pg.evaluate("() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))")
