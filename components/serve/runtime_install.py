"""Installing the pinned onnxruntime-web when the app starts without it, where the operator wants that (a Space).

A Hugging Face Space installs the Debian packages named in `packages.txt` (this repository names nodejs and npm) and
the Python requirements, but runs no `npm ci`. So on a Space (`SPACE_ID` set), or anywhere with
`S2D2_WEB_RUNTIME_INSTALL=1`, the app runs `npm ci --prefix s2d2_web --ignore-scripts --omit=dev` itself (the
runtime alone: the dev dependency onnxruntime-node serves the tests only), once, in a background thread, when the
runtime is missing: the ordinary client, the versions and integrity hashes of
s2d2_web/package-lock.json, no install scripts. `S2D2_WEB_RUNTIME_INSTALL=0` turns it off. Until it finishes, the page
decodes on the server; a failure is one line on stderr and changes nothing else.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Callable

INSTALL_TIMEOUT_S = 300.0  # npm ci of one package and its few dependencies; a hung registry is given up on


def wanted(env: dict[str, str] | None = None) -> bool:
    """Whether to install at start: S2D2_WEB_RUNTIME_INSTALL=1/0 decides, else yes on a Space only."""
    env = dict(os.environ) if env is None else env
    says = env.get("S2D2_WEB_RUNTIME_INSTALL", "").strip()
    if says in ("0", "1"):
        return says == "1"
    return bool(env.get("SPACE_ID"))


def install(prefix: Path, timeout: float = INSTALL_TIMEOUT_S) -> str | None:
    """Run `npm ci` in `prefix` (a folder with package.json and package-lock.json); None on success, else one line."""
    npm = shutil.which("npm")
    if npm is None:
        return "npm is not installed (packages.txt names it for a Space; apt-get install npm elsewhere)"
    command = [npm, "ci", "--prefix", str(prefix), "--ignore-scripts", "--omit=dev", "--no-audit", "--no-fund"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return f"npm ci took longer than {timeout:.0f} s and was stopped"
    except OSError as exc:
        return f"npm could not run: {exc}"
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        return f"npm ci failed (exit {done.returncode}): {last[:300]}"
    return None


def start(prefix: Path, then: Callable[[str | None], None]) -> threading.Thread:
    """Install in a daemon thread and call `then` with the outcome (None or the one-line problem)."""
    thread = threading.Thread(target=lambda: then(install(prefix)), name="s2d2-web-runtime-install", daemon=True)
    thread.start()
    return thread
