"""The static backend (preallocated KV, fixed padded shapes, in-place masks) against the dynamic one.

On CPU the static code runs uncompiled: exactly the buffers, padding and masks a CUDA graph replays. Forwards
are compared in float64 (SDPA: 1e-10; eager: 1e-6, because transformers' eager attention takes its softmax in
float32), decodes token for token and NFE for NFE.
"""
from __future__ import annotations

import pytest
import torch
from tests.support.tiny_models import MASK_ID, tiny_qwen2, tiny_qwen3

import s2d2
from s2d2.config import preset, presets
from s2d2.models.loading import ModelLoadError, load_model
from s2d2.models.masks import block_causal_mask, draft_mask, verify_2l_mask
from s2d2.models.static_backend import PAD_LIMIT, padded_length, query_shapes
from s2d2.models.static_cache import CacheCapacityError, StaticCacheHandle

TOLS = [("sdpa", 1e-10), ("eager", 1e-6)]


def pair(build=tiny_qwen3, attn: str = "sdpa", **static_options):
    """The same weights behind a dynamic and a static HFModel."""
    dynamic, static = build(attn=attn), build(attn=attn)
    static.set_backend("static", **static_options)
    return dynamic, static


def both(models, caches, ids, positions, attention, keep, last=None, tol=1e-10) -> torch.Tensor:
    """Run one forward on both backends; logits and cache lengths must agree."""
    (dyn, sta), (cd, cs) = models, caches
    build = attention if callable(attention) else (lambda c: attention)
    a = dyn.forward(cd, ids, positions, build(cd.get_seq_length()), keep, last)
    b = sta.forward(cs, ids, positions, build(cs.get_seq_length()), keep, last)
    assert a.shape == b.shape and b.dtype == torch.float32
    assert (a - b).abs().max().item() <= tol
    assert cd.get_seq_length() == cs.get_seq_length()
    return b


def test_padded_shapes() -> None:
    assert [padded_length(q) for q in (1, 2, 3, 4, 5, 16, 17, 32, PAD_LIMIT)] == [1, 2, 4, 4, 8, 16, 32, 32, PAD_LIMIT]
    assert padded_length(PAD_LIMIT + 1) == PAD_LIMIT + 1  # a long prefill runs at its exact length
    assert query_shapes([]) == [1, 2] and query_shapes([4]) == [1, 2, 4, 8]
    assert query_shapes([16, 4]) == [1, 2, 4, 8, 16, 32] and query_shapes([6]) == [1, 2, 4, 8, 16]


@pytest.mark.parametrize("attn, tol", TOLS)
def test_every_forward_kind_matches_dynamic(attn: str, tol: float) -> None:
    models = pair(attn=attn)
    caches = (models[0].new_cache(), models[1].new_cache())
    assert isinstance(caches[1], StaticCacheHandle)
    run = lambda *a, **k: both(models, caches, *a, tol=tol, **k)  # noqa: E731
    x = torch.tensor([11, 22, 33, 44, 55, 66, 77, 88, 99, 10, 20, 30])
    pos = torch.arange(40)
    run(x[:7], pos[:7], block_causal_mask(7, 4), keep=7, last=1)  # prefill, 7 rows padded to 8
    run(x[7:8], pos[7:8], "causal", keep=1)  # a 1-row forward
    drafts = torch.tensor([101, 102, MASK_ID, MASK_ID])
    run(drafts, pos[8:12], "full", keep=0)  # draft
    run(drafts, pos[8:12], lambda c: draft_mask(c, 4, 2), keep=0)  # draft_ver rows
    two_l = torch.cat([drafts, torch.full((4,), MASK_ID)])
    run(two_l, pos[8:12].repeat(2), lambda c: verify_2l_mask(c, 4), keep=0, last=4)  # verify_2l
    run(drafts[:3], pos[8:11], "causal", keep=0)  # a causal window, 3 rows padded to 4
    run(drafts, pos[8:12], "causal", keep=4, last=1)  # commit (cache_ver)
    run(torch.tensor([7, MASK_ID]), pos[12:14], "causal", keep=1, last=1)  # AR: commit one, query the next
    run(two_l, pos[13:21], lambda c: block_causal_mask(8, 4, start=13, cache_len=c), keep=8)  # stored, block-causal
    assert caches[1].get_seq_length() == 21
    caches[0].crop(-5)
    caches[1].crop(-5)  # crop is a counter: the next forward overwrites the dropped positions
    run(x[:3], pos[16:19], "full", keep=3)
    run(torch.tensor([MASK_ID]), pos[19:20], "causal", keep=0)  # every earlier write is still right


def test_long_prefill_runs_unpadded() -> None:
    models = pair()
    caches = (models[0].new_cache(), models[1].new_cache())
    n = PAD_LIMIT + 3
    ids = torch.arange(n) % 290
    out = both(models, caches, ids, torch.arange(n), "causal", keep=n, last=2)
    assert out.shape == (2, 300) and models[1].static.capacity >= n
    both(models, caches, torch.tensor([5, MASK_ID]), torch.arange(n, n + 2), "causal", keep=1, last=1)


def test_capacity_grows_then_refuses() -> None:
    models = pair(capacity=16, max_capacity=64)
    backend = models[1].static
    caches = (models[0].new_cache(), models[1].new_cache())
    assert backend.capacity == 16
    prompt = torch.arange(12)
    both(models, caches, prompt, torch.arange(12), "causal", keep=12)
    two_l = torch.tensor([1, 2, 3, 4] + [MASK_ID] * 4)
    both(models, caches, two_l, torch.arange(12, 16).repeat(2), lambda c: verify_2l_mask(c, 4), keep=0)
    assert backend.capacity == 32 and backend.stats.reallocations == 1  # 12 live + 8 rows > 16: grown, kept
    both(models, caches, two_l[:4], torch.arange(12, 16), "full", keep=4)
    with pytest.raises(CacheCapacityError, match="at most 64"):
        models[1].forward(caches[1], torch.arange(60), torch.arange(16, 76), "causal", keep=60)
    assert caches[1].get_seq_length() == 16  # refused before anything changed
    both(models, caches, torch.tensor([MASK_ID]), torch.tensor([16]), "causal", keep=0)


def test_decode_growing_inside_matches_and_too_long_is_refused() -> None:
    dynamic, static = pair(capacity=8, max_capacity=128)
    static.warmup = lambda **_: 0.0  # no reservation up front: the cache must grow during the decode
    cfg = preset("sdar-config-b", block_length=4, gen_length=40)
    prompt = list(range(5, 14))
    a = s2d2.generate(dynamic, prompt, cfg, detailed=False)
    b = s2d2.generate(static, prompt, cfg, detailed=False)
    assert (a.token_ids, a.metrics["nfe"]) == (b.token_ids, b.metrics["nfe"])
    assert static.static.stats.reallocations >= 2
    _, small = pair(max_capacity=32)
    with pytest.raises(CacheCapacityError, match="static KV cache"):  # a ValueError: one readable message
        s2d2.generate(small, prompt, cfg, detailed=False)


def test_lease_falls_back_to_dynamic_and_released_handles_are_refused() -> None:
    _, static = pair()
    backend = static.static
    held = static.new_cache()
    assert isinstance(held, StaticCacheHandle)
    other = static.new_cache()  # the storage is busy: a dynamic cache, never shared storage
    assert not isinstance(other, StaticCacheHandle) and backend.stats.dynamic_fallbacks == 1
    assert backend.warmup([4], max_length=600) == 0.0 and backend.capacity < 600  # busy: nothing moves
    backend.release(held)
    with pytest.raises(RuntimeError, match="released"):
        static.forward(held, torch.tensor([1]), torch.tensor([0]), "causal", keep=0)
    fresh = static.new_cache()
    assert isinstance(fresh, StaticCacheHandle)
    with pytest.raises(ValueError, match="crop"):
        fresh.crop(1)
    del fresh
    assert isinstance(static.new_cache(), StaticCacheHandle)  # a dropped handle frees the storage


def test_backend_selection() -> None:
    hf = tiny_qwen3()
    assert hf.backend == "dynamic"  # auto: static only on CUDA
    hf.set_backend("static")
    assert hf.backend == "static" and not hf.static.graphs and not hf.needs_warmup([4])
    with pytest.raises(ValueError, match="backend"):
        hf.set_backend("fast")
    with pytest.raises(ValueError, match="CUDA"):
        hf.set_backend("static", graphs=True)
    hf.attn_implementation = "flash_attention_2"  # cannot read our masks
    with pytest.raises(ValueError, match="sdpa"):
        hf.set_backend("static")
    hf.set_backend("auto")
    assert hf.backend == "dynamic"
    with pytest.raises(ModelLoadError, match="backend"):
        load_model("tiny", backend="fast")
    assert load_model("tiny", backend="static").backend == "static"


def _decode_pairs(dynamic, static, prompt, names, gen_length: int) -> None:
    from s2d2.trace import CostTable

    for name in names:
        cfg = preset(name, gen_length=gen_length)
        costs = CostTable.nominal()  # routing in seconds: the same costs on both backends (their timings differ)
        a = s2d2.generate(dynamic, prompt, cfg, detailed=False, costs=costs)
        b = s2d2.generate(static, prompt, cfg, detailed=False, costs=costs)
        assert (b.token_ids, b.metrics["nfe"]) == (a.token_ids, a.metrics["nfe"]), name
    assert static.static.stats.dynamic_fallbacks == 0 and static.static.stats.eager_forwards > 0


@pytest.mark.parametrize("build", [tiny_qwen3, tiny_qwen2], ids=["aligned", "shifted"])
@pytest.mark.slow
def test_every_preset_same_tokens_and_nfe_tiny_random(build) -> None:
    dynamic, static = pair(build)
    for model in (dynamic, static):
        model.spec.stop_ids = []  # random weights: run every block to the end
    # One static model for every preset: block lengths 1, 4, 16, 32 and back, on the same storage. The editing loop
    # (the LLaDA2 presets) runs position-aligned models only and refuses a shifted one before any forward.
    names = list(presets())
    if dynamic.spec.alignment == "shifted":
        names = [n for n in names if preset(n).loop == "block"]
        with pytest.raises(ValueError, match="position-aligned"):
            s2d2.generate(static, list(range(5, 18)), preset("llada2-quality", gen_length=40))
    _decode_pairs(dynamic, static, list(range(5, 18)), names, gen_length=40)


@pytest.mark.slow
def test_every_preset_same_tokens_and_nfe_bundled_model() -> None:
    from s2d2.tasks.arithmetic import heldout

    dynamic = load_model("tiny", dtype=torch.float64, backend="dynamic")
    static = load_model("tiny", dtype=torch.float64, backend="static")
    _decode_pairs(dynamic, static, heldout(1)[0].question, list(presets()), gen_length=32)


def test_eager_attention_decode_matches() -> None:
    dynamic, static = pair(attn="eager")
    cfg = preset("sdar-config-b", block_length=4, gen_length=24, acceptance="greedy_exact")
    a = s2d2.generate(dynamic, list(range(5, 14)), cfg, detailed=True)
    b = s2d2.generate(static, list(range(5, 14)), cfg, detailed=True)  # the full trace, as the app records it
    assert (a.token_ids, a.metrics["nfe"]) == (b.token_ids, b.metrics["nfe"])
    assert [f.cache_len for f in a.trace.forwards] == [f.cache_len for f in b.trace.forwards]


def test_run_panel_says_when_graphs_are_captured() -> None:
    from components.run import workers

    class Model:  # needs a capture for block 16, then not
        def __init__(self) -> None:
            self.warmed: list[list[int]] = []

        def needs_warmup(self, blocks: list[int]) -> bool:
            return not self.warmed

        def warmup(self, block_lengths: list[int]) -> float:
            self.warmed.append(block_lengths)
            return 0.0

    def fake_generate(model, prompt, cfg, **_):
        raise ValueError("stop here")

    model = Model()
    cfg = preset("sdar-config-b").to_dict()
    first = list(workers.record_stream("p", "m", cfg, 0, fake_generate, lambda _: model, min_interval=0))
    assert first[0]["status"] == workers.WARMUP_STATUS and model.warmed == [[16]]
    again = list(workers.record_stream("p", "m", cfg, 0, fake_generate, lambda _: model, min_interval=0))
    assert [e["kind"] for e in again] == ["error"] and model.warmed == [[16]]
