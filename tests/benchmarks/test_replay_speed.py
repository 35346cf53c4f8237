"""benchmarks.replay_speed runs to its end on a small synthetic trace and reports every Replay view, each timed
through the app's own registry (it once crashed on the views it did not time: a mean of no samples)."""
from __future__ import annotations

import re

from benchmarks.replay_speed import main
from components.views.step_views import STEP_VIEWS


def test_replay_speed_reports_every_view(capsys):
    assert main(["--tokens", "32", "--every", "8"]) == 0
    out = capsys.readouterr().out
    for name in STEP_VIEWS:
        assert re.search(rf"^  {re.escape(name)} +\d+\.\d ms +\d+\.\d kB", out, re.M), (name, out)
    assert f"render_step (all {len(STEP_VIEWS)} outputs)" in out and "on load:" in out
