"""The one Chromium every browser test module drives (launched once per module; skipped where it is missing), and
the `browser` mark on every test here, so `-m "not browser"` leaves them all out whatever a module declares."""
from __future__ import annotations

import pytest

from tests.support.browser_env import (ARGS, CHROMIUM, PatientBrowser, failure_story, forget_pages, require_browser,
                                       server_story)


def pytest_collection_modifyitems(items):
    here = __file__.rsplit("/", 1)[0]
    for item in items:
        if str(item.fspath).startswith(here):
            item.add_marker(pytest.mark.browser)


@pytest.fixture(scope="module")
def browser():
    sync_api = require_browser()
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield PatientBrowser(b)
        b.close()


def pytest_runtest_setup(item):
    forget_pages()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed browser test's report also says what its pages were refused, never got, or showed in a toast: a
    wait that timed out otherwise says only what it waited for."""
    outcome = yield
    report = outcome.get_result()
    if report.when == "call" and report.failed:
        report.sections.append(("what the pages were refused or shown", failure_story()))
        served = item.funcargs.get("served")
        if isinstance(served, tuple) and served:
            try:
                report.sections.append(("what the server holds", server_story(served[0])))
            except Exception as exc:  # the story must never hide the test's own failure
                report.sections.append(("what the server holds", f"could not be read: {exc!r}"))
