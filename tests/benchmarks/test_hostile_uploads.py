"""benchmarks.hostile_uploads' verdict: the upload's own time and the frame bundle's (its own bound) apart, and
every missed target named with its figure."""
from __future__ import annotations

from benchmarks.hostile_uploads import FRAME_SLACK_S, verdict
from components.replay.frame_bundle import BUILD_CPU_S


def test_the_verdict_names_each_missed_target():
    fine = verdict((0.3, "a"), (0.3, "a"), (5.0, "a"), (BUILD_CPU_S, "w"))
    assert fine.endswith(": met") and "frame bundle CPU: max 3000 ms (w)" in fine
    over = verdict((1.2, "a"), (0.9, "a"), (25.0, "b"), (BUILD_CPU_S + FRAME_SLACK_S + 0.1, "w"))
    assert "NOT met: an upload took 1200 ms wall (CPU max 900 ms" in over
    assert "RSS grew 25 MB during one upload" in over and "a bundle took 4100 ms CPU" in over
