"""The sampling transform shared by draft, verifier and residual (s2d2/decoding/sampling.py, s2d2/models/warpers.py):
the mask token never gets mass, greedy is the plain softmax, and temperature / top-k / top-p keep what they say. The
distribution is float64 whatever the logits' dtype (the decisions' arithmetic: tests/lib/test_decision_arithmetic.py)."""
import torch

from s2d2.config import DecodeConfig
from s2d2.decoding.sampling import token_distribution

MASK = 7


def logits() -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    return torch.randn(3, 50, generator=g, dtype=torch.float64).float() * 3


def test_greedy_is_softmax_without_the_mask():
    x = logits()
    p = token_distribution(x, DecodeConfig(temperature=0.0), MASK)
    ref = x.double()
    ref[:, MASK] = -torch.inf
    assert p.dtype == torch.float64 and x.dtype == torch.float32
    assert torch.equal(p, torch.softmax(ref, -1)) and torch.all(p[:, MASK] == 0)


def test_temperature_scales_logits():
    x = logits()
    p = token_distribution(x, DecodeConfig(temperature=0.5), MASK)
    ref = x.double()
    ref[:, MASK] = -torch.inf
    torch.testing.assert_close(p, torch.softmax(ref / 0.5, -1))


def test_top_k_keeps_the_k_largest():
    x = logits()
    p = token_distribution(x, DecodeConfig(temperature=1.0, top_k=5), MASK)
    ref = x.clone()
    ref[:, MASK] = -torch.inf
    top = torch.topk(ref, 5, -1).indices
    assert torch.equal((p > 0).sum(-1), torch.full((3,), 5))
    assert torch.all(p.gather(-1, top) > 0)
    torch.testing.assert_close(p.sum(-1), torch.ones(3, dtype=torch.float64))


def test_top_p_keeps_the_smallest_set_with_that_mass():
    x = logits()
    p = token_distribution(x, DecodeConfig(temperature=1.0, top_p=0.8), MASK)
    ref = x.clone()
    ref[:, MASK] = -torch.inf
    full = torch.softmax(ref, -1)
    for row in range(3):
        kept = p[row] > 0
        order = torch.argsort(full[row], descending=True)
        n = int(kept.sum())
        assert set(order[:n].tolist()) == set(torch.nonzero(kept).flatten().tolist())  # the most probable ones
        assert full[row, order[:n]].sum() >= 0.8 > full[row, order[: n - 1]].sum()  # and no fewer would do
        assert not kept[MASK]


def test_top_p_always_keeps_the_top_token():
    x = logits()
    p = token_distribution(x, DecodeConfig(temperature=1.0, top_p=1e-6), MASK)
    assert torch.equal((p > 0).sum(-1), torch.ones(3, dtype=torch.long))
    assert torch.equal(p.argmax(-1), torch.where(torch.arange(50) == MASK, -torch.inf, x).argmax(-1))
