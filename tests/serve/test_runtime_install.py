"""Installing onnxruntime-web at start where it is missing (components/serve/runtime_install.py): on a Space or when
asked, with npm's own client; every failure one line; the app serves the runtime's paths once it lands. npm itself is
a stand-in script here (no network): it lays out the files `npm ci` would."""
from __future__ import annotations

import os
import shutil
import stat

import pytest

from components.serve import browser_files as bf
from components.serve import page_modules, runtime_install


def fake_npm(bin_dir, body):
    """An `npm` on PATH running `body` (sh) with the arguments `ci --prefix DIR ...`."""
    bin_dir.mkdir(exist_ok=True)
    npm = bin_dir / "npm"
    npm.write_text("#!/bin/sh\n" + body)
    npm.chmod(npm.stat().st_mode | stat.S_IEXEC)
    return bin_dir


def laying_out(version):
    """npm ci's result, as a script: the package at `version` with the files the app serves."""
    files = " ".join(bf.RUNTIME_FILES)
    return (f'd="$3/node_modules/onnxruntime-web/dist"; mkdir -p "$d"\n'
            f'printf \'{{"version": "{version}"}}\' > "$3/node_modules/onnxruntime-web/package.json"\n'
            f'for f in {files}; do echo "$f" > "$d/$f"; done\n')


@pytest.mark.parametrize("env, want", [
    ({}, False), ({"SPACE_ID": "someone/s2d2"}, True), ({"S2D2_WEB_RUNTIME_INSTALL": "1"}, True),
    ({"SPACE_ID": "someone/s2d2", "S2D2_WEB_RUNTIME_INSTALL": "0"}, False), ({"S2D2_WEB_RUNTIME_INSTALL": "x"}, False),
])
def test_installs_on_a_space_or_when_asked(env, want):
    assert runtime_install.wanted(env) is want


def test_install_runs_npm_ci_and_the_runtime_is_then_found(tmp_path, monkeypatch):
    prefix = tmp_path / "s2d2_web"
    prefix.mkdir()
    log = tmp_path / "args"
    script = f'echo "$@" > {log}\n' + laying_out(bf.pinned_version())
    monkeypatch.setenv("PATH", f"{fake_npm(tmp_path / 'bin', script)}:/usr/bin:/bin")
    assert runtime_install.install(prefix) is None
    assert log.read_text().split() == ["ci", "--prefix", str(prefix), "--ignore-scripts", "--omit=dev", "--no-audit",
                                      "--no-fund"]
    assert bf.runtime_problem(prefix / "node_modules" / "onnxruntime-web" / "dist") is None


@pytest.mark.parametrize("body, line", [
    (None, "npm is not installed (packages.txt names it for a Space; apt-get install npm elsewhere)"),
    ("echo 'npm ERR! network unreachable' >&2; exit 1\n", "npm ci failed (exit 1): npm ERR! network unreachable"),
    ("sleep 5\n", "npm ci took longer than 1 s and was stopped"),
])
def test_a_failed_install_is_one_line(tmp_path, monkeypatch, body, line):
    bin_dir = fake_npm(tmp_path / "bin", body) if body else tmp_path / "empty"
    bin_dir.mkdir(exist_ok=True)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin" if body else str(bin_dir))
    assert runtime_install.install(tmp_path, timeout=1 if "sleep" in (body or "") else 30) == line


def test_the_app_serves_the_runtime_once_the_start_up_install_lands(tmp_path, monkeypatch):
    """serve() with no runtime on a Space: the runtime's paths are served from the start, npm ci runs once in the
    background, then the line says in-browser decoding is available (the WASM binary packed)."""
    prefix = tmp_path / "s2d2_web"
    prefix.mkdir()
    dist = prefix / "node_modules" / "onnxruntime-web" / "dist"
    monkeypatch.setattr(bf, "RUNTIME_DIST", dist)
    monkeypatch.setenv("S2D2_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("SPACE_ID", "someone/s2d2")
    monkeypatch.delenv("S2D2_WEB_RUNTIME_INSTALL", raising=False)
    monkeypatch.setenv("PATH", str(fake_npm(tmp_path / "bin", laying_out(bf.pinned_version()))) + ":/usr/bin:/bin")
    monkeypatch.setattr(page_modules, "_SAID", [])
    monkeypatch.setattr(page_modules, "_INSTALLING", [])
    served: list = []
    monkeypatch.setattr(page_modules.gr, "set_static_paths", lambda paths: served.extend(paths))
    found = page_modules.serve()
    assert found.runtime is None
    page_modules._INSTALLING[0].join(timeout=60)
    assert set(bf.runtime_paths()) <= set(served) and dist in [p.parent for p in served]
    assert not any(p == dist or p == dist.parent for p in served)  # files, never the folder
    assert page_modules._SAID[0].startswith("In-browser decoding is off until onnxruntime-web is installed")
    assert page_modules._SAID[-1].startswith("In-browser decoding is available: onnxruntime-web")
    assert all(p.is_file() for p in bf.runtime_paths())  # landed where they are served, the binary packed
    page_modules.serve()  # a second app built in the process starts no second install
    assert len(page_modules._INSTALLING) == 1
    shutil.rmtree(prefix)
    assert not os.path.exists(dist)
