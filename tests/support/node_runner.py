"""Run an ES module function of s2d2_web/ (or of the page's components) under Node from a test: JSON in on stdin, JSON out on stdout.

The tests that bind a page-side module to the Python it mirrors use this; they skip (with the reason) where
`node` is not installed (README, 'Set up': `apt-get install nodejs`; .ci/run installs it)."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
WEB = ROOT / "s2d2_web"


def node() -> str:
    """The node executable, or a pytest skip saying why there is none."""
    found = shutil.which("node") or shutil.which("nodejs")
    if found is None:
        pytest.skip("node is not installed (apt-get install nodejs): the JavaScript side cannot be checked here")
    return found


def run_module(module: "str | Path", body: str, payload: Any, timeout: float = 120.0) -> Any:
    """Import `s2d2_web/<module>` (or the module at an absolute path) as `m`, bind the parsed stdin JSON to `input`, run `body` (JavaScript that
    assigns `output`) and return `output` parsed from the printed JSON."""
    url = (Path(module) if Path(module).is_absolute() else WEB / module).as_uri()
    script = (f"import * as m from {json.dumps(url)};\nimport {{ readFileSync }} from 'node:fs';\n"
              f"const input = JSON.parse(readFileSync(0, 'utf8'));\nlet output;\n{body}\n"
              "process.stdout.write(JSON.stringify(output));\n")
    done = subprocess.run([node(), "--input-type=module", "-e", script], input=json.dumps(payload), text=True,
                          capture_output=True, timeout=timeout, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)
