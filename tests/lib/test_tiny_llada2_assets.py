"""The shipped LLaDA2-architecture tiny model (assets/tiny-llada2): the official layout on disk, offline loading
through the LLaDA2 map, the CLI, and a smoke check that it solves held-out problems and edits."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "assets" / "tiny-llada2"
pytestmark = pytest.mark.skipif(not FOLDER.is_dir(), reason="assets/tiny-llada2 is not trained yet")


@pytest.fixture(scope="module")
def model():
    import s2d2

    return s2d2.load_model("tiny-llada2", device="cpu", dtype=torch.float32)


def test_files_are_the_official_layout():
    from safetensors import safe_open

    for f in ("config.json", "model.safetensors", "tokenizer.json", "README.md"):
        assert (FOLDER / f).is_file(), f
    assert not list(FOLDER.glob("*.bin")) and not list(FOLDER.glob("*.py"))  # safetensors only, no remote code
    cfg = json.loads((FOLDER / "config.json").read_text())
    assert (cfg["model_type"], cfg["architectures"]) == ("llada2_moe", ["LLaDA2MoeModelLM"])
    assert (cfg["mask_token_id"], cfg["block_size"], cfg["stop_token_ids"]) == (3, 32, [2, 0])
    with safe_open(str(FOLDER / "model.safetensors"), "pt") as f:
        keys = set(f.keys())
        assert f.get_tensor("model.word_embeddings.weight").dtype == torch.bfloat16
    for key in ("model.word_embeddings.weight", "model.layers.0.attention.query_key_value.weight",
                "model.layers.0.attention.dense.weight", "model.layers.1.attention.query_layernorm.weight",
                "model.layers.1.mlp.gate.expert_bias", "model.layers.1.mlp.experts.7.down_proj.weight",
                "model.layers.1.mlp.shared_experts.up_proj.weight"):
        assert key in keys, key
    total = sum(p.stat().st_size for p in (ROOT / "assets").rglob("*") if p.is_file())
    assert total < 40 * 2**20


def test_loads_onto_glm4moe(model):
    assert type(model.model).__name__ == "Glm4MoeForCausalLM"
    assert (model.spec.mask_id, sorted(model.spec.stop_ids), model.spec.default_block) == (3, [0, 2], 32)
    assert model.spec.extra["family"] == "llada2" and model.spec.extra["unexpected_keys"] == []
    bias = model.model.model.layers[1].mlp.gate.e_score_correction_bias
    assert float(bias.abs().max()) > 0  # the balancing bias was trained and mapped from expert_bias


@pytest.mark.slow
def test_cli_decodes_the_official_folder(tmp_path):
    out = tmp_path / "trace.json"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "s2d2", "generate", "--model", str(FOLDER), "--preset",
                           "llada2-quality", "--prompt", "Tom has 12 apples. He buys 7 more. How many apples does "
                           "Tom have now?", "--set", "gen_length=64", "--trace", str(out)],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=240)
    assert proc.returncode == 0, proc.stderr
    assert "edits (self-correction)" in proc.stdout and "#### 19" in proc.stdout
    trace = json.loads(out.read_text())
    assert trace["header"]["config"]["loop"] == "editing"


@pytest.mark.slow
def test_solves_held_out_problems_and_edits(model):
    import s2d2
    from s2d2.tasks.arithmetic import heldout, score

    probs = heldout(8)
    cfg = s2d2.preset("llada2-dynamic-edit", gen_length=96)
    results = [s2d2.generate(model, p.question, cfg, seed=i, detailed=False) for i, p in enumerate(probs)]
    assert sum(score(r.text, p) for r, p in zip(results, probs)) >= 6
    assert sum(r.metrics["edits"] for r in results) > 0


def test_loads_and_decodes_in_float64(model):
    """A float64 load decodes (its MoE's experts on the eager path: the default grouped-matmul kernel refuses
    float64 at the first forward), and gives the float32 load's answer on an easy problem."""
    import s2d2

    model64 = s2d2.load_model("tiny-llada2", device="cpu", dtype=torch.float64)
    prompt, cfg = "Tom has 12 apples and eats 3. How many are left?", s2d2.preset("llada2-dynamic", gen_length=32)
    got = s2d2.generate(model64, prompt, cfg, seed=0)
    assert got.metrics["nfe"] > 0 and got.text.strip()
    assert got.text == s2d2.generate(model, prompt, cfg, seed=0).text
