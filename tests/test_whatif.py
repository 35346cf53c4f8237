"""s2d2.whatif: re-deciding recorded steps under changed thresholds (docs/algorithm.md, 'What a trace records';
invariant 12 with changes)."""
from __future__ import annotations

import pytest

from lanes_helpers import PROMPT, tiny_with_tokenizer
from s2d2.config import preset
from s2d2.whatif import what_if

GEN = 16


@pytest.fixture(scope="module")
def traces():
    import s2d2

    model = tiny_with_tokenizer()
    cfgs = {
        "threshold": preset("sdar-config-a", gen_length=GEN),
        "hysteresis": preset("sdar-config-a", gen_length=GEN, policy="score_hysteresis",
                             score_type="difference_dynamic", penalty_coef=1.0, hysteresis_on=0.5,
                             hysteresis_off=0.45),
        "ucb": preset("sdar-config-a", gen_length=GEN, policy="contextual_bandit_ucb"),
        "span": preset("sdar-config-a", gen_length=GEN, policy="mask_span_length", min_span_length=2),
        "dynamic": preset("dynamic-baseline", gen_length=8),
    }
    return {n: s2d2.generate(model, PROMPT, c, seed=1).trace for n, c in cfgs.items()}


@pytest.mark.parametrize("name", ["threshold", "hysteresis", "ucb", "span"])
def test_unchanged_thresholds_reproduce_every_decision(traces, name):
    trace = traces[name]
    w = what_if(trace)
    assert w.flipped == [] and w.first_flip is None and w.exact_until == len(trace.steps)
    for row, s in zip(w.steps, trace.steps):
        assert row.old_verify == row.new_verify == s.decision.verify
        assert row.new_score == s.decision.score and row.new_reason == s.decision.reason
        assert row.exact
    assert "No decision flips" in w.summary


def test_threshold_change_flips_exactly_the_crossing_steps(traces):
    trace = traces["threshold"]
    scores = sorted(s.decision.score for s in trace.steps)
    tau = scores[len(scores) // 2]
    w = what_if(trace, score_threshold=tau)
    expected = [s.index for s in trace.steps if (s.decision.score >= 0.0) != (s.decision.score >= tau)]
    assert expected and w.flipped == expected
    assert w.first_flip == expected[0] == w.exact_until
    assert all(r.exact == (r.index <= expected[0]) for r in w.steps)
    assert f"step {expected[0] + 1}" in w.summary and "re-run" in w.summary
    assert w.config["score_threshold"] == tau and w.changes == {"score_threshold": tau}


def _hysteresis(scores, on, off):
    state, out = False, []
    for s in scores:
        state = (s > on) if not state else not s < off
        out.append(state)
    return out


def test_hysteresis_state_is_carried_through_the_redecision(traces):
    trace = traces["hysteresis"]
    scores = [s.decision.score for s in trace.steps]
    assert [s.decision.verify for s in trace.steps] == _hysteresis(scores, 0.5, 0.45)
    ranked = sorted(scores)
    on, off = ranked[len(ranked) // 2], ranked[len(ranked) // 4]
    w = what_if(trace, hysteresis_on=on, hysteresis_off=off)
    new = _hysteresis(scores, on, off)
    assert [r.new_verify for r in w.steps] == new
    assert w.flipped == [i for i, (a, b) in enumerate(zip(new, (s.decision.verify for s in trace.steps))) if a != b]
    assert w.flipped  # the band moved enough to flip something


def test_ucb_redecision_with_new_beta_is_consistent(traces):
    trace = traces["ucb"]
    w = what_if(trace, ucb_beta=0.0)
    assert w.steps[0].new_verify is True  # the first visit to a bucket always verifies
    if w.first_flip is not None:
        assert all(not r.flipped for r in w.steps[: w.first_flip])
        assert all(not r.exact for r in w.steps[w.first_flip + 1:])


def test_estimator_parameter_recomputes_alphas(traces):
    trace = traces["threshold"]
    same = what_if(trace, negexp_beta=1.0)  # unchanged value: recorded α are used, nothing flips
    assert same.flipped == []
    low = what_if(trace, negexp_beta=0.0)  # α = 1 everywhere: K̂ = span length, so every span of ≥ 1 verifies
    assert all(r.new_verify for r in low.steps)
    assert low.flipped == [s.index for s in trace.steps if not s.decision.verify]


def test_what_if_rejects_what_it_cannot_answer(traces):
    with pytest.raises(ValueError, match="needs an S2D2 trace"):
        what_if(traces["dynamic"], score_threshold=1.0)
    with pytest.raises(ValueError, match="only policy and estimator thresholds"):
        what_if(traces["threshold"], block_length=8)
    with pytest.raises(ValueError, match="'policy'"):
        what_if(traces["threshold"], policy="always")
    with pytest.raises(ValueError, match="margin_threshold"):
        what_if(traces["threshold"], margin_threshold=0.2)  # not the trace's estimator
    with pytest.raises(ValueError, match="hysteresis_off"):
        what_if(traces["hysteresis"], hysteresis_off=2.0)


@pytest.mark.parametrize("name,changes", [("threshold", "median"), ("hysteresis", "band")])
def test_what_if_is_exact_up_to_and_including_the_first_flip(traces, name, changes):
    """A real re-run with the new thresholds takes the same decisions as the what-if until its first flip."""
    import s2d2

    from s2d2.config import DecodeConfig

    trace = traces[name]
    scores = sorted(s.decision.score for s in trace.steps)
    kw = ({"score_threshold": scores[len(scores) // 2]} if changes == "median"
          else {"hysteresis_on": scores[len(scores) // 2], "hysteresis_off": scores[len(scores) // 4]})
    w = what_if(trace, **kw)
    assert w.first_flip is not None
    rerun = s2d2.generate(tiny_with_tokenizer(), trace.header.prompt_ids, DecodeConfig.from_dict(w.config),
                          seed=trace.header.seed).trace
    k = w.first_flip
    assert [s.decision.verify for s in rerun.steps[: k + 1]] == [r.new_verify for r in w.steps[: k + 1]]
    assert [s.policy_inputs for s in rerun.steps[: k + 1]] == [s.policy_inputs for s in trace.steps[: k + 1]]
