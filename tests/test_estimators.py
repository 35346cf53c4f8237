"""Estimators and K̂ (docs/algorithm.md, 'Acceptance estimators', 'Expected accepted tokens and the score';
invariant 9)."""
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from s2d2.config import ESTIMATORS, DecodeConfig
from s2d2.estimators import acceptance_alphas, expected_accepted_tokens, normalized_entropy, top2_margin

# Hand-made rows: a skewed row with a zero, a one-hot row, a uniform row, a near-tie row.
PROBS = torch.tensor(
    [
        [0.5, 0.3, 0.2, 0.0],
        [1.0, 0.0, 0.0, 0.0],
        [0.25, 0.25, 0.25, 0.25],
        [0.52, 0.48, 0.0, 0.0],
    ],
    dtype=torch.float64,
)
P_DRAFT = PROBS.max(-1).values  # greedy drafts: p_i is the top probability
LN4 = math.log(4)


def _h(row):
    return -sum(p * math.log(p) for p in row if p > 0) / LN4


H = [_h(r) for r in PROBS.tolist()]  # [0.7428.., 0, 1, 0.4994..]
M = [0.2, 1.0, 0.0, 0.04]


def test_normalized_entropy_table():
    assert normalized_entropy(PROBS).tolist() == pytest.approx(H, abs=1e-12)
    assert H[1] == 0 and H[2] == pytest.approx(1.0)


def test_normalized_entropy_edge_cases():
    assert normalized_entropy(torch.ones(3, 1)).tolist() == [0.0, 0.0, 0.0]  # V = 1
    assert normalized_entropy(torch.zeros(0, 5)).shape == (0,)
    # half precision is computed in float32 and stays within [0, 1]
    h = normalized_entropy(torch.full((2, 7), 1 / 7, dtype=torch.bfloat16))
    assert h.dtype == torch.float32 and float(h.max()) <= 1.0


def test_top2_margin_table():
    assert top2_margin(PROBS).tolist() == pytest.approx(M, abs=1e-12)
    assert top2_margin(torch.tensor([[1.0]])).tolist() == [1.0]


def _alphas(estimator, **kw):
    cfg = DecodeConfig(estimator=estimator, **kw).validate()
    return acceptance_alphas(cfg, PROBS, P_DRAFT).tolist()


def test_hard_margin_threshold():
    assert _alphas("hard_margin_threshold") == [1.0, 1.0, 0.0, 0.0]  # τ_m = 0.05; 0.04 fails
    assert _alphas("hard_margin_threshold", margin_threshold=0.01) == [1.0, 1.0, 0.0, 1.0]
    assert _alphas("hard_margin_threshold", margin_threshold=0.2) == [0.0, 1.0, 0.0, 0.0]  # strict >


def test_hard_entropy_threshold():
    assert _alphas("hard_entropy_threshold") == [0.0, 1.0, 0.0, 0.0]  # τ_H = 0.1
    assert _alphas("hard_entropy_threshold", entropy_threshold=0.75) == [1.0, 1.0, 0.0, 1.0]
    assert _alphas("hard_entropy_threshold", entropy_threshold=0.0) == [0.0, 0.0, 0.0, 0.0]  # strict <


def test_soft_confidence_power():
    want = [0.5**0.8, 1.0, 0.25**0.8, 0.52**0.8]
    assert _alphas("soft_confidence_power") == pytest.approx(want, abs=1e-12)
    assert _alphas("soft_confidence_power", confidence_power=2.0) == pytest.approx([0.25, 1.0, 0.0625, 0.2704])


def test_soft_clipped_linear_margin():
    assert _alphas("soft_clipped_linear_margin") == pytest.approx(M, abs=1e-12)
    assert _alphas("soft_clipped_linear_margin", margin_scale=4.0) == pytest.approx([0.8, 1.0, 0.0, 0.16])
    assert _alphas("soft_clipped_linear_margin", margin_scale=10.0) == pytest.approx([1.0, 1.0, 0.0, 0.4])


def test_soft_entropy_negexp():
    assert _alphas("soft_entropy_negexp") == pytest.approx([math.exp(-h) for h in H], abs=1e-12)
    a = _alphas("soft_entropy_negexp", negexp_beta=3.0)
    assert a == pytest.approx([math.exp(-3 * h) for h in H], abs=1e-12)
    assert a[1] == 1.0 and a[2] == pytest.approx(math.exp(-3))
    assert _alphas("soft_entropy_negexp", negexp_beta=0.0) == [1.0] * 4


def test_soft_renyi_2_entropy():
    assert _alphas("soft_renyi_2_entropy") == pytest.approx([0.38, 1.0, 0.25, 0.52**2 + 0.48**2], abs=1e-12)


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_every_estimator_in_unit_interval_and_vectorized(estimator):
    torch.manual_seed(0)
    probs = torch.softmax(torch.randn(64, 50) * 3, -1)
    p = probs.max(-1).values
    a = acceptance_alphas(DecodeConfig(estimator=estimator), probs, p)
    assert a.shape == (64,) and bool(((a >= 0) & (a <= 1)).all())
    # row i's alpha depends on row i only
    b = acceptance_alphas(DecodeConfig(estimator=estimator), probs[10:20], p[10:20])
    assert torch.allclose(a[10:20], b)


def test_acceptance_alphas_shape_check():
    with pytest.raises(ValueError):
        acceptance_alphas(DecodeConfig(), PROBS, P_DRAFT[:2])


@settings(max_examples=60, deadline=None)
@given(st.floats(0.0, 50.0), st.integers(1, 40), st.integers(1, 6))
def test_negexp_range(beta, vocab, n):
    """Invariant 9: negexp ∈ [e^−β, 1] for any distribution, including uniform and one-hot rows."""
    g = torch.Generator().manual_seed(vocab * 7 + n)
    logits = torch.randn(n, vocab, generator=g, dtype=torch.float64) * 5
    probs = torch.cat([torch.softmax(logits, -1), torch.full((1, vocab), 1 / vocab, dtype=torch.float64)])
    a = acceptance_alphas(DecodeConfig(negexp_beta=beta), probs, probs.max(-1).values)
    assert bool((a <= 1.0).all()) and bool((a >= math.exp(-beta) - 1e-12).all())


# -- K̂ ----------------------------------------------------------------------------------------------------------

def test_k_hat_values():
    assert expected_accepted_tokens([]) == 0.0
    empty = expected_accepted_tokens(torch.empty(0))
    assert isinstance(empty, torch.Tensor) and empty.shape == () and float(empty) == 0.0
    assert expected_accepted_tokens([0.5, 0.5]) == pytest.approx(0.75)
    assert expected_accepted_tokens([0.9, 0.8, 0.0, 1.0]) == pytest.approx(0.9 + 0.72)
    assert expected_accepted_tokens([1.5, -0.2, 1.0]) == pytest.approx(1.0)  # clipped to [0, 1]
    assert isinstance(expected_accepted_tokens([0.3]), float)
    one = expected_accepted_tokens(torch.tensor([0.3, 1.0], dtype=torch.float32))
    assert one.shape == () and one.dtype == torch.float64 and float(one) == pytest.approx(0.6)
    batched = expected_accepted_tokens(torch.tensor([[1.0, 1.0], [0.5, 0.5]]))
    assert batched.tolist() == pytest.approx([2.0, 0.75])


@given(st.integers(0, 64))
def test_k_hat_all_ones_is_span_length(n):
    assert expected_accepted_tokens([1.0] * n) == n
    assert float(expected_accepted_tokens(torch.ones(n))) == n


@given(st.lists(st.floats(0.0, 1.0), max_size=32))
def test_k_hat_zero_when_first_alpha_zero(rest):
    assert expected_accepted_tokens([0.0] + rest) == 0.0


@given(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=24), st.data())
def test_k_hat_monotone_in_every_alpha(alphas, data):
    i = data.draw(st.integers(0, len(alphas) - 1))
    bigger = data.draw(st.floats(alphas[i], 1.0))
    raised = list(alphas)
    raised[i] = bigger
    k0, k1 = expected_accepted_tokens(alphas), expected_accepted_tokens(raised)
    assert k1 >= k0
    assert 0.0 <= k0 <= len(alphas)
