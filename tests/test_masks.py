"""Invariants 11 (masks), 3 (B = 1 block-causal is causal) and 2 (2L first-half isolation)."""
from __future__ import annotations

import pytest
import torch
from conftest import MASK_ID, tiny_qwen3

from s2d2.models.masks import (
    block_causal_mask,
    causal_mask,
    draft_mask,
    full_mask,
    to_additive,
    verify_2l_mask,
)


def brute_2l(c: int, n: int) -> torch.Tensor:
    """The 2L table (docs/algorithm.md, 'The 2L verifier'), entry by entry."""
    m = torch.zeros(2 * n, c + 2 * n, dtype=torch.bool)
    for r in range(2 * n):
        for col in range(c + 2 * n):
            if col < c:
                m[r, col] = True
                continue
            half, j = divmod(col - c, n)
            if r < n:
                m[r, col] = half == 0 and j <= r
            else:
                i = r - n
                m[r, col] = (half == 0 and j < i) or (half == 1 and j == i)
    return m


@pytest.mark.parametrize("c", [0, 1, 5])
@pytest.mark.parametrize("n", [1, 2, 4, 7])
def test_2l_table_exact(c: int, n: int) -> None:
    m = verify_2l_mask(c, n)
    assert m.dtype == torch.bool and m.shape == (2 * n, c + 2 * n)
    assert torch.equal(m, brute_2l(c, n))
    # Invariant 2: first-half rows never see second-half columns.
    assert not m[:n, c + n :].any()
    # Every row attends to something (a fully masked bool row gives NaN under SDPA).
    assert m.any(dim=1).all()


@pytest.mark.parametrize("cache_len, prefix", [(0, 0), (3, 0), (3, 2), (6, 4)])
def test_draft_ver_rows(cache_len: int, prefix: int) -> None:
    block = 4
    m = draft_mask(cache_len, block, prefix)
    assert m.shape == (block, cache_len + block)
    assert m[:, :cache_len].all()
    for i in range(block):
        for j in range(block):
            expected = j <= i if i < prefix else True  # decoded-prefix rows causal, mask rows bidirectional
            assert bool(m[i, cache_len + j]) == expected
    if prefix == 0:
        assert torch.equal(m, full_mask(cache_len, block))


@pytest.mark.parametrize("block", [1, 2, 4, 32])
@pytest.mark.parametrize("start", [0, 3, 32, 37])
def test_block_causal_absolute_rule(block: int, start: int) -> None:
    q = 40
    m = block_causal_mask(q, block, start=start)
    for i in range(q):
        for j in range(q):
            assert bool(m[i, j]) == ((start + i) // block >= (start + j) // block)
    # Cached keys all precede `start`, so the rule admits every one of them.
    with_cache = block_causal_mask(q, block, start=start, cache_len=start)
    assert with_cache.shape == (q, start + q)
    assert with_cache[:, :start].all() and torch.equal(with_cache[:, start:], m)


def test_block_causal_is_tril_kron() -> None:
    nb, b = 3, 4
    assert torch.equal(block_causal_mask(nb * b, b), torch.kron(torch.tril(torch.ones(nb, nb)), torch.ones(b, b)).bool())


@pytest.mark.parametrize("q", [1, 5, 17])
@pytest.mark.parametrize("start", [0, 9])
def test_block_size_one_is_causal(q: int, start: int) -> None:
    """Invariant 3 (mask half)."""
    assert torch.equal(block_causal_mask(q, 1, start=start), causal_mask(0, q))
    assert torch.equal(block_causal_mask(q, 1, start=start, cache_len=start), causal_mask(start, q))


def test_causal_and_full() -> None:
    c = causal_mask(3, 4)
    assert c[:, :3].all() and torch.equal(c[:, 3:], torch.tril(torch.ones(4, 4, dtype=torch.bool)))
    assert full_mask(3, 4).all() and full_mask(3, 4).shape == (4, 7)


def test_masks_are_fresh_objects() -> None:
    builders = [
        lambda: causal_mask(2, 4), lambda: full_mask(2, 4), lambda: block_causal_mask(8, 4),
        lambda: draft_mask(2, 4, 2), lambda: verify_2l_mask(2, 4),
    ]
    for build in builders:
        a, b = build(), build()
        assert a is not b and a.data_ptr() != b.data_ptr()
        a.fill_(False)  # mutating one result must not leak into the next
        assert torch.equal(build(), b)


def test_to_additive() -> None:
    m = verify_2l_mask(2, 3)
    bias = to_additive(m, torch.float64)
    assert bias.dtype == torch.float64 and torch.equal(bias == 0, m)
    assert (bias[~m] == torch.finfo(torch.float64).min).all()


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_masks_unchanged_by_forward(attn: str) -> None:
    hf = tiny_qwen3(attn=attn)
    cache = hf.new_cache()
    hf.forward(cache, torch.arange(8), torch.arange(8), block_causal_mask(8, 4), keep=8)
    m = verify_2l_mask(8, 4)
    before = m.clone()
    ids = torch.tensor([5, 6, 7, 8] + [MASK_ID] * 4)
    pos = torch.arange(8, 12).repeat(2)
    hf.forward(cache, ids, pos, m, keep=0)
    assert torch.equal(m, before)


@pytest.mark.parametrize("attn, tol", [("sdpa", 1e-10), ("eager", 1e-6)])
@pytest.mark.parametrize("prefill", ["causal", "block"])
def test_first_half_equals_causal_forward(attn: str, tol: float, prefill: str) -> None:
    """Invariant 2: 2L rows [0, L) equal a causal forward over x-tilde on the same cache."""
    hf = tiny_qwen3(attn=attn)
    cache = hf.new_cache()
    prompt = torch.tensor([11, 22, 33, 44, 55, 66, 77, 88])
    attention = "causal" if prefill == "causal" else block_causal_mask(8, 4)
    hf.forward(cache, prompt, torch.arange(8), attention, keep=8)
    x = torch.tensor([101, 102, 103, 104])
    pos = torch.arange(8, 12)
    two_l = hf.forward(cache, torch.cat([x, torch.full((4,), MASK_ID)]), pos.repeat(2), verify_2l_mask(8, 4), keep=0)
    causal = hf.forward(cache, x, pos, "causal", keep=0)
    assert cache.get_seq_length() == 8
    assert (two_l[:4] - causal).abs().max().item() <= tol
