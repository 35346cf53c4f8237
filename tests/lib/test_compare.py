"""s2d2.compare: lanes on one prompt and seed, AR equality, block alignment, routing divergence (tiny models)."""
from __future__ import annotations

import json

import pytest

from tests.support.lanes import PROMPT, tiny_with_tokenizer
from s2d2.compare import PREFILL_BLOCK, compare, compare_traces
from s2d2.config import preset

GEN = 12


@pytest.fixture(scope="module")
def comp_and_traces():
    import s2d2

    model = tiny_with_tokenizer()
    configs = {
        "ar": preset("ar", gen_length=GEN),
        "exact": preset("sdar-config-b", block_length=4, gen_length=GEN, acceptance="greedy_exact", policy="always"),
        "dynamic": preset("dynamic-baseline", gen_length=GEN),
        "config-a": preset("sdar-config-a", gen_length=GEN),
    }
    traces = {n: s2d2.generate(model, PROMPT, c, seed=0).trace for n, c in configs.items()}
    return compare_traces(traces), traces, model


def test_greedy_exact_always_verify_equals_ar(comp_and_traces):
    comp, traces, _ = comp_and_traces
    assert comp.reference == "ar" and "fused" in comp.reference_note
    assert comp.lane("exact").equals_ar is True
    assert comp.lane("ar").equals_ar is True and comp.lane("ar").speedup_nfe == pytest.approx(1.0)
    assert "exact" not in {d.lane for d in comp.diffs}
    ar = comp.lane("ar")
    for m in comp.lanes:  # speedup by NFE is per generated token, against the AR lane
        assert m.speedup_nfe == pytest.approx(ar.nfe_per_token / m.nfe_per_token)
        assert m.nfe == len(traces[m.name].forwards)


def test_token_diff_points_at_the_first_difference(comp_and_traces):
    comp, traces, _ = comp_and_traces
    ar_ids = traces["ar"].footer.output_ids
    for d in comp.diffs:
        ids = traces[d.lane].footer.output_ids
        assert ids[: d.first_index] == ar_ids[: d.first_index]
        assert d.first_index == min(len(ids), len(ar_ids)) or ids[d.first_index] != ar_ids[d.first_index]
        assert comp.lane(d.lane).equals_ar is False


def test_block_alignment_sums_to_each_lane_total(comp_and_traces):
    comp, traces, _ = comp_and_traces
    assert comp.grid == 4  # lcm(1, 4)
    for name, trace in traces.items():
        lane = [b.lanes[name] for b in comp.blocks]
        assert sum(lb.nfe for lb in lane) == len(trace.forwards)
        kinds: dict[str, int] = {}
        for lb in lane:
            for k, v in lb.nfe_by_kind.items():
                kinds[k] = kinds.get(k, 0) + v
        assert kinds == comp.lane(name).nfe_by_kind
        assert sum(len(lb.steps) for lb in lane) == len(trace.steps)
        assert sum(len(lb.commits) for lb in lane) == sum(len(s.commits) for s in trace.steps)
        for b in comp.blocks:  # every committed position lies inside its aligned block
            if b.index != PREFILL_BLOCK:
                assert all(b.start <= c[0] < b.start + b.length for c in b.lanes[name].commits)
    assert json.loads(json.dumps(comp.to_dict()))["grid"] == 4


def test_first_routing_divergence_between_s2d2_lanes(comp_and_traces):
    comp, traces, _ = comp_and_traces
    (div,) = comp.divergences
    assert div.lanes == ("exact", "config-a")
    a, b = traces["exact"].steps, traces["config-a"].steps
    first = next(i for i, (x, y) in enumerate(zip(a, b))
                 if x.decision.verify != y.decision.verify or x.block != y.block)
    assert div.step == first


def test_without_ar_lane_speedups_are_absent(comp_and_traces):
    _, traces, _ = comp_and_traces
    comp = compare_traces({"dynamic": traces["dynamic"], "config-a": traces["config-a"]})
    assert comp.reference is None and "no AR lane" in comp.reference_note
    assert all(m.speedup_nfe is None and m.equals_ar is None for m in comp.lanes) and not comp.diffs


def test_compare_runs_lanes_and_rejects_bad_input(comp_and_traces):
    _, traces, model = comp_and_traces
    comp = compare(model, PROMPT, {"ar": preset("ar", gen_length=4), "dyn": preset("dynamic-baseline", gen_length=4)})
    assert [m.name for m in comp.lanes] == ["ar", "dyn"]
    with pytest.raises(ValueError, match="2 to 4"):
        compare(model, PROMPT, {"ar": preset("ar")})
    with pytest.raises(ValueError, match="DecodeConfig"):
        compare(model, PROMPT, {"a": preset("ar"), "b": {"method": "ar"}})
    other = compare(model, "t1 t2", {"a": preset("ar", gen_length=2), "b": preset("ar", gen_length=2)})
    assert other.lane("a").equals_ar is True
    with pytest.raises(ValueError, match="different prompts"):
        compare_traces({"a": traces["ar"], "b": _with_prompt(traces["dynamic"], [1, 2])})


def _with_prompt(trace, ids):
    """The same trace claiming another prompt (built directly: the file reader would refuse its geometry)."""
    import dataclasses

    return dataclasses.replace(trace, header=dataclasses.replace(trace.header, prompt_ids=ids))


def test_timed_rounds_give_medians_with_their_noise(comp_and_traces):
    _, traces, model = comp_and_traces
    configs = {"ar": preset("ar", gen_length=4), "a": preset("sdar-config-a", gen_length=4)}
    comp = compare(model, PROMPT, configs, timed_rounds=2)
    for m in comp.lanes:  # the warm-up round is not among the runs
        assert m.wall_runs == 2 and m.wall_noise is not None
    a = comp.lane("a")
    assert a.speedup_wall_noise == pytest.approx(a.wall_noise + comp.lane("ar").wall_noise)
    once = compare(model, PROMPT, configs)
    assert once.lane("a").wall_runs == 1 and not once.lane("a").speedup_wall_trusted  # noise unknown
