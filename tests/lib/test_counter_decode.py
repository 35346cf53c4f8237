"""Decoding with the counter generator (`DecodeConfig.rng = "counter"`, s2d2/decoding/draws.py): every draw goes
through it (torch's random functions are never called), a decode is reproducible, its draws are the specified
ones, a sequence in a batch of 4 decodes as alone, and the trace header records the generator (and replays)."""
from __future__ import annotations

from functools import lru_cache
from typing import Any

import pytest
import torch

import s2d2
from s2d2 import counter_rng as C
from s2d2.decoding.draws import CounterStream, categorical, make_generator, uniform
from tests.support.golden_cases import PROMPTS, golden_model, stable
from tests.support.trace_compare import FLOAT64, trace_mismatch

GEN = 24
# Every kind of draw: S2D2 with `paper` acceptance on sampled drafts (draft, accept, residual), paper acceptance on
# greedy drafts (accept, residual), exact speculative sampling, a sampled baseline, sampled AR, the D2F pipeline.
CONFIGS = {
    "s2d2-paper-sampled": dict(method="s2d2", policy="always", temperature=1.0, block_length=8),
    "s2d2-paper-greedy": dict(method="s2d2", policy="always", block_length=8),
    "s2d2-sampled-ucb": dict(method="s2d2", policy="contextual_bandit_ucb", acceptance="sampled", temperature=0.8,
                             block_length=8),
    "diffusion-sampled": dict(method="diffusion", block_length=4, remasking="sequential", temperature=1.0),
    "ar-sampled": dict(method="ar", temperature=1.0),
    "editing-paper-sampled": dict(loop="editing", method="s2d2", policy="always", temperature=1.0, block_length=4,
                                  editing_threshold=0.5, max_post_steps=2),
}


@lru_cache(maxsize=None)
def model(name: str = "aligned") -> Any:
    return golden_model(name)  # the sharpened tiny random models (float64): drafts and verifier often disagree


def cfg_for(name: str, **changes: Any) -> s2d2.DecodeConfig:
    return s2d2.DecodeConfig(gen_length=GEN, rng="counter", **{**CONFIGS[name], **changes})


def no_torch_randomness(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a draw bypassed the decode's random source")

    for name in ("rand", "multinomial", "randint", "randn", "bernoulli", "randperm"):
        monkeypatch.setattr(torch, name, refuse)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_every_draw_goes_through_the_counter_and_a_decode_is_reproducible(name, monkeypatch):
    no_torch_randomness(monkeypatch)
    cfg = cfg_for(name)
    first = s2d2.generate(model(), PROMPTS["a"], cfg, seed=5)
    again = s2d2.generate(model(), PROMPTS["a"], cfg, seed=5)
    assert stable(first.trace.to_dict()) == stable(again.trace.to_dict())
    other = s2d2.generate(model(), PROMPTS["a"], cfg, seed=6)
    assert first.token_ids != other.token_ids or cfg.method == "s2d2" and not cfg.do_sample
    assert first.trace.header.config["rng"] == "counter"


def verifications(result: Any) -> list[Any]:
    return [s.verification for s in result.trace.steps if s.verification is not None]


def test_paper_acceptance_draws_are_the_specified_uniforms():
    """Greedy drafts with `paper` acceptance draw only the acceptance test's u and the residual: the k-th draw call
    of the decode is numbered k, so each verification's u are counter_rng.uniform(seed, accept, call, i)."""
    result = s2d2.generate(model(), PROMPTS["b"], cfg_for("s2d2-paper-greedy"), seed=3)
    checked, call = 0, 0
    for v in verifications(result):
        want = [C.uniform(3, C.KINDS["accept"], call, i) for i in range(len(v.positions))]
        assert [p.u for p in v.positions] == want  # exact: float64 draws recorded as they were drawn
        checked += len(want)
        call += 1 + (v.resampled is not None)  # a rejection draws its residual in the next call
    assert checked >= 8 and any(v.resampled is not None for v in verifications(result))


def test_the_torch_default_is_untouched_and_differs_from_the_counter():
    torch_cfg = s2d2.DecodeConfig(gen_length=GEN, **CONFIGS["s2d2-paper-sampled"])
    default = s2d2.generate(model(), PROMPTS["a"], torch_cfg, seed=5)
    assert "rng" not in default.trace.header.config  # torch's generator: headers as before (golden traces)
    counter = s2d2.generate(model(), PROMPTS["a"], torch_cfg.replace(rng="counter"), seed=5)
    u_default = [p.u for v in verifications(default) for p in v.positions]
    u_counter = [p.u for v in verifications(counter) for p in v.positions]
    assert u_default[:4] != u_counter[:4]


@pytest.mark.parametrize("name", ["s2d2-paper-sampled", "s2d2-paper-greedy", "ar-sampled"])
def test_a_batch_of_four_decodes_each_sequence_as_alone(name):
    cfg = cfg_for(name)
    prompts, seeds = [PROMPTS["a"], PROMPTS["b"], PROMPTS["a"], PROMPTS["c"]], [5, 7, 11, 2**40 + 3]
    batch = s2d2.generate_batch(model(), prompts, cfg, seeds, batch_size=4)
    for i, (got, prompt, seed) in enumerate(zip(batch, prompts, seeds)):
        want = s2d2.generate(model(), prompt, cfg, seed=seed)
        assert got.token_ids == want.token_ids, f"sequence {i}"
        assert trace_mismatch(got.trace, want.trace, tol=FLOAT64) is None, f"sequence {i}"
    assert batch[0].token_ids != batch[2].token_ids  # the same prompt under another seed: other draws


def test_the_d2f_pipeline_draws_from_the_counter(tmp_path, monkeypatch):
    from fixtures import tiny_d2f as M

    d2f = s2d2.load_model(M.write_llada(tmp_path / "llada"), device="cpu", dtype=torch.float64)
    cfg = s2d2.preset("d2f-s2d2", block_length=4, gen_length=GEN, confidence_threshold=0.5, policy="always",
                      temperature=1.0, acceptance="sampled", rng="counter")
    no_torch_randomness(monkeypatch)
    one = s2d2.generate(d2f, [5, 9, 17, 33, 2, 71, 3], cfg, seed=1)
    two = s2d2.generate(d2f, [5, 9, 17, 33, 2, 71, 3], cfg, seed=1)
    assert stable(one.trace.to_dict()) == stable(two.trace.to_dict())


def test_the_header_records_the_generator_and_the_trace_loads_and_replays():
    result = s2d2.generate(model(), PROMPTS["c"], cfg_for("s2d2-paper-sampled"), seed=9)
    loaded = s2d2.Trace.from_json(result.trace.to_json())
    assert loaded.header.config["rng"] == "counter"
    assert loaded.replay() == result.token_ids
    cfg = s2d2.DecodeConfig.from_dict(loaded.header.config)
    again = s2d2.generate(model(), loaded.header.prompt_ids, cfg, seed=loaded.header.seed)
    assert stable(again.trace.to_dict()) == stable(result.trace.to_dict())  # the header re-decodes the run


def test_an_upload_naming_an_unknown_generator_is_refused():
    data = s2d2.generate(model(), PROMPTS["a"], cfg_for("ar-sampled"), seed=1).trace.to_dict()
    data["header"]["config"]["rng"] = "mersenne"
    with pytest.raises(ValueError, match="^trace.header.config: rng: "):
        s2d2.Trace.from_dict(data)


def test_bad_generator_settings_are_one_readable_error():
    with pytest.raises(ValueError, match="^rng: "):
        s2d2.DecodeConfig(rng="numpy").validate()
    with pytest.raises(ValueError, match="^seed: an integer in"):
        make_generator("counter", -1, "cpu")
    with pytest.raises(ValueError, match="^seed: an integer in"):
        s2d2.generate(model(), PROMPTS["a"], cfg_for("ar-sampled"), seed=2**64)


def test_the_interface_numbers_its_calls():
    stream = CounterStream(4, "cpu")
    u = uniform(stream, 3, torch.device("cpu"))
    assert u.dtype == torch.float64 and u.tolist() == [C.uniform(4, C.KINDS["accept"], 0, i) for i in range(3)]
    probs = torch.tensor([[0.2, 0.3, 0.5], [0.0, 0.0, 1.0]], dtype=torch.float32)
    drawn = categorical(stream, probs, "draft")
    assert drawn.tolist() == C.categorical_rows(probs.double().numpy(), 4, C.KINDS["draft"], 1)
    assert categorical(stream, probs[0], "residual").dim() == 0 and stream.calls == 3
