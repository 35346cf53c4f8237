"""Routing policies (docs/algorithm.md, 'Expected accepted tokens and the score', 'Routing policies',
'Paper configurations as presets'; invariants 10 and 12)."""
import dataclasses
import json
import math
import random

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from s2d2 import trace as trace_mod
from s2d2.config import POLICIES, DecodeConfig, preset
from s2d2.estimators import acceptance_alphas, expected_accepted_tokens
from s2d2.policies import (
    Always,
    ContextualBanditUCB,
    MaskSpanLength,
    Never,
    ScoreHysteresis,
    ScoreThreshold,
    make_policy,
    redecide,
    score,
    ucb_bin,
)
from s2d2.trace.fields import load_as
from s2d2.trace import PolicyDecision, PolicyInputs


def inp(k_hat=1.0, n_hi=0, span_len=1, alphas=None, window_len=4, progress=0.0, mean_entropy=0.0):
    alphas = [1.0] * span_len if alphas is None else alphas
    return PolicyInputs(span_len=span_len, alphas=alphas, k_hat=k_hat, n_hi=n_hi, window_len=window_len,
                        progress=progress, mean_entropy=mean_entropy)


def from_alphas(alphas, n_hi=0, **kw):
    return inp(k_hat=expected_accepted_tokens(alphas), n_hi=n_hi, span_len=len(alphas), alphas=list(alphas), **kw)


def roundtrip(obj):
    """Through the trace schema's JSON encoding and back, as a saved trace would be."""
    return load_as(type(obj), json.loads(as_json(obj)), "x")


def as_json(obj):
    """The JSON a trace stores. Free-form `details` keep ±inf as the strings "inf"/"-inf" after a load (trace.py
    restores non-finite floats only in typed float fields), so decisions are compared in this encoded form."""
    return json.dumps(trace_mod.encode(obj), allow_nan=False, sort_keys=True)


# -- score and simple policies ----------------------------------------------------------------------------------

def test_score_static_dynamic_and_empty_span():
    static = DecodeConfig(score_type="difference_static", penalty_coef=1.5)
    dynamic = DecodeConfig(score_type="difference_dynamic", penalty_coef=2.0)
    assert score(static, 2.0, 7, 3) == 0.5
    assert score(dynamic, 2.0, 3, 3) == -4.0
    assert score(static, 0.0, 0, 0) == -math.inf and score(dynamic, 0.0, 0, 0) == -math.inf


def test_score_threshold_reason_and_details():
    cfg = DecodeConfig(policy="score_threshold", score_threshold=0.0, penalty_coef=2.0)
    d = make_policy(cfg).decide(inp(k_hat=1.73, n_hi=0, span_len=2))
    assert d.verify and d.score == pytest.approx(1.73) and d.policy == "score_threshold"
    assert d.reason == "s = K̂ − c·N_hi = 1.73 − 2·0 = 1.73 ≥ τ 0.00 → verify"
    assert d.details["k_hat"] == 1.73 and d.details["n_hi"] == 0 and d.details["score_threshold"] == 0.0
    d = make_policy(cfg).decide(inp(k_hat=1.73, n_hi=1, span_len=2))
    assert not d.verify and d.reason.endswith("< τ 0.00 → skip")
    d = make_policy(cfg).decide(inp(k_hat=0.0, span_len=0, alphas=[]))
    assert not d.verify and d.score == -math.inf and "empty span" in d.reason
    assert roundtrip(d).score == -math.inf and as_json(roundtrip(d)) == as_json(d)  # -inf survives a saved trace


def test_score_threshold_equality_verifies_and_infinite_threshold_never():
    cfg = DecodeConfig(policy="score_threshold", score_threshold=1.0, score_type="difference_static",
                       penalty_coef=1.0)
    assert make_policy(cfg).decide(inp(k_hat=2.0)).verify  # s = 1 ≥ 1
    never = cfg.replace(score_threshold=math.inf)
    assert not make_policy(never).decide(inp(k_hat=100.0, span_len=100)).verify


def test_mask_span_length_always_never():
    p = make_policy(DecodeConfig(policy="mask_span_length", min_span_length=3))
    assert [p.decide(inp(span_len=n)).verify for n in (1, 2, 3, 4)] == [False, False, True, True]
    assert p.decide(inp(span_len=3)).reason == "span |C| = 3 ≥ τ_span 3 → verify"
    assert p.decide(inp(span_len=2)).score is None
    assert make_policy(DecodeConfig(policy="always")).decide(inp(span_len=0)).verify
    assert not make_policy(DecodeConfig(policy="never")).decide(inp(span_len=99)).verify


def test_make_policy_covers_every_config_policy():
    classes = [MaskSpanLength, ScoreThreshold, ScoreHysteresis, ContextualBanditUCB, Always, Never]
    for name, cls in zip(POLICIES, classes):
        p = make_policy(DecodeConfig(policy=name))
        assert type(p) is cls and p.name == name


def test_update_returns_tokens_per_forward():
    p = make_policy(DecodeConfig(policy="score_threshold"))
    verify = PolicyDecision("x", True, 0.0, "", {})
    skip = PolicyDecision("x", False, 0.0, "", {})
    assert p.update(verify, 3) == 1.5 and p.update(skip, 3) == 3.0


# -- hysteresis (invariant 10) ------------------------------------------------------------------------------------

HYST = DecodeConfig(policy="score_hysteresis", score_type="difference_static", penalty_coef=2.0,
                    hysteresis_on=0.0, hysteresis_off=-1.0)  # s = K̂ − 2, band [−1, 0]


@pytest.mark.parametrize(
    "start_on, s, strict, verify",
    [
        (False, 0.5, True, True),  # OFF, s > τ_on -> ON
        (False, 0.0, True, False),  # OFF, s == τ_on, strict -> stays OFF
        (False, 0.0, False, True),  # OFF, s == τ_on, non-strict (>=) -> ON
        (False, -0.5, True, False),  # OFF, inside the band -> OFF
        (False, -0.5, False, False),
        (True, -1.5, True, False),  # ON, s < τ_off -> OFF
        (True, -1.0, True, True),  # ON, s == τ_off -> stays ON (strict <)
        (True, -1.0, False, True),
        (True, -0.5, True, True),  # ON, inside the band -> ON
        (True, 3.0, True, True),
    ],
)
def test_hysteresis_table(start_on, s, strict, verify):
    p = make_policy(HYST.replace(hysteresis_strict=strict))
    if start_on:
        assert p.decide(inp(k_hat=10.0)).verify  # drive it ON through the public API
    d = p.decide(inp(k_hat=s + 2.0))
    assert d.verify is verify and p.is_on is verify
    assert d.details["state_before"] == ("ON" if start_on else "OFF")
    assert d.details["state_after"] == ("ON" if verify else "OFF")
    assert d.details["band"] == [-1.0, 0.0] and d.details["strict"] is strict
    assert d.details["on_comparison"] == (">" if strict else ">=")
    assert d.score == pytest.approx(s)


def test_hysteresis_persists_across_calls_and_resets():
    p = make_policy(HYST)
    scores = [-0.5, 0.5, -0.9, -0.99, -1.0, -1.01, -0.5, 0.0, 0.01, -2.0]
    got = [p.decide(inp(k_hat=s + 2.0)).verify for s in scores]
    assert got == [False, True, True, True, True, False, False, False, True, False]
    p.decide(inp(k_hat=5.0))
    assert p.is_on
    p.update(PolicyDecision("score_hysteresis", True, 3.0, "", {}), 4)  # update never changes the state
    assert p.is_on
    p.reset()
    assert not p.is_on and not p.decide(inp(k_hat=1.5)).verify


def test_hysteresis_empty_span_turns_off():
    p = make_policy(HYST)
    p.decide(inp(k_hat=5.0))
    d = p.decide(inp(k_hat=0.0, span_len=0, alphas=[]))
    assert not d.verify and d.details["state_after"] == "OFF" and d.score == -math.inf


def test_hysteresis_reason():
    p = make_policy(HYST)
    d = p.decide(inp(k_hat=2.0))
    assert d.reason == "OFF: s = K̂ − c = 2.00 − 2 = 0.00 ≤ τ_on 0.00 → skip (OFF)"
    d = p.decide(inp(k_hat=2.5))
    assert d.reason == "OFF: s = K̂ − c = 2.50 − 2 = 0.50 > τ_on 0.00 → verify (ON)"


# -- UCB (invariant 10) -------------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "v, lo, hi, n, want",
    [
        (0.0, 0.0, 1.0, 2, 0),
        (0.4999, 0.0, 1.0, 2, 0),
        (0.5, 0.0, 1.0, 2, 1),  # lower edge belongs to the upper bin
        (1.0, 0.0, 1.0, 2, 1),  # v = hi clamps to n − 1
        (-3.0, 0.0, 1.0, 2, 0),  # clip below
        (7.0, 0.0, 1.0, 2, 1),  # clip above
        (0.74, 0.0, 1.0, 4, 2),
        (0.75, 0.0, 1.0, 4, 3),
        (0.9, 0.0, 1.0, 1, 0),  # n <= 1
        (0.9, 0.0, 1.0, 0, 0),
        (3.0, 1.0, 1.0, 4, 0),  # hi <= lo (window of 1)
        (3.0, 2.0, 1.0, 4, 0),
        (float("nan"), 0.0, 1.0, 4, 0),
        # span bins over [1, B]
        (1, 1, 4, 2, 0),
        (2, 1, 4, 2, 0),  # (2−1)/3·2 = 0.67
        (3, 1, 4, 2, 1),  # 1.33
        (4, 1, 4, 2, 1),
        (4, 1, 16, 4, 0),  # 0.8
        (5, 1, 16, 4, 1),  # 1.07
    ],
)
def test_ucb_bin_edges(v, lo, hi, n, want):
    assert ucb_bin(v, lo, hi, n) == want


def test_ucb_bins_and_bucket():
    p = make_policy(DecodeConfig(policy="contextual_bandit_ucb"))
    assert p.bins(inp(span_len=0, window_len=4)) == [0, 0, 0]  # empty span counts as 1
    assert p.bins(inp(span_len=4, window_len=4, progress=0.25, mean_entropy=0.6)) == [1, 0, 1]
    assert p.bucket([1, 0, 1]) == 5 and p.n_buckets == 8
    q = make_policy(DecodeConfig(policy="contextual_bandit_ucb", ucb_span_bins=3, ucb_progress_bins=4,
                                 ucb_entropy_bins=5))
    assert q.bucket([2, 3, 4]) == 59 == q.n_buckets - 1
    assert q.bucket([0, 0, 1]) == 1 and q.bucket([0, 1, 0]) == 5 and q.bucket([1, 0, 0]) == 20


def test_ucb_first_visit_verifies_second_skips():
    p = make_policy(DecodeConfig(policy="contextual_bandit_ucb"))
    ctx_a, ctx_b = inp(span_len=1, window_len=4), inp(span_len=4, window_len=4, progress=0.9, mean_entropy=0.9)
    d1 = p.decide(ctx_a)
    assert d1.verify and d1.details["ucb"] == {"skip": math.inf, "verify": math.inf}
    p.update(d1, 2)
    d2 = p.decide(ctx_a)
    assert not d2.verify and d2.details["ucb"]["skip"] == math.inf
    p.update(d2, 1)
    d3 = p.decide(ctx_b)  # a new bucket starts over: verify first
    assert d3.verify and d3.details["bucket"] == 7 and d3.details["t"] == 3


def test_ucb_values_numerically():
    p = make_policy(DecodeConfig(policy="contextual_bandit_ucb", ucb_beta=1.0))
    x = inp()
    d = p.decide(x)  # t=1: both unvisited
    assert d.verify and p.update(d, 3) == 1.5
    d = p.decide(x)  # t=2: skip unvisited
    assert not d.verify and p.update(d, 1) == 1.0
    d = p.decide(x)  # t=3: verify 1.5 + sqrt(ln 3), skip 1.0 + sqrt(ln 3)
    b3 = math.sqrt(math.log(3))
    assert d.details["ucb"] == pytest.approx({"skip": 1.0 + b3, "verify": 1.5 + b3})
    assert d.verify and p.update(d, 1) == 0.5
    d = p.decide(x)  # t=4: verify mean 1.0, n=2; skip mean 1.0, n=1
    assert d.details["t"] == 4 and d.details["counts"] == {"skip": 1, "verify": 2}
    assert d.details["means"] == pytest.approx({"skip": 1.0, "verify": 1.0})
    want = {"skip": 1.0 + math.sqrt(math.log(4)), "verify": 1.0 + math.sqrt(math.log(4) / 2)}
    assert d.details["ucb"] == pytest.approx(want)
    assert not d.verify
    assert as_json(roundtrip(d)) == as_json(d)


def test_ucb_no_bonus_at_t1_ties_verify_and_clock_ticks_without_updates():
    p = make_policy(DecodeConfig(policy="contextual_bandit_ucb", ucb_beta=5.0))
    p.counts["skip"][0] = p.counts["verify"][0] = 1
    p.sums["skip"][0] = p.sums["verify"][0] = 0.7
    d = p.decide(inp())  # t=1: ln t = 0 -> no bonus; equal means tie -> verify
    assert d.details["ucb"] == {"skip": 0.7, "verify": 0.7} and d.verify
    for _ in range(3):
        d = p.decide(inp())
    assert d.details["t"] == 4
    p.reset()
    assert p.t == 0 and p.decide(inp()).details["counts"] == {"skip": 0, "verify": 0}


# -- paper presets (docs/algorithm.md, 'Paper configurations as presets') ---------------------------------

@given(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=16), st.integers(0, 16))
def test_sdar_config_b_always_verifies(alphas, n_hi):
    p = make_policy(preset("sdar-config-b"))
    assert p.decide(from_alphas(alphas, n_hi=n_hi, window_len=16)).verify


def test_sdar_config_a_verifies_iff_k_hat_at_least_one():
    p = make_policy(preset("sdar-config-a"))
    assert not p.decide(from_alphas([0.999])).verify  # a 1-token span needs α = 1
    assert p.decide(from_alphas([1.0])).verify
    assert p.decide(from_alphas([0.62, 0.62])).verify  # two equal α need α ≥ 0.618
    assert not p.decide(from_alphas([0.61, 0.61])).verify
    assert not p.decide(from_alphas([0.61, 0.61], n_hi=3)).verify  # static score ignores N_hi


def _negexp_inputs(seed, span_len, n_hi, cfg):
    g = torch.Generator().manual_seed(seed)
    probs = torch.softmax(torch.randn(span_len, 30, generator=g, dtype=torch.float64) * 4, -1)
    alphas = acceptance_alphas(cfg, probs, probs.max(-1).values).tolist()
    return from_alphas(alphas, n_hi=n_hi, window_len=4)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 4), st.integers(0, 4)), min_size=1, max_size=30))
def test_fastdllm_config_a_never_turns_off_once_on(steps):
    cfg = preset("fastdllm-config-a")
    p = make_policy(cfg)
    assert p.decide(_negexp_inputs(0, 4, 0, cfg)).verify  # K̂ = 2.25 > 1 + N_hi: switches ON
    for seed, span_len, n_hi in steps:
        assert p.decide(_negexp_inputs(seed, span_len, n_hi, cfg)).verify


def test_fastdllm_config_a_worst_case_and_config_b_turn_off():
    a = make_policy(preset("fastdllm-config-a"))
    a.decide(inp(k_hat=4.0, span_len=4))  # s = 4 > 1 -> ON
    worst = from_alphas([math.exp(-1)], n_hi=4)  # uniform draft, the most high-confidence masks
    assert a.decide(worst).verify and a.is_on
    b = make_policy(preset("fastdllm-config-b"))
    b.decide(inp(k_hat=4.0, span_len=4))
    assert b.decide(from_alphas([math.exp(-1)], n_hi=5)).verify  # s = 0.37 − 5 > −5
    assert not b.decide(from_alphas([math.exp(-1)], n_hi=6)).verify  # s < −5 -> OFF


def test_fastdllm_config_c_span_of_eight():
    p = make_policy(preset("fastdllm-config-c"))
    assert [p.decide(inp(span_len=n, window_len=32)).verify for n in (1, 7, 8, 32)] == [False, False, True, True]


# -- replay and what-if (invariant 12) ----------------------------------------------------------------------------

def _record(cfg, n_steps, seed):
    """Run a policy on random inputs, as the decoder would, and keep what a trace stores."""
    rng = random.Random(seed)
    policy = make_policy(cfg)
    records, decisions = [], []
    for _ in range(n_steps):
        span = rng.randint(0, 6)
        alphas = [rng.random() for _ in range(span)]
        x = inp(k_hat=expected_accepted_tokens(alphas), n_hi=rng.randint(0, 4), span_len=span, alphas=alphas,
                window_len=6, progress=rng.random(), mean_entropy=rng.random())
        d = policy.decide(x)
        reward = policy.update(d, rng.randint(1, 4) if d.verify else rng.randint(1, 2))
        records.append((roundtrip(x), reward))
        decisions.append(roundtrip(d))  # as loaded from a saved trace
    return records, decisions


REPLAY_CFGS = [
    DecodeConfig(policy="mask_span_length", min_span_length=3),
    DecodeConfig(policy="score_threshold", score_threshold=-0.5),
    DecodeConfig(policy="score_hysteresis", hysteresis_on=0.0, hysteresis_off=-3.0, hysteresis_strict=False),
    DecodeConfig(policy="score_hysteresis", score_type="difference_static", penalty_coef=1.0),
    DecodeConfig(policy="contextual_bandit_ucb"),
    DecodeConfig(policy="contextual_bandit_ucb", ucb_span_bins=3, ucb_progress_bins=1, ucb_entropy_bins=4,
                 ucb_beta=0.5),
    DecodeConfig(policy="always"),
    DecodeConfig(policy="never"),
]


@pytest.mark.parametrize("cfg", REPLAY_CFGS, ids=lambda c: c.policy)
def test_redecide_reproduces_every_decision(cfg):
    records, decisions = _record(cfg, 200, seed=1)
    replayed = redecide(cfg, records)
    assert [as_json(d) for d in replayed] == [as_json(d) for d in decisions]  # verify, score, reason, details
    assert [d.verify for d in redecide(cfg, iter(records))] == [d.verify for d in decisions]  # any iterable
    assert len({d.verify for d in decisions}) == (1 if cfg.policy in ("always", "never") else 2)


@settings(max_examples=40, deadline=None)
@given(st.floats(-3.0, 3.0), st.floats(-3.0, 3.0), st.integers(0, 10**6))
def test_what_if_threshold_flips_exactly_the_crossing_steps(tau0, tau1, seed):
    cfg = DecodeConfig(policy="score_threshold", score_threshold=tau0)
    records, recorded = _record(cfg, 60, seed)
    changed = redecide(cfg.replace(score_threshold=tau1), records)
    lo, hi = min(tau0, tau1), max(tau0, tau1)
    flipped = [i for i, (a, b) in enumerate(zip(recorded, changed)) if a.verify != b.verify]
    crossing = [i for i, d in enumerate(recorded) if lo <= d.score < hi]
    assert flipped == crossing
    assert [d.score for d in changed] == [d.score for d in recorded]


# -- always_verifies: a step whose policy promises to verify prepares no skip ---------------------------------------

PROMISES = [
    (dict(policy="always"), True), (dict(policy="never"), False),
    (dict(policy="mask_span_length", min_span_length=1), True),
    (dict(policy="mask_span_length", min_span_length=2), False),
    (dict(policy="score_threshold", score_type="difference_static", penalty_coef=0.0, score_threshold=0.0), True),
    (dict(policy="score_threshold", score_type="difference_static", penalty_coef=1.0, score_threshold=-1.0), True),
    (dict(policy="score_threshold", score_type="difference_static", penalty_coef=1.0, score_threshold=0.0), False),
    (dict(policy="score_threshold", score_type="difference_dynamic", penalty_coef=0.0, score_threshold=0.0), False),
    (dict(policy="score_hysteresis"), False), (dict(policy="contextual_bandit_ucb"), False),
    (dict(policy="cost_aware"), False),
]


@pytest.mark.parametrize("kw,promise", PROMISES)
def test_always_verifies_is_a_promise_decide_keeps(kw, promise):
    policy = make_policy(DecodeConfig(**kw))
    assert policy.always_verifies() is promise
    if promise:  # any span with any α and any N_hi verifies
        rng = random.Random(0)
        for _ in range(200):
            alphas = [rng.random() ** rng.choice((0.1, 1, 10)) for _ in range(rng.randint(1, 16))]
            assert policy.decide(from_alphas(alphas, n_hi=rng.randint(0, 16))).verify
    assert make_policy(preset("sdar-config-b")).always_verifies() and not make_policy(
        preset("sdar-config-a")).always_verifies()


def test_as_float_reads_any_number_an_upload_may_hold():
    """A config value in an uploaded trace may be an int too large for a float (found by the upload fuzzer)."""
    from s2d2.trace.fields import as_float

    assert as_float(10 ** 400) == math.inf and as_float(-(10 ** 400)) == -math.inf
    assert as_float(3) == 3.0 and as_float(0.5) == 0.5 and as_float("-inf") == -math.inf
    assert math.isnan(as_float("nan")) and as_float([1]) is None
    assert as_float(True) is None and as_float(None) is None and as_float("3") is None
