"""The files for in-browser decoding (components/serve/browser_files.py): found, packed exactly, listed file by file,
the line when the runtime is missing, and, on the launched app, served with nothing next to them."""
from __future__ import annotations

import gzip
import json
import shutil

import httpx
import pytest

from components.serve import browser_files as bf
from s2d2.web.manifest import sha256
from tests.support.app_server import served  # noqa: F401  (the fixture)


def fake_runtime(root, version):
    """A dist folder shaped like the npm package's, at `version`."""
    dist = root / "onnxruntime-web" / "dist"
    dist.mkdir(parents=True)
    (dist.parent / "package.json").write_text(json.dumps({"name": "onnxruntime-web", "version": version}))
    for name in bf.RUNTIME_FILES:
        (dist / name).write_bytes(name.encode() * 1000)
    (dist / "ort.all.min.mjs").write_text("// another build: never served")
    return dist


def test_models_and_runtime_are_listed_file_by_file_with_packed_binaries(tmp_path):
    dist = fake_runtime(tmp_path / "nm", bf.pinned_version())
    found = bf.find(dist=dist, into=tmp_path / "packed")
    assert set(found.models) == {"tiny", "tiny-llada2"}
    for name, files in found.models.items():
        assert [f.name for f in files] == ["manifest.json", "tokenizer.json", "model.onnx", "model.onnx.gz"]
        manifest = json.loads(files[0].read_text())
        # the packed graph unpacks to exactly the bytes the manifest names
        unpacked = tmp_path / f"{name}.onnx"
        unpacked.write_bytes(gzip.decompress(files[3].read_bytes()))
        assert sha256(unpacked) == manifest["files"]["model.onnx"]["sha256"]
    assert [f.name for f in found.runtime] == list(bf.RUNTIME_FILES) + ["ort-wasm-simd-threaded.wasm.gz"]
    served_files = bf.static_files(found)
    assert all(f.is_file() for f in served_files) and not any(f.is_dir() for f in served_files)
    assert dist / "ort.all.min.mjs" not in served_files
    assert found.line == f"In-browser decoding is available: onnxruntime-web {bf.pinned_version()}, models tiny, " \
                         "tiny-llada2."


def test_packing_is_deterministic_and_redone_only_when_the_source_changes(tmp_path):
    source = tmp_path / "x.wasm"
    source.write_bytes(b"\x00asm" * 5000)
    first = bf.packed(source, tmp_path / "p")
    data, stamp = first.read_bytes(), first.stat().st_mtime_ns
    assert gzip.decompress(data) == source.read_bytes()
    assert bf.packed(source, tmp_path / "p").stat().st_mtime_ns == stamp  # unchanged source: not rewritten
    shutil.copy(first, tmp_path / "copy.gz")
    first.unlink()
    (tmp_path / "p" / "x.wasm.gz.sha256").unlink()
    assert bf.packed(source, tmp_path / "p").read_bytes() == data  # the same bytes when made again
    source.write_bytes(b"\x00asm" * 5001)
    assert gzip.decompress(bf.packed(source, tmp_path / "p").read_bytes()) == source.read_bytes()


@pytest.mark.parametrize("version, words", [
    (None, "onnxruntime-web is not installed (npm ci --prefix s2d2_web --ignore-scripts)"),
    ("1.2.3", "onnxruntime-web 1.2.3 is installed, {pinned} is pinned"),
])
def test_without_the_pinned_runtime_in_browser_decoding_is_off_in_one_line(tmp_path, version, words):
    dist = fake_runtime(tmp_path, version) if version else tmp_path / "none" / "dist"
    found = bf.find(dist=dist, into=tmp_path / "packed")
    assert found.runtime is None and found.line.count("\n") == 0
    assert found.line.startswith("In-browser decoding is off: " + words.format(pinned=bf.pinned_version()))
    assert found.models  # the models are still listed (their manifests are useful alone)
    assert all(f.parent.name != "dist" for f in bf.static_files(found))


@pytest.mark.slow
def test_the_app_serves_exactly_those_files(served):  # noqa: F811
    app, url = served
    found = bf.find()
    listed = bf.static_files(found)
    assert listed, "nothing to serve"
    for path in listed:
        r = httpx.get(f"{url}gradio_api/file={path}", timeout=60)
        assert r.status_code == 200 and r.content == path.read_bytes(), (path, r.status_code)
    runtime = [p for p in listed if p.suffix == ".mjs"]
    for path in runtime:  # the page imports these as ES modules: a JavaScript MIME type is required
        r = httpx.get(f"{url}gradio_api/file={path}", timeout=60)
        assert r.headers["content-type"].startswith("text/javascript"), r.headers
    tiny = found.models["tiny"][0].parent
    neighbours = [tiny.parent.parent / "tiny" / "model.safetensors", tiny.parent.parent / "tiny" / "config.json"]
    if found.runtime:
        neighbours.append(found.runtime[0].parent / "ort.all.min.mjs")
    for path in neighbours:
        assert path.is_file()
        r = httpx.get(f"{url}gradio_api/file={path}", timeout=60)
        assert r.status_code >= 400, path
