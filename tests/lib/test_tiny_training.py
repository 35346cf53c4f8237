"""Micro-training of the tiny objectives: the loss falls, the block-diffusion layout never leaks a masked
position's clean token into its own prediction, and the training loop resumes."""
from __future__ import annotations

import json

import pytest
import torch

from s2d2.tiny import objectives as obj
from s2d2.tiny.model import build_model

MASK = 3
V = 64

pytestmark = pytest.mark.slow  # trains tiny models


def _data(n=8, L=32, seed=0):
    # a learnable toy language: arithmetic progressions mod 60 (offset past the special ids)
    g = torch.Generator().manual_seed(seed)
    start = torch.randint(0, 60, (n, 1), generator=g)
    step = torch.randint(1, 4, (n, 1), generator=g)
    return 4 + (start + step * torch.arange(L)) % 60


def _train(loss_fn, steps=30, lr=5e-3):
    torch.manual_seed(0)
    model = build_model("micro", V, seed=0)
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    losses = []
    for s in range(steps):
        loss = loss_fn(model, s)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(float(loss.detach()))
    return losses


def test_ar_loss_falls():
    x = _data()
    losses = _train(lambda m, s: obj.ar_loss(m, x))
    assert sum(losses[-5:]) / 5 < 0.6 * sum(losses[:5]) / 5


def test_sdar_loss_falls():
    x = _data()
    g = torch.Generator().manual_seed(1)
    losses = _train(lambda m, s: obj.sdar_loss(m, *obj.make_sdar_batch(x, g, MASK, p_ar=0.4, blocks=(4, 8))))
    assert sum(losses[-5:]) / 5 < 0.75 * sum(losses[:5]) / 5


def test_mask_layout():
    L, B = 8, 4
    m = obj.bd_attention_mask(L, B)
    for i in range(L):
        for j in range(L):
            assert m[i, j] == (i // B == j // B)  # noisy block bidirectional
            assert m[i, L + j] == (j // B < i // B)  # clean blocks strictly before
            assert not m[L + i, j]  # clean never sees noisy
            assert m[L + i, L + j] == (j // B <= i // B)  # clean block-causal
    ar = obj.bd_attention_mask(L, 1)  # AR rows: MASK at i sees x_<i and itself
    for i in range(L):
        assert ar[i].nonzero().flatten().tolist() == [i] + [L + j for j in range(i)]
    cc = obj.bd_attention_mask(L, B, causal_clean=True)
    assert torch.equal(cc[L:, L:], torch.tril(torch.ones(L, L, dtype=torch.bool)))


@pytest.mark.parametrize("block,p_ar", [(4, 0.0), (8, 0.0), (1, 1.0)])
def test_no_leak_from_masked_position(block, p_ar):
    """Changing the clean token under a masked position never changes any logit of its own block
    (in particular its own), while an earlier clean block does influence it (the mask is not vacuous)."""
    torch.manual_seed(0)
    model = build_model("micro", V, seed=3).eval()
    L = 16
    x = _data(1, L, seed=5)
    g = torch.Generator().manual_seed(2)
    inp, pos, attn, tg = obj.make_sdar_batch(x, g, MASK, p_ar=p_ar, blocks=(max(block, 2),),
                                             p_causal_clean=0.0, complementary=False)
    assert torch.equal(pos[0, :L], pos[0, L:])  # duplicated positions
    masked = (tg[0] != -100).nonzero().flatten().tolist()
    assert masked and all(inp[0, i] == MASK for i in masked)
    with torch.no_grad():
        base = obj.sdar_forward_logits(model, inp, pos, attn)[0]
    influenced = 0
    for i in masked:
        blk = i // block
        inp2 = inp.clone()
        inp2[0, L + i] = 4 + (int(inp2[0, L + i]) - 4 + 7) % 60
        with torch.no_grad():
            new = obj.sdar_forward_logits(model, inp2, pos, attn)[0]
        diff = (new - base).abs().amax(-1)
        assert float(diff[blk * block: (blk + 1) * block].max()) == 0.0
        if (blk + 1) * block < L:
            influenced += float(diff[(blk + 1) * block:].max()) > 0
    assert influenced > 0


def test_train_loop_resumes(tmp_path, monkeypatch):
    from s2d2.tasks import arithmetic as A
    from s2d2.tiny import train

    prose = ["Emma Woodhouse, handsome, clever, and rich, had lived nearly twenty-one years in the world. " * 4] * 40
    monkeypatch.setattr(train, "austen_split", lambda data_dir: (prose, prose[:5]))
    base = dict(out=str(tmp_path), size="micro", vocab=300, n_arith=300, batch=2, seq_len=32, log_every=1,
                eval_every=1000, acc_every=0, snap_every=0, ckpt_every=2, progress=False, bf16=False, warmup=2, threads=1)
    train.train_tiny(dict(base, stage="ar", steps=4))
    train.train_tiny(dict(base, stage="ar", steps=6))  # resumes at step 4
    log = [json.loads(ln) for ln in (tmp_path / "ar" / "log.jsonl").read_text().splitlines()]
    steps = [r["step"] for r in log if "loss" in r]
    assert steps == [1, 2, 3, 4, 5, 6]
    train.train_tiny(dict(base, stage="sdar", steps=2, export=str(tmp_path / "export")))
    cfg = json.loads((tmp_path / "export" / "config.json").read_text())
    assert cfg["mask_token_id"] == 3 and cfg["logits_alignment"] == "aligned"
    assert cfg["stop_token_ids"] == [2, 0] and cfg["block_size"] == 4
    assert (tmp_path / "export" / "model.safetensors").exists()
