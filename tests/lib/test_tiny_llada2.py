"""The LLaDA2-architecture tiny model's training code: upcycling from Qwen3, the editing objective, and a micro
run of stage `llada2` that exports the official layout the loader reads."""
from __future__ import annotations

import json

import pytest
import torch

from s2d2.tiny import llada2 as TL
from s2d2.tiny import objectives
from s2d2.tiny.model import build_config, build_model

MASK = 3


def test_upcycled_moe_starts_as_the_dense_model():
    qcfg = build_config("micro", 64)
    dense = build_model("micro", 64, seed=1).eval()
    gcfg = TL.config_from_qwen3(qcfg)
    from s2d2.models.builders import glm4moe

    moe = glm4moe(gcfg, seed=2).eval()
    missing, unexpected = moe.load_state_dict(TL.upcycle(dense.state_dict(), qcfg, gcfg, routed_init_scale=0.0),
                                              strict=False)
    assert not unexpected and all(k.endswith(("mlp.gate.weight", "e_score_correction_bias")) or k == "lm_head.weight"
                                  for k in missing)
    moe.tie_weights()
    ids = torch.randint(4, 64, (1, 20))
    with torch.no_grad():  # routed experts silent, shared expert = the dense MLP: the same function
        assert torch.allclose(moe(ids).logits, dense(ids).logits, atol=1e-5)


def test_half_rope_permutation_keeps_even_pairs():
    perm = TL.half_rope_permutation(32)
    assert sorted(perm.tolist()) == list(range(32))
    for j in range(8):  # new rotary pair (j, j+8) is old pair (2j, 2j+16): the same frequency θ^(-4j/32)
        assert (perm[j], perm[j + 8]) == (2 * j, 2 * j + 16)


def test_corrupt_visible_targets_only_visible_tokens():
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(4, 64, (6, 32), generator=g)
    inp, pos, attn, tg = objectives.make_sdar_batch(ids, g, MASK, p_ar=0.0, blocks=(8,), complementary=False)
    digits = torch.arange(10, 20)
    new_inp, new_tg, corrupt = objectives.corrupt_visible(inp, tg, g, MASK, 0.3, 0.5, vocab=64, first_regular=4,
                                                   digit_ids=digits)
    L = 32
    noisy, clean = new_inp[:, :L], new_inp[:, L:]
    masked = inp[:, :L] == MASK
    assert corrupt.any() and not (corrupt & masked).any()
    assert torch.equal(clean, inp[:, L:])  # the clean stream never carries a corruption
    assert torch.equal(noisy[~corrupt], inp[:, :L][~corrupt]) and (noisy[corrupt] != clean[corrupt]).all()
    assert torch.equal(new_tg[masked], tg[masked])  # masked targets unchanged
    assert torch.equal(new_tg[corrupt], clean[corrupt])  # a corrupted token's target is the original
    kept = (new_tg != -100) & ~masked & ~corrupt
    assert kept.any() and torch.equal(new_tg[kept], clean[kept])  # some untouched visible tokens predict themselves


@pytest.mark.slow
def test_llada2_stage_trains_resumes_and_exports(tmp_path, monkeypatch):
    import s2d2
    from s2d2.tiny import train

    prose = ["Emma Woodhouse, handsome, clever, and rich, had lived nearly twenty-one years in the world. " * 4] * 40
    monkeypatch.setattr(train, "austen_split", lambda data_dir: (prose, prose[:5]))
    base = dict(out=str(tmp_path), size="micro", vocab=300, n_arith=300, batch=2, seq_len=32, log_every=1,
                eval_every=2, acc_every=0, snap_every=0, ckpt_every=1, progress=False, bf16=False, warmup=1,
                threads=1)
    train.train_tiny(dict(base, stage="ar", steps=1))
    l2 = dict(base, stage="llada2", init=str(tmp_path / "ar" / "latest"), blocks="4,8", block_size=8)
    train.train_tiny(dict(l2, steps=1))
    train.train_tiny(dict(l2, steps=2, export=str(tmp_path / "export")))  # resumes from the official-layout checkpoint
    log = [json.loads(ln) for ln in (tmp_path / "llada2" / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log if "loss" in r] == [1, 2] and "val_arith_edit" in log[-1]
    cfg = json.loads((tmp_path / "export" / "config.json").read_text())
    assert cfg["model_type"] == "llada2_moe" and cfg["architectures"] == ["LLaDA2MoeModelLM"]
    assert (cfg["mask_token_id"], cfg["block_size"], cfg["num_experts"]) == (3, 8, TL.N_EXPERTS)
    model = s2d2.load_model(tmp_path / "export", device="cpu")
    assert type(model.model).__name__ == "Glm4MoeForCausalLM" and model.spec.extra["family"] == "llada2"
    res = s2d2.generate(model, "Anna has 3 apples.", s2d2.preset("llada2-quality", block_length=8, gen_length=8))
    assert res.trace.replay() == res.token_ids
