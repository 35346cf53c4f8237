"""DecodeConfig validation: every invalid setting is one ValueError naming the field (hypothesis fuzz)."""
from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from s2d2.config import DecodeConfig, preset, presets

FIELDS = {f.name: f for f in dataclasses.fields(DecodeConfig)}

ANY_VALUE = st.one_of(
    st.none(), st.booleans(), st.integers(-10**9, 10**9), st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12), st.sampled_from(["ar", "diffusion", "s2d2", "paper", "sampled", "greedy_exact",
                                           "score_hysteresis", "contextual_bandit_ucb", "entropy_bounded"]),
    st.lists(st.integers(), max_size=2),
)


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(st.sampled_from(sorted(FIELDS)), ANY_VALUE, max_size=6))
@pytest.mark.slow
def test_any_settings_are_valid_or_one_value_error(changes):
    try:
        cfg = DecodeConfig.from_dict(changes)
    except ValueError as exc:
        field = str(exc).split(":")[0]
        assert field in FIELDS or field == "config", str(exc)
        return
    # a config that validates is usable: finite schedule that covers the block
    sched = cfg.transfer_schedule()
    assert sum(sched) == cfg.block_length and min(sched) >= 1
    for name in ("temperature", "top_p", "confidence_threshold"):
        assert not math.isnan(getattr(cfg, name))


@pytest.mark.parametrize(
    "changes, field",
    [
        (dict(method="beam"), "method"),
        (dict(block_length=0), "block_length"),
        (dict(block_length=4, denoising_steps=5), "denoising_steps"),
        (dict(gen_length=0), "gen_length"),
        (dict(gen_length=10**6), "gen_length"),
        (dict(policy="score_hysteresis", hysteresis_on=-1.0, hysteresis_off=0.0), "hysteresis_off"),
        (dict(policy="sometimes"), "policy"),
        (dict(temperature=-0.1), "temperature"),
        (dict(temperature=float("nan")), "temperature"),
        (dict(top_p=0.0), "top_p"),
        (dict(acceptance="greedy_exact", temperature=0.7), "temperature"),
        (dict(acceptance="sampled", temperature=0.0), "temperature"),
        (dict(block_length=8, sub_block_length=3), "sub_block_length"),
        (dict(estimator="magic"), "estimator"),
        (dict(block_length="4"), "block_length"),
        (dict(cache_ver="yes"), "cache_ver"),
        (dict(confidence_threshold=1.5), "confidence_threshold"),
        (dict(unknown_option=1), "config"),
    ],
)
def test_invalid_settings_name_their_field(changes, field):
    with pytest.raises(ValueError) as info:
        DecodeConfig.from_dict(changes)
    assert str(info.value).startswith(field + ":"), str(info.value)


def test_presets_are_valid_and_documented():
    listed = presets()
    assert {"ar", "dynamic-baseline", "sdar-config-a", "sdar-config-b", "fastdllm-config-a", "fastdllm-config-b",
            "fastdllm-config-c"} <= set(listed)
    for name, line in listed.items():
        cfg = preset(name)
        assert line and cfg.validate() is cfg
    a = preset("sdar-config-a")
    assert (a.block_length, a.policy, a.score_type, a.penalty_coef, a.cache_ver, a.draft_ver) == (
        4, "score_threshold", "difference_static", 1.0, True, True)
    assert preset("fastdllm-config-c").min_span_length == 8
    with pytest.raises(ValueError, match="preset"):
        preset("nope")
    assert preset("sdar-config-b", gen_length=16).gen_length == 16


def test_transfer_schedule_spreads_the_remainder_first():
    assert DecodeConfig(block_length=8, denoising_steps=3).transfer_schedule() == [3, 3, 2]
    assert DecodeConfig(block_length=4).transfer_schedule() == [1, 1, 1, 1]


def test_to_dict_is_asdict_without_the_deep_copy():
    """to_dict copies fields shallowly (a batch builds one dict per result): that is asdict only while every field
    holds a scalar, which this checks for every preset."""
    import dataclasses

    import s2d2

    for name in s2d2.presets():
        cfg = s2d2.preset(name)
        full = dataclasses.asdict(cfg)
        got = cfg.to_dict()
        assert got == {k: v for k, v in full.items() if k in got}
        assert all(v is None or type(v) in (int, float, str, bool) for v in full.values()), name


def test_a_configs_dict_is_built_once_and_each_caller_gets_its_own_copy(monkeypatch):
    import pickle

    cfg = DecodeConfig(gen_length=8)
    first = cfg.to_dict()
    calls = []
    monkeypatch.setattr(dataclasses, "fields", lambda *a: calls.append(a) or ())
    first["gen_length"] = 99  # a caller's copy: changing it changes nothing else
    assert cfg.to_dict()["gen_length"] == 8 and calls == []  # the fields are not walked again
    monkeypatch.undo()
    assert cfg == DecodeConfig(gen_length=8) and hash(cfg) == hash(DecodeConfig(gen_length=8))
    assert pickle.loads(pickle.dumps(cfg)).to_dict() == DecodeConfig(gen_length=8).to_dict()


def test_a_configs_hash_is_computed_once_and_never_pickled(monkeypatch):
    import copy
    import pickle

    cfg, twin = DecodeConfig(gen_length=8), DecodeConfig(gen_length=8)
    assert hash(cfg) == hash(twin) and {cfg: 1}[twin] == 1 and hash(cfg) != hash(DecodeConfig(gen_length=9))
    calls = []
    monkeypatch.setattr(dataclasses, "fields", lambda *a: calls.append(a) or ())
    for _ in range(3):
        hash(cfg)
    assert calls == [] and cfg.__dict__["_hash"] == hash(twin)  # kept on the config, the fields not walked again
    monkeypatch.undo()
    for other in (pickle.loads(pickle.dumps(cfg)), copy.copy(cfg), copy.deepcopy(cfg)):
        assert "_hash" not in other.__dict__ and other == cfg and hash(other) == hash(cfg)
