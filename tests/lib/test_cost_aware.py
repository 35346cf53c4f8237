"""Routing in seconds (issue 21): the measured cost model, the cost table in the trace header, the `cost_aware`
policy, and its determinism under replay and what-if (invariant 12, docs/algorithm.md, 'Invariants')."""
from __future__ import annotations

import json
import math

import pytest

import s2d2
from tests.support.tiny_models import tiny_qwen2, tiny_qwen3
from tests.support.golden_cases import stable
from s2d2 import DecodeConfig, Trace
from s2d2.models.costs import CostModel, calibration_shapes, theil_sen
from s2d2.policies import make_policy, redecide, uses_costs
from s2d2.policies.cost_aware import CostAware
from s2d2.trace import CostTable, ForwardCost, PolicyInputs, StepCosts
from s2d2.whatif import what_if
from tests.support.tiny_models import sharpen

PROMPT = list(range(5, 15))
COST = dict(method="s2d2", policy="cost_aware", block_length=8, gen_length=24, cache_ver=True, draft_ver=True)


def table(draft=(1e-3, 1e-5), verify=(1e-3, 2e-5), **others) -> CostTable:
    kinds = [ForwardCost("draft", *draft, 5), ForwardCost("verify_2l", *verify, 5)]
    kinds += [ForwardCost(k, *v, 5) for k, v in others.items()]
    return CostTable("given", 0, kinds)


@pytest.fixture(scope="module")
def aligned():
    return sharpen(tiny_qwen3(seed=0))


# -- the cost model ---------------------------------------------------------------------------------------------

def test_theil_sen_ignores_an_outlier_and_never_slopes_down():
    points = [(q, 2.0 + 0.5 * q) for q in (1, 2, 4, 8, 16)] + [(3, 500.0)]
    base, slope = theil_sen(points)
    assert math.isclose(slope, 0.5) and math.isclose(base, 2.0)
    assert theil_sen([(4, 3.0), (8, 1.0)]) == (2.0, 0.0)  # slope clamped at 0: the median level
    assert theil_sen([(4, 3.0), (4, 5.0)]) == (4.0, 0.0)  # one query count: a flat line at the median


def test_cost_model_fits_medians_of_a_bounded_window():
    m = CostModel(window=5)
    for q, base in ((4, 1.0), (8, 2.0), (16, 4.0)):
        for t in (base, base, base, 99 * base, base):  # one slow forward per shape changes nothing
            m.observe("draft", q, t)
    fit = m.fit("draft")
    assert math.isclose(fit.per_query_s, 0.25) and math.isclose(fit.base_s, 0.0, abs_tol=1e-12) and fit.samples == 15
    assert math.isclose(m.cost("draft", 12), 3.0)
    for _ in range(5):  # the window keeps the last 5 timings of a shape only
        m.observe("draft", 4, 3.0)
    assert m.samples("draft") == 15 and m.fit("draft").per_query_s < 0.25
    m.observe("draft", 0, 1.0), m.observe("nonsense", 4, 1.0), m.observe("draft", 4, float("nan"))
    assert m.samples("draft") == 15


def test_cost_table_padding_fallbacks_and_nominal():
    t = CostTable("given", 8, [ForwardCost("draft", 1.0, 0.5, 3)])
    assert t.cost("draft", 3) == 1.0 + 0.5 * 4 and t.cost("draft", 9) == 1.0 + 0.5 * 9  # padded up to 8 only
    assert t.cost("verify_2l", 2) == t.cost("draft", 2) and t.cost("commit+draft", 5) == t.cost("draft", 8)
    assert CostTable("given", 0, []).cost("draft", 4) > 0
    nominal = CostTable.nominal()
    assert nominal.source == "nominal" and nominal.cost("verify_2l", 32) == nominal.cost("draft", 1)
    padded = CostModel(padded_up_to=512)
    padded.observe("draft", 5, 1.0)
    assert padded.shapes("draft") == {8} and padded.table().padded_up_to == 512


def test_calibration_times_every_shape_once():
    model = tiny_qwen3(seed=3)
    shapes = calibration_shapes([8], shifted=False)
    assert shapes == {"draft": [2, 4, 8], "verify_2l": [4, 8, 16], "commit": [2, 8], "commit+draft": [10, 16]}
    assert calibration_shapes([4], shifted=True)["verify_causal"] == [1, 2, 4]
    assert model.cost_table().source == "nominal"  # nothing timed yet
    assert model.calibrate_costs([8]) > 0
    for kind, qs in shapes.items():
        assert model.costs.shapes(kind) == set(qs)
    assert model.calibrate_costs([8]) == 0.0  # every shape has timings: nothing to do
    assert model.cost_table().source == "measured" and model.cost("verify_2l", 16) > 0


# -- the policy -------------------------------------------------------------------------------------------------

def inputs(alphas, n_hi, skip, draft_s=1e-3, verify_s=1e-3, min_tokens=1, prefix=None) -> PolicyInputs:
    k_hat = sum(math.prod(alphas[: i + 1]) for i in range(len(alphas)))
    prefix = min(n_hi, skip) if prefix is None else prefix
    return PolicyInputs(len(alphas), list(alphas), k_hat, n_hi, 8, 0.0, 0.1,
                        StepCosts(8, draft_s, 16, verify_s, skip, min_tokens, prefix))


def test_cost_aware_compares_tokens_per_second():
    p = make_policy(DecodeConfig(policy="cost_aware"))
    # verify: E = K̂ + 1 − Πα = 1.75 + 0.25 = 2.0 tokens in 2 ms; skip: 1 sure token in 1 ms -> s = 2 − 2 = 0
    d = p.decide(inputs([1.0, 0.75], n_hi=1, skip=1))
    assert d.verify and math.isclose(d.score, 0.0, abs_tol=1e-12)
    assert d.details["expected_tokens"] == 2.0 and d.details["verify_tokens_per_s"] == 1000.0
    assert not p.decide(inputs([1.0, 1.0, 1.0], n_hi=2, skip=2)).verify  # 2 sure tokens in 1 ms beat 3 in 2 ms
    assert p.decide(inputs([1.0, 1.0, 1.0], n_hi=2, skip=2, verify_s=1e-4)).verify  # ... but not 3 in 1.1 ms
    # a skip that could only commit unsure drafts is worth nothing, so it verifies; "all" counts it
    unsure = inputs([0.4], n_hi=0, skip=1)
    assert p.decide(unsure).verify
    assert not make_policy(DecodeConfig(policy="cost_aware", cost_skip_value="all")).decide(unsure).verify
    # "prefix" (the default) credits only the span's leading sure drafts; "confident" every sure pick
    split = inputs([1.0, 1.0, 1.0], n_hi=2, skip=2, prefix=0)  # 2 sure drafts, neither at the span's front
    assert p.decide(split).verify and p.decide(split).details["skip_value"] == 0
    assert not make_policy(DecodeConfig(policy="cost_aware", cost_skip_value="confident")).decide(split).verify
    assert not make_policy(DecodeConfig(policy="cost_aware", cost_threshold=0.5)).decide(
        inputs([1.0, 0.75], n_hi=1, skip=1)).verify
    empty = PolicyInputs(0, [], 0.0, 0, 8, 0.0, 0.0, StepCosts(8, 1e-3, 16, 1e-3, 1, 1))
    assert not p.decide(empty).verify and p.decide(empty).score == -math.inf
    no_costs = PolicyInputs(2, [1.0, 1.0], 2.0, 0, 8, 0.0, 0.0)
    assert not p.decide(no_costs).verify and "no forward costs" in p.decide(no_costs).reason
    assert "verify ≈ 2.00 tokens in 2.00 ms vs skip 1 sure in front in 1.00 ms" in d.reason


def test_cost_aware_is_registered_with_its_knobs():
    assert isinstance(make_policy(DecodeConfig(policy="cost_aware")), CostAware)
    assert uses_costs(DecodeConfig(policy="cost_aware")) and not uses_costs(DecodeConfig(policy="always"))
    assert not uses_costs(DecodeConfig(method="diffusion", policy="cost_aware"))
    with pytest.raises(ValueError, match="cost_verify_scale"):
        DecodeConfig(policy="cost_aware", cost_verify_scale=0.0).validate()
    with pytest.raises(ValueError, match="cost_skip_value"):
        DecodeConfig(policy="cost_aware", cost_skip_value="some").validate()
    assert "cost_threshold" not in DecodeConfig().to_dict()  # options added later stay out at their defaults
    cfg = DecodeConfig(policy="cost_aware", cost_threshold=0.5, trim_verify=True)
    assert DecodeConfig.from_dict(cfg.to_dict()) == cfg and cfg.to_dict()["cost_threshold"] == 0.5


# -- a decode routes with a frozen table, records it, and replays exactly ----------------------------------------

def test_decode_records_the_table_and_each_steps_costs(aligned):
    res = s2d2.generate(aligned, PROMPT, DecodeConfig(**COST, temperature=1.0), seed=1)
    header = res.trace.header
    assert header.costs is not None and header.costs.source == "measured"
    decided = [s for s in res.trace.steps if s.policy_inputs is not None]
    assert decided and all(s.policy_inputs.costs is not None for s in decided)
    for s in decided:
        c = s.policy_inputs.costs
        assert c.draft_s == header.costs.cost("draft", c.draft_queries)
        assert c.verify_s == header.costs.cost("verify_2l", c.verify_queries)
        tau = res.trace.header.config["confidence_threshold"]
        lead = next((i for i, d in enumerate(s.drafts[: s.span[1]]) if not d.p > tau), s.span[1])
        assert c.sure_prefix == min(lead, c.skip_tokens)  # the span's leading drafts above τ
        if s.verification is not None:  # the verifier ran exactly the queries the policy was charged for
            verify = next(res.trace.forwards[i] for i in s.forwards if res.trace.forwards[i].kind == "verify_2l")
            assert verify.query_tokens == c.verify_queries
        else:
            assert len(s.commits) == c.skip_tokens
    data = json.loads(res.trace.to_json())
    assert data["header"]["costs"]["kinds"] and "costs" in data["steps"][decided[0].index]["policy_inputs"]
    again = Trace.from_json(res.trace.to_json())
    assert again.header.costs == header.costs
    other = s2d2.generate(aligned, PROMPT, DecodeConfig(method="s2d2", policy="always", block_length=8,
                                                        gen_length=12)).trace.to_dict()
    assert "costs" not in other["header"] and "costs" not in other["steps"][0]["policy_inputs"]  # old form


@pytest.mark.parametrize("kw", [dict(temperature=1.0), dict(kv_reuse=True, fused_commit=True, trim_verify=True),
                                dict(acceptance="greedy_exact", cost_skip_value="all")])
def test_replay_with_the_recorded_costs_is_exact(aligned, kw):
    cfg = DecodeConfig(**COST, **kw)
    first = s2d2.generate(aligned, PROMPT, cfg, seed=2)
    recorded = Trace.from_json(first.trace.to_json())
    aligned.costs.observe("verify_2l", 16, 1e3)  # the model's own fits drift; the recorded table does not
    for _ in range(8):
        aligned.costs.observe("draft", 8, 1e-9)
    again = s2d2.generate(aligned, PROMPT, cfg, seed=2, costs=recorded.header.costs)
    assert stable(again.trace.to_dict()) == {**stable(first.trace.to_dict())}
    steps = [s for s in recorded.steps if s.decision is not None]
    replayed = redecide(cfg, [(s.policy_inputs, s.reward) for s in steps])  # invariant 12
    assert [d.verify for d in replayed] == [s.decision.verify for s in steps]
    assert [d.score for d in replayed] == [s.decision.score for s in steps]
    assert [d.reason for d in replayed] == [s.decision.reason for s in steps]


def test_the_table_decides_and_what_if_predicts_the_rerun(aligned):
    cheap = table(verify=(1e-4, 0.0))  # a verify costs a tenth of a draft
    dear = table(verify=(0.1, 0.0))  # a verify costs 100 drafts: only steps with no sure draft verify
    cfg = DecodeConfig(**COST, confidence_threshold=0.3, cost_skip_value="confident")
    runs = {name: s2d2.generate(aligned, PROMPT, cfg, costs=t).trace for name, t in (("cheap", cheap), ("dear", dear))}
    assert runs["cheap"].header.costs == cheap
    rate = {n: sum(s.decision.verify for s in t.steps if s.decision) / sum(1 for s in t.steps if s.decision)
            for n, t in runs.items()}
    assert rate["cheap"] > rate["dear"] > 0
    dear_steps = [s for s in runs["dear"].steps if s.decision]
    assert all(s.decision.verify == (s.policy_inputs.n_hi == 0) for s in dear_steps)
    trace = runs["cheap"]
    same = what_if(trace, cost_threshold=0.0, cost_verify_scale=1.0)
    assert same.first_flip is None and same.exact_until == len(trace.steps)
    pricier = what_if(trace, cost_verify_scale=1e3)  # the cheap run's verifier priced as the dear run's
    first = pricier.first_flip
    assert first is not None and all(st.exact for st in pricier.steps[: first + 1])
    # what-if is exact through the first flip: the real re-run with the dear table decided exactly so
    assert [st.new_verify for st in pricier.steps[: first + 1]] == [
        s.decision.verify for s in runs["dear"].steps[: first + 1]]


def test_models_without_a_cost_model_route_with_the_nominal_table():
    from tests.support.scripted_model import ScriptedModel

    res = s2d2.generate(ScriptedModel(block=4), [1, 2, 3], DecodeConfig(**{**COST, "block_length": 4,
                                                                          "gen_length": 8}))
    assert res.trace.header.costs == CostTable.nominal()


def test_editing_loop_and_shifted_family_route_in_seconds(aligned):
    edit = s2d2.generate(aligned, PROMPT, DecodeConfig(**{**COST, "cache_ver": False, "draft_ver": False},
                                                       loop="editing", editing_threshold=0.9, temperature=1.0))
    decided = [s for s in edit.trace.steps if s.policy_inputs is not None]
    assert decided and all(s.policy_inputs.costs.verify_queries == 16 for s in decided)
    shifted = sharpen(tiny_qwen2(seed=1))
    res = s2d2.generate(shifted, [3, 1, 4, 1, 5, 9, 2, 6], DecodeConfig(**COST, temperature=1.0))
    assert res.trace.header.costs.cost("verify_causal", 4) > 0
    for s in res.trace.steps:
        if s.verification is not None:
            verify = next(res.trace.forwards[i] for i in s.forwards if res.trace.forwards[i].kind == "verify_causal")
            assert verify.query_tokens == s.policy_inputs.costs.verify_queries


def test_trace_rules_bound_the_recorded_costs(aligned):
    res = s2d2.generate(aligned, PROMPT, DecodeConfig(**COST), costs=table())
    data = json.loads(res.trace.to_json())
    step = next(s for s in data["steps"] if s["policy_inputs"])
    step["policy_inputs"]["costs"]["verify_queries"] = 17
    with pytest.raises(ValueError, match=r"policy_inputs.costs: .* verify_queries at most 2B"):
        Trace.from_dict(data)
    step["policy_inputs"]["costs"]["verify_queries"] = 16
    data["header"]["costs"]["kinds"].append(dict(data["header"]["costs"]["kinds"][0]))
    with pytest.raises(ValueError, match="each forward kind at most once"):
        Trace.from_dict(data)
    data["header"]["costs"]["kinds"][0]["base_s"] = -1.0
    with pytest.raises(ValueError, match=r"trace.header.costs.kinds\[0\].base_s: must be >= 0"):
        Trace.from_dict(data)


def test_the_app_names_the_policy_and_its_guide():
    from components.views import describe
    from s2d2.policies import figure_guides

    title = describe.plain_title(s2d2.preset("sdar-config-b+cost-aware"))
    assert title.startswith("Verify when it expects to save seconds") and "a trimmed verifier" in title
    assert figure_guides({"policy": "cost_aware", "cost_threshold": 0.5}) == {"threshold": 0.5}


def test_compare_rounds_route_a_cost_aware_lane_alike(aligned, monkeypatch):
    import s2d2.api as api
    from s2d2.compare import compare

    seen = []
    real = api.generate

    def generate(*args, **kwargs):
        res = real(*args, **kwargs)
        seen.append(res.trace)
        return res

    monkeypatch.setattr(api, "generate", generate)
    configs = {"ar": DecodeConfig(method="ar", gen_length=24), "cost": DecodeConfig(**COST, temperature=1.0)}
    compare(aligned, PROMPT, configs, seed=1, timed_rounds=2)
    lane = [t for t in seen if t.header.config.get("policy") == "cost_aware"]
    assert len(lane) == 3 and all(t.header.costs == lane[0].header.costs for t in lane)
    assert len({tuple(t.replay()) for t in lane}) == 1  # the warm-up's table: the same decode every round
