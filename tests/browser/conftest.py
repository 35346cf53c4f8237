"""The one Chromium every browser test module drives (launched once per module; skipped where it is missing)."""
from __future__ import annotations

import pytest

from tests.support.browser_env import ARGS, CHROMIUM, require_browser


@pytest.fixture(scope="module")
def browser():
    sync_api = require_browser()
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()
