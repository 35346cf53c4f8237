"""The exports shipped in assets/web/ (what the app serves to the page): made from the bundled weights as they are now,
their files as their manifests say, and still torch's forward on every kind the decoder uses. A retrained model whose
export was not redone (`python -m s2d2 export-web --model NAME`) fails here."""
from __future__ import annotations

import pytest

pytest.importorskip("onnxruntime", reason="checking an export needs requirements-web.txt (onnxruntime)")

from s2d2.models.registry import ASSETS  # noqa: E402
from s2d2.web import roundtrip  # noqa: E402
from s2d2.web.manifest import read_manifest, sha256  # noqa: E402

MODELS = ("tiny", "tiny-llada2")


@pytest.mark.parametrize("name", MODELS)
def test_shipped_export_is_of_the_current_weights_and_intact(name):
    folder = ASSETS / "web" / name
    manifest = read_manifest(folder)
    assert manifest["model"] == name
    assert set(manifest["source"]) == {"config.json", "model.safetensors", "tokenizer.json"}
    for file, facts in manifest["source"].items():  # made from the checkpoint as it is now
        assert facts["sha256"] == sha256(ASSETS / name / file), f"{name}: re-run export-web ({file} changed)"
    for file, facts in manifest["files"].items():
        assert facts == {"bytes": (folder / file).stat().st_size, "sha256": sha256(folder / file)}


@pytest.mark.parametrize("name", MODELS)
def test_shipped_export_matches_torch(name):
    rows = roundtrip.check_export(name, ASSETS / "web" / name)
    assert {r.kind for r in rows} >= {"prefill", "draft", "verify_2l", "commit", "commit+draft", "ar"}
    assert all(r.max_abs <= 1e-4 and r.cache_max_abs <= 1e-4 and r.argmax_equal == r.rows for r in rows), rows
