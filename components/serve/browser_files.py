"""The files a page needs to decode in the visitor's browser, found, packed and listed for Gradio to serve.

Two kinds (docs/browser-decoding.md, 'How the page gets the files'):
- the bundled models' exports, shipped in assets/web/<model>/ (`python -m s2d2 export-web` writes them): the
  manifest, the tokenizer and the ONNX graph;
- the onnxruntime-web runtime at the version s2d2_web/package.json pins, installed by
  `npm ci --prefix s2d2_web --ignore-scripts` into s2d2_web/node_modules: its WASM-only module, the module that loads
  the WASM, and the WASM binary.

Gradio compresses JavaScript and JSON in transit but not binaries, and the graph and the WASM binary are most of the
bytes, so each binary is also served gzip-packed (`<name>.gz`, made once into `PACKED` under the app's cache root and
remade when its source changes): the page fetches the packed file and unpacks it with the browser's
DecompressionStream. Only the files listed by `static_files` are served, never their folders.

When the runtime is missing or at another version, in-browser decoding is off and `BrowserFiles.line` says so in one
line (the app prints it at start); on a Space the app installs it at start (components/serve/runtime_install.py).
"""
from __future__ import annotations

import gzip
import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from components.serve.disk_budget import cache_root
from s2d2.models.registry import ASSETS

ROOT = Path(__file__).resolve().parents[2]  # the repository
WEB_MODELS = ASSETS / "web"
PACKAGE = ROOT / "s2d2_web" / "package.json"
RUNTIME = "onnxruntime-web"
RUNTIME_DIST = ROOT / "s2d2_web" / "node_modules" / RUNTIME / "dist"
RUNTIME_FILES = ("ort.wasm.min.mjs", "ort-wasm-simd-threaded.mjs", "ort-wasm-simd-threaded.wasm")
MODEL_FILES = ("manifest.json", "tokenizer.json", "model.onnx")
PACKED_SUFFIXES = (".onnx", ".wasm")  # binaries: served packed as well
PACKED = "browser-files"  # folder under the cache root


@dataclass(frozen=True)
class BrowserFiles:
    """What the page can fetch: each bundled model's files, the runtime's (None when absent), and the line saying so."""

    models: dict[str, list[Path]]
    runtime: list[Path] | None
    line: str


def pinned_version() -> str:
    """The runtime version s2d2_web/package.json pins."""
    return str(json.loads(PACKAGE.read_text(encoding="utf-8"))["dependencies"][RUNTIME])


def installed_version(dist: Path | None = None) -> str | None:
    """The installed runtime's version, or None when it is not installed."""
    dist = dist or RUNTIME_DIST
    try:
        return str(json.loads((dist.parent / "package.json").read_text(encoding="utf-8"))["version"])
    except (OSError, ValueError, KeyError):
        return None


def runtime_problem(dist: Path | None = None) -> str | None:
    """Why the runtime cannot be served, or None."""
    dist = dist or RUNTIME_DIST
    want, have = pinned_version(), installed_version(dist)
    if have is None:
        return f"{RUNTIME} is not installed (npm ci --prefix s2d2_web --ignore-scripts)"
    if have != want:
        return f"{RUNTIME} {have} is installed, {want} is pinned (npm ci --prefix s2d2_web --ignore-scripts)"
    missing = [n for n in RUNTIME_FILES if not (dist / n).is_file()]
    return f"{RUNTIME} {have} lacks {', '.join(missing)}" if missing else None


def exported_models(folder: Path | None = None) -> dict[str, Path]:
    """{model: its export folder} for every folder holding all of MODEL_FILES."""
    folder = folder or WEB_MODELS
    if not folder.is_dir():
        return {}
    return {d.name: d for d in sorted(folder.iterdir())
            if d.is_dir() and all((d / n).is_file() for n in MODEL_FILES)}


def packed(source: Path, into: Path) -> Path:
    """`source` gzip-packed as into/<name>.gz (deterministic: no name or time in the header), made only when missing
    or made from other bytes (a sidecar holds the source's sha256); written to a temporary file, then renamed, so two
    processes never serve a half-written file."""
    into.mkdir(parents=True, exist_ok=True)
    target, sidecar = into / f"{source.name}.gz", into / f"{source.name}.gz.sha256"
    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    if target.is_file() and sidecar.is_file() and sidecar.read_text().strip() == digest:
        return target
    fd, tmp = tempfile.mkstemp(dir=into, prefix=f".{source.name}.")
    with os.fdopen(fd, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz:
        gz.write(source.read_bytes())
    os.replace(tmp, target)
    sidecar.write_text(digest + "\n")
    return target


def with_packed(files: list[Path], into: Path) -> list[Path]:
    """The files plus a packed copy of each binary among them."""
    return files + [packed(f, into) for f in files if f.suffix in PACKED_SUFFIXES]


def runtime_paths(dist: Path | None = None, into: Path | None = None) -> list[Path]:
    """Where the runtime's served files are once it is installed and packed (they may not exist yet): a runtime
    being installed at start (components/serve/runtime_install.py) is served from these paths when it lands."""
    dist, into = dist or RUNTIME_DIST, into if into is not None else cache_root() / PACKED
    files = [dist / n for n in RUNTIME_FILES]
    return files + [into / RUNTIME / f"{f.name}.gz" for f in files if f.suffix in PACKED_SUFFIXES]


def find(dist: Path | None = None, models_folder: Path | None = None, into: Path | None = None) -> BrowserFiles:
    """Every file the page may fetch, packing binaries under `into` (default: <cache root>/browser-files)."""
    dist, models_folder = dist or RUNTIME_DIST, models_folder or WEB_MODELS
    into = into if into is not None else cache_root() / PACKED
    models = {name: with_packed([d / n for n in MODEL_FILES], into / name)
              for name, d in exported_models(models_folder).items()}
    why = runtime_problem(dist)
    runtime = None if why else with_packed([dist / n for n in RUNTIME_FILES], into / RUNTIME)
    if why:
        line = f"In-browser decoding is off: {why}; runs decode on the server."
    elif not models:
        line = "In-browser decoding is off: no exported model (python -m s2d2 export-web --model tiny)."
    else:
        line = f"In-browser decoding is available: {RUNTIME} {pinned_version()}, models {', '.join(models)}."
    return BrowserFiles(models, runtime, line)


def static_files(found: BrowserFiles) -> list[Path]:
    """The exact files to serve: every model's (even without the runtime: the manifest is useful alone) and the
    runtime's when present."""
    out = [f for files in found.models.values() for f in files]
    return out + (found.runtime or [])
