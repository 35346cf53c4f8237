"""The static backend with a batch dimension (issue 24 item 5): one slot per decode, batched static forwards.

Forward by forward, a batched static forward must give each member the logits (float64: 1e-10) and cache length
its own single forward gives; decode by decode, `generate_batch` on the static backend must give each sequence its
batch-1 trace (tokens, NFE, every decision exactly; floats to tests/support/trace_compare.py FLOAT64). On the CPU
the static code runs eagerly: exactly the buffers, padding and masks a CUDA graph replays.
"""
from __future__ import annotations

from typing import Any

import pytest
import torch

import s2d2
from s2d2.host_syncs import HostSyncCounter
from s2d2.models.base import ForwardRequest
from s2d2.models.masks import block_causal_mask, draft_mask, verify_2l_mask
from s2d2.models.static_backend import batch_buckets
from s2d2.models.static_cache import StaticCacheHandle
from tests.support.tiny_models import MASK_ID, tiny_qwen2, tiny_qwen3
from tests.support.trace_compare import trace_mismatch

PROMPTS = [[5, 9, 17, 33, 2, 71, 3], [4, 8], list(range(10, 40)), [5, 9, 17, 33, 2, 71, 3], [60, 61, 62, 63, 64]]
SEEDS = [0, 1, 2, 3, 12345]


def sharpened(build: Any, seed: int, **static_options: Any) -> Any:
    """A tiny float64 model whose drafts and verifier often disagree, on the static backend."""
    model = build(seed=seed)
    model.model.model.norm.weight.data *= 25.0
    model.set_backend("static", **static_options)
    return model


def assert_each_as_alone(model: Any, prompts: list[Any], cfg: Any, seeds: list[int], batch_size: int) -> list[Any]:
    batch = s2d2.generate_batch(model, prompts, cfg, seeds, batch_size=batch_size)
    for i, (got, prompt, seed) in enumerate(zip(batch, prompts, seeds)):
        want = s2d2.generate(model, prompt, cfg, seed=seed)
        assert got.token_ids == want.token_ids, f"sequence {i}"
        assert got.metrics["nfe"] == want.metrics["nfe"], f"sequence {i}"
        diff = trace_mismatch(got.trace, want.trace)
        assert diff is None, f"sequence {i}: {diff}"
    return batch


CONFIGS = {
    "s2d2-always-sampled": dict(method="s2d2", policy="always", temperature=1.0, acceptance="sampled"),
    "s2d2-ucb-greedy": dict(method="s2d2", policy="contextual_bandit_ucb"),
    "s2d2-threshold-kv-reuse": dict(method="s2d2", policy="score_threshold", score_threshold=0.0,
                                    cache_ver=True, draft_ver=True, temperature=1.0),
    "diffusion-threshold": dict(method="diffusion", confidence_threshold=0.6),
}


@pytest.mark.parametrize("family", ["aligned", "shifted"])
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_generate_batch_on_the_static_backend_gives_each_sequence_its_batch_one_trace(family, name):
    build, seed = (tiny_qwen3, 0) if family == "aligned" else (tiny_qwen2, 1)
    model = sharpened(build, seed)
    cfg = s2d2.DecodeConfig(gen_length=24, block_length=8, **CONFIGS[name])
    assert_each_as_alone(model, PROMPTS, cfg, SEEDS, batch_size=4)
    stats = model.static.stats
    assert model.static.slots == 4 and stats.dynamic_fallbacks == 0  # every sequence on its own slot
    assert stats.batched_forwards > 0  # and they really shared static forwards


@pytest.mark.parametrize("name", ["ar", "sdar-config-b+reuse+fused+trim", "llada2-quality", "llada2-dynamic-edit"])
def test_presets_of_every_block_loop_shape_batch_on_the_static_backend_as_alone(name):
    """AR (1- and 2-query forwards), KV reuse + fused commits + the trimmed verifier, and the LLaDA2 editing loop
    (position-aligned models only) with and without S2D2."""
    model = sharpened(tiny_qwen3, 0)
    cfg = s2d2.preset(name, gen_length=24, block_length=8)
    assert_each_as_alone(model, PROMPTS, cfg, SEEDS, batch_size=5)
    assert model.static.stats.batched_forwards > 0 and model.static.stats.dynamic_fallbacks == 0


def test_the_bundled_model_batches_on_the_static_backend_as_alone():
    from s2d2.tasks.arithmetic import heldout

    model = s2d2.load_model("tiny", dtype=torch.float64, backend="static")
    prompts = [p.question for p in heldout(3)]
    cfg = s2d2.preset("sdar-config-b", gen_length=32, temperature=1.0)
    assert_each_as_alone(model, prompts, cfg, [4, 5, 6], batch_size=3)
    assert model.static.stats.batched_forwards > 0 and model.static.stats.dynamic_fallbacks == 0


def test_a_finished_sequence_frees_its_slot_for_the_next_in_the_queue():
    model = sharpened(tiny_qwen3, 0, slots=1, max_slots=2)
    backend, leased = model.static, []
    take = backend.new_cache

    def recorded():
        handle = take()
        leased.append(None if handle is None else handle.slot)
        return handle

    backend.new_cache = recorded
    cfg = s2d2.DecodeConfig(gen_length=16, block_length=4, method="s2d2", policy="always")
    assert_each_as_alone(model, PROMPTS, cfg, SEEDS, batch_size=2)
    assert backend.slots == 2
    # five decodes on two slots, none on a dynamic cache: each finished one's slot went to the next in the queue;
    # then each batch-1 reference decode leased slot 0
    assert len(leased) == 10 and leased[:2] == [0, 1] and set(leased[:5]) == {0, 1} and leased[5:] == [0] * 5
    assert backend.stats.dynamic_fallbacks == 0


def test_more_sequences_than_slots_fall_back_to_dynamic_caches():
    model = sharpened(tiny_qwen2, 1, slots=1, max_slots=2)
    cfg = s2d2.DecodeConfig(gen_length=16, block_length=4, method="s2d2", policy="always", temperature=1.0)
    assert_each_as_alone(model, PROMPTS, cfg, SEEDS, batch_size=4)
    stats = model.static.stats
    assert model.static.slots == 2 and stats.dynamic_fallbacks >= 2  # two live sequences had no slot
    assert stats.batched_forwards > 0  # the two on slots still shared static forwards


def _prefixed(model: Any, prefix: list[int]) -> Any:
    cache = model.new_cache()
    model.forward(cache, torch.tensor(prefix), torch.arange(len(prefix)), "causal", keep=len(prefix))
    return cache


def test_a_batched_static_forward_gives_every_member_its_single_forward():
    """Every attention kind, keep / last / rows, members of different live lengths and query counts, padded to a
    batch bucket of 4, and a dynamic cache (a decode that found every slot leased) in the same group: each
    member's logits and cache as its single forward gives them."""
    static = tiny_qwen3(seed=3)
    static.set_backend("static", slots=3)
    single = tiny_qwen3(seed=3)  # the same weights, dynamic: the reference forwards
    prefixes = [[11, 22, 33], list(range(40, 57)), [7], [1, 2, 3, 4]]
    caches = [_prefixed(static, p) for p in prefixes]
    refs = [_prefixed(single, p) for p in prefixes]
    assert [isinstance(c, StaticCacheHandle) for c in caches] == [True, True, True, False]
    assert [c.slot for c in caches[:3]] == [0, 1, 2]
    drafts = torch.tensor([101, 102, MASK_ID, MASK_ID])
    two_l = torch.cat([drafts, torch.full((4,), MASK_ID)])
    along = lambda c, n: torch.arange(c, c + n)  # noqa: E731
    twice = lambda c, n: torch.arange(c, c + 4).repeat(2)  # noqa: E731
    steps = [  # (ids, positions, attention of the cache length, keep, last, rows) per member
        [(drafts, along, lambda c: "full", 0, None, None),
         (two_l, twice, lambda c: verify_2l_mask(c, 4), 0, 4, None),
         (drafts[:3], along, lambda c: "causal", 3, 1, None),
         (drafts[:2], along, lambda c: "causal", 1, None, None)],
        [(drafts, along, lambda c: draft_mask(c, 4, 2), 0, None, torch.tensor([0, 2])),
         (drafts, along, lambda c: "causal", 4, 1, None),
         (two_l, along, lambda c: block_causal_mask(8, 4, start=c, cache_len=c), 8, None, None),
         (drafts, along, lambda c: "full", 2, 2, None)],
    ]
    for step in steps:
        reqs, want = [], []
        for cache, ref, (ids, pos, att, keep, last, rows) in zip(caches, refs, step):
            c = ref.get_seq_length()
            want.append(single.forward(ref, ids, pos(c, len(ids)), att(c), keep, last, rows))
            reqs.append(ForwardRequest(cache, ids, pos(c, len(ids)), att(c), keep, last, rows))
        got = static.forward_batch(reqs)
        for g, w in zip(got, want):
            assert g.shape == w.shape and g.dtype == torch.float32
            assert (g - w).abs().max().item() <= 1e-10
        assert [c.get_seq_length() for c in caches] == [r.get_seq_length() for r in refs]
    assert static.static.stats.batched_forwards == 2


def test_a_batched_static_forward_reads_nothing_back_from_the_device():
    """Filling the (batch, rows) buffers takes host ints and device copies only: no read, no upload, whatever the
    batch size (the model's own forward is the backend's business, as for batch 1, and is counted too here)."""
    model = tiny_qwen3(seed=0)
    model.set_backend("static", slots=8)
    handles = [_prefixed(model, list(range(3, 3 + n))) for n in (2, 5, 9, 1, 4, 3)]
    reqs = [ForwardRequest(h, torch.tensor([MASK_ID] * 4), torch.arange(h.length, h.length + 4),
                           draft_mask(h.length, 4, 2) if i % 2 else "full", 0, None, None)
            for i, h in enumerate(handles)]
    with HostSyncCounter() as syncs:
        model.forward_batch(reqs)
    assert syncs.total() == 0, [e.op for e in syncs.events]


def test_slot_bounds_are_one_readable_message():
    model = tiny_qwen3(seed=0)
    for options, words in [(dict(slots=0), "slots: must be an integer in [1, 256]"),
                           (dict(slots=257), "slots: must be an integer in [1, 256]"),
                           (dict(slots=True), "slots: must be an integer"),
                           (dict(slots=2.0), "slots: must be an integer"),
                           (dict(slots=4, max_slots=2), "max_slots (2) must be >= slots (4)"),
                           (dict(max_slots=1000), "max_slots: must be an integer in [1, 256]")]:
        with pytest.raises(ValueError, match=words.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")):
            model.set_backend("static", **options)
    model.set_backend("static", slots=2, max_slots=3)
    assert model.reserve_slots(10) == 3  # grows to max_slots, never past it
    held = model.new_cache()
    assert model.reserve_slots(1) == 3 and model.static.warmup([4], batch_size=8) == 0.0  # busy: nothing moves
    del held
    assert model.warmup([4], max_length=300, batch_size=8) >= 0.0 and model.static.slots == 3
    assert model.static.capacity >= 300 + 8 and not model.needs_warmup([4], batch_size=8)  # CPU: no graphs
    assert batch_buckets(1) == [1] and batch_buckets(5) == [1, 2, 4, 8] and batch_buckets(8) == [1, 2, 4, 8]


def test_flash_attention_is_refused_above_batch_one_and_static_is_not():
    model = tiny_qwen3(seed=0)
    model.set_backend("static")
    assert model.batch_unsupported() is None
    model.attn_implementation = "flash_attention_2"  # cannot read the per-row masks a batch needs
    with pytest.raises(ValueError, match="batch_size > 1: it needs attn_implementation 'sdpa' or 'eager'"):
        s2d2.generate_batch(model, [[1, 2], [3]], s2d2.DecodeConfig(gen_length=8, block_length=4), batch_size=2)


def test_eager_attention_batches_on_the_static_backend():
    """An additive mask per member; transformers' eager softmax runs in float32 even in a float64 model, so floats
    are held to 1e-5 relative / 1e-7 absolute (as on the dynamic path) and tokens, NFE and decisions exactly."""
    model = tiny_qwen3(seed=0, attn="eager")
    model.set_backend("static")
    cfg = s2d2.DecodeConfig(gen_length=12, method="s2d2", policy="always", block_length=4)
    prompts = [[1, 2, 3], [4, 5, 6, 7, 8, 9], [10]]
    batch = s2d2.generate_batch(model, prompts, cfg, [0, 1, 2], batch_size=3)
    for got, prompt, seed in zip(batch, prompts, [0, 1, 2]):
        want = s2d2.generate(model, prompt, cfg, seed=seed)
        assert (got.token_ids, got.metrics["nfe"]) == (want.token_ids, want.metrics["nfe"])
        assert trace_mismatch(got.trace, want.trace, tol=(1e-5, 1e-7)) is None
    assert model.static.stats.batched_forwards > 0


def test_a_batch_and_a_lone_decode_on_other_threads_share_one_static_model():
    """The app runs a shared batch beside lone decodes (Compare lanes) on one loaded model: the backend's forwards
    take turns under its lock, each decode on its own slot, so every answer is its alone answer. (A check of
    concurrent use, not a proof of the lock: on this CPU the race it prevents is rare, and the test passed without
    the lock in three runs.)"""
    import threading

    model = sharpened(tiny_qwen3, 0, slots=1, max_slots=4)
    cfg = s2d2.DecodeConfig(gen_length=16, block_length=4, method="s2d2", policy="always", temperature=1.0)
    want = [s2d2.generate(model, p, cfg, seed=s) for p, s in zip(PROMPTS, SEEDS)]
    got: dict[str, Any] = {}
    start = threading.Barrier(2)

    def batch() -> None:
        start.wait()
        got["batch"] = s2d2.generate_batch(model, PROMPTS[:3], cfg, SEEDS[:3], batch_size=3)

    def alone() -> None:
        start.wait()
        got["alone"] = [s2d2.generate(model, p, cfg, seed=s) for p, s in zip(PROMPTS[3:], SEEDS[3:])]

    threads = [threading.Thread(target=batch), threading.Thread(target=alone)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, (g, w) in enumerate(zip(got["batch"] + got["alone"], want)):
        assert (g.token_ids, g.metrics["nfe"]) == (w.token_ids, w.metrics["nfe"]), f"sequence {i}"
        assert trace_mismatch(g.trace, w.trace) is None, f"sequence {i}"
