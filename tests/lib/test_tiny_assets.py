"""The shipped tiny model in assets/tiny: offline loading, config facts, size, and an accuracy smoke check."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "assets" / "tiny"


@pytest.fixture(scope="module")
def model():
    os.environ["HF_HUB_OFFLINE"] = "1"
    import s2d2

    return s2d2.load_model("tiny", device="cpu", dtype=torch.float32)


def test_files_config_and_size():
    for f in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "README.md"):
        assert (TINY / f).is_file(), f
    assert not list(TINY.glob("*.bin")) and not list(TINY.glob("*.py"))  # safetensors only, no remote code
    cfg = json.loads((TINY / "config.json").read_text())
    assert cfg["architectures"] == ["Qwen3ForCausalLM"]
    assert cfg["logits_alignment"] == "aligned"
    assert cfg["mask_token_id"] == 3 and cfg["stop_token_ids"] == [2, 0]
    assert cfg["block_size"] in (4, 8, 16)
    total = sum(p.stat().st_size for p in (ROOT / "assets").rglob("*") if p.is_file())
    assert total < 40 * 2**20


def test_tokenizer_offline():
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(TINY))
    cfg = json.loads((TINY / "config.json").read_text())
    assert tok.mask_token == "<|MASK|>" and tok.mask_token_id == cfg["mask_token_id"]
    assert tok.convert_tokens_to_ids(["<|im_end|>", "<|endoftext|>"]) == cfg["stop_token_ids"]
    from s2d2.tasks.arithmetic import heldout, messages_for, prompt_for

    p = heldout(1)[0]
    assert tok.apply_chat_template(messages_for(p), add_generation_prompt=True, tokenize=False) == prompt_for(p)
    s = prompt_for(p) + p.solution + "<|im_end|>"
    assert tok.decode(tok.encode(s, add_special_tokens=False)) == s


def test_load_model_spec(model):
    assert model.spec.alignment == "aligned"
    assert model.spec.mask_id == 3
    assert sorted(model.spec.stop_ids) == [0, 2]
    assert model.spec.vocab_size == model.model.config.vocab_size


@pytest.mark.slow
def test_accuracy_smoke(model):
    """AR greedy (block size 1, MASK queried in place) solves most held-out problems."""
    import s2d2
    from s2d2.tasks.arithmetic import heldout, score

    probs = heldout(12)
    cfg = s2d2.preset("ar", gen_length=96)
    hits = sum(score(s2d2.generate(model, p.question, cfg, detailed=False).text, p) for p in probs)
    assert hits >= 10  # the shipped model scores 98 % on the first 100


@pytest.mark.slow
def test_decoder_ar_and_greedy_exact_s2d2_agree(model):
    """The library's AR decode equals the minimal greedy loop, and S2D2 greedy_exact always-verify equals AR."""
    import s2d2
    from s2d2.tasks.arithmetic import heldout, prompt_for
    from s2d2.tiny.evalquick import greedy_batch

    probs = heldout(3)
    ref = greedy_batch(model.model, model.tokenizer, [prompt_for(p) for p in probs], mode="aligned")
    for p, r in zip(probs, ref):
        ar = s2d2.generate(model, p.question, s2d2.preset("ar", gen_length=96), detailed=False)
        assert ar.text == r
        ex = s2d2.generate(model, p.question, s2d2.preset("sdar-config-a", policy="always", acceptance="greedy_exact",
                                                          gen_length=96), detailed=False)
        assert ex.text == ar.text
        assert ex.metrics["nfe"] < ar.metrics["nfe"]
