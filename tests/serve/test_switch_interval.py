"""The interpreter's switch interval (components/serve/switch_interval.py): Gradio's event loop takes the
interpreter back from a busy handler thread within S2D2_SWITCH_INTERVAL_MS, default 1 ms, and the app sets it."""
from __future__ import annotations

import sys

import pytest

from components.serve.switch_interval import apply_switch_interval, switch_interval_s


@pytest.fixture
def restored():
    before = sys.getswitchinterval()
    yield
    sys.setswitchinterval(before)


def test_the_default_is_one_millisecond_and_the_setting_is_read_in_milliseconds(monkeypatch, restored):
    monkeypatch.delenv("S2D2_SWITCH_INTERVAL_MS", raising=False)
    assert switch_interval_s() == pytest.approx(0.001)
    monkeypatch.setenv("S2D2_SWITCH_INTERVAL_MS", "2.5")
    assert apply_switch_interval() == pytest.approx(0.0025)
    assert sys.getswitchinterval() == pytest.approx(0.0025)


@pytest.mark.parametrize("raw", ["0", "51", "fast", "-1"])
def test_a_value_outside_its_bounds_is_one_line_naming_the_setting(monkeypatch, restored, raw):
    monkeypatch.setenv("S2D2_SWITCH_INTERVAL_MS", raw)
    before = sys.getswitchinterval()
    with pytest.raises(ValueError, match="S2D2_SWITCH_INTERVAL_MS"):
        apply_switch_interval()
    assert sys.getswitchinterval() == before  # nothing half-applied


def test_the_app_sets_it_at_start(tmp_path):
    """In a fresh interpreter (Python's own default is 5 ms): importing the app, as a Space does, sets 1 ms."""
    import os
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if k != "S2D2_SWITCH_INTERVAL_MS"}
    env.update(HF_HUB_OFFLINE="1", PYTHONPATH=str(root))
    code = "import sys; before = sys.getswitchinterval(); import app; print(before, sys.getswitchinterval())"
    out = subprocess.run([sys.executable, "-c", code], cwd=root, env=env, capture_output=True, text=True,
                         timeout=300, check=True).stdout.split()
    assert [float(x) for x in out[-2:]] == [pytest.approx(0.005), pytest.approx(0.001)]
