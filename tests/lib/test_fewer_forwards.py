"""Options beyond the paper that save forwards (KV reuse, fused commit, adaptive block size) and the right-shifted
family's reference budget and stop rule (issue 10). Float64 wherever exactness is claimed."""
from __future__ import annotations

import math

import pytest
import torch

import s2d2
from tests.support.tiny_models import tiny_qwen2, tiny_qwen3
from s2d2 import DecodeConfig
from s2d2.models.read_rows import read_index
from s2d2.policies import AdaptiveBlock, BlockFeedback
from tests.support.scripted_model import PositionScripted as Scripted

PROMPTS = [list(range(5, 15)), [3, 1, 4, 1, 5, 9, 2, 6]]
GEN = 24
EXACT = dict(method="s2d2", policy="always", acceptance="greedy_exact", cache_ver=True, draft_ver=True,
             gen_length=GEN)
OPTIONS = {
    "reuse": dict(kv_reuse=True),
    "fused": dict(fused_commit=True),
    "reuse+fused": dict(kv_reuse=True, fused_commit=True),
    "adaptive": dict(adaptive_block=True, adaptive_min_block=2, adaptive_max_block=16),
    "all": dict(kv_reuse=True, fused_commit=True, adaptive_block=True, adaptive_min_block=4, adaptive_max_block=16),
    # sub-block windows: the 2L verifier reads the whole block, so the masks of later windows it read as MASK are
    # never kept in the cache (verify_branch.py `first_left`; keeping them once crashed the next window's draft)
    "reuse+fused+sub-blocks": dict(kv_reuse=True, fused_commit=True, sub_block_length=2),
}


@pytest.fixture(scope="module")
def models():
    return {"aligned": tiny_qwen3(seed=1), "shifted": tiny_qwen2(seed=1)}


@pytest.fixture(scope="module")
def ar_outputs(models):
    return {(fam, i): s2d2.generate(m, p, DecodeConfig(method="ar", gen_length=GEN)).token_ids
            for fam, m in models.items() for i, p in enumerate(PROMPTS)}


def _expected_len(family: str, prompt: list[int], block: int) -> int:
    """Right-shifted: G // B blocks from the prompt-tail block (the reference budget); aligned: G tokens."""
    return (GEN // block) * block - len(prompt) % block if family == "shifted" else GEN


# -- the greedy_exact theorem with every option on ---------------------------------------------------------------

@pytest.mark.parametrize("option", sorted(OPTIONS))
@pytest.mark.parametrize("block", [4, 8, 16])
@pytest.mark.parametrize("family", ["aligned", "shifted"])
def test_greedy_exact_always_verify_still_equals_ar(family, block, option, models, ar_outputs):
    model = models[family]
    for i, prompt in enumerate(PROMPTS):
        res = s2d2.generate(model, prompt, DecodeConfig(block_length=block, **EXACT, **OPTIONS[option]))
        ar = ar_outputs[(family, i)]
        n = len(res.token_ids)
        assert res.token_ids == ar[:n] and n >= min(len(ar), _expected_len(family, prompt, block))
        m = res.metrics
        assert m["nfe"] == sum(m["nfe_by_kind"].values()) == len(res.trace.forwards)
        assert m["verify_rate"] == 1.0


@pytest.mark.parametrize("family", ["aligned", "shifted"])
def test_options_save_forwards_and_queries(family, models):
    model = models[family]
    base = s2d2.generate(model, PROMPTS[0], DecodeConfig(block_length=8, **EXACT))
    reuse = s2d2.generate(model, PROMPTS[0], DecodeConfig(block_length=8, kv_reuse=True, **EXACT))
    both = s2d2.generate(model, PROMPTS[0], DecodeConfig(block_length=8, kv_reuse=True, fused_commit=True, **EXACT))
    assert base.token_ids == reuse.token_ids == both.token_ids
    assert reuse.metrics["query_tokens"] < base.metrics["query_tokens"]
    assert reuse.metrics["nfe"] <= base.metrics["nfe"]
    assert both.metrics["nfe"] < base.metrics["nfe"] and "commit" not in both.metrics["nfe_by_kind"]
    # every query is a real, uncached position: cached rows + queried rows cover the block exactly
    blocks = {b.index: b for b in reuse.trace.blocks}
    for f in reuse.trace.forwards:
        if f.kind in ("draft", "verify_2l"):
            b = blocks[f.block]
            width = f.input_len // 2 if f.kind == "verify_2l" else f.input_len
            assert f.cache_len + width == b.start + b.length and f.query_tokens == f.input_len


# -- KV reuse and fused forwards give the full draft's logits (float64) ------------------------------------------

def _capture(model, monkeypatch) -> tuple[list[dict[int, torch.Tensor]], object]:
    """The raw float64 logits of every forward (HFModel.forward hands back float32), in forward order: per forward
    {query row: its logits}, for the rows the forward reads (it computes no others: s2d2/models/read_rows.py)."""
    seen: list[dict[int, torch.Tensor]] = []
    heads: list[torch.Tensor] = []
    handle = model.model.lm_head.register_forward_hook(
        lambda mod, args, out: heads.append(out.detach().clone().reshape(-1, out.shape[-1])))
    alone = model.forward

    def forward(cache, input_ids, positions, attention, keep, last=None, rows=None):
        before = len(heads)
        out = alone(cache, input_ids, positions, attention, keep, last, rows)
        q = int(input_ids.shape[0])
        at = read_index(q, last, rows, input_ids.device)
        seen.append(dict(zip(range(q) if at is None else at.tolist(), heads[before])))
        return out

    monkeypatch.setattr(model, "forward", forward)
    return seen, handle


def _draft_rows(res, logits, shifted: bool):
    """Per step: {position: the logit row that drafted it}. Every forward queries the contiguous positions from
    cache_len on (a fused forward starts at the previous block's tail), and shifted models read row i-1 for i."""
    out = []
    for s in res.trace.steps:
        if s.step < 0:
            continue  # the AR seed of a right-shifted block
        f = res.trace.forwards[s.forwards[0]]
        out.append({p: logits[f.index][p - f.cache_len - int(shifted)] for p in s.masks_before})
    return out


@pytest.mark.parametrize("family", ["aligned", "shifted"])
def test_reused_and_fused_drafts_match_the_full_draft(family, models, monkeypatch):
    model = models[family]
    shifted = family == "shifted"
    runs = {}
    variants = {"full": {}, "reuse": dict(kv_reuse=True)}
    if not shifted:  # a right-shifted fused forward drafts with MASK at block position 0 (its seed comes after)
        variants.update(fused=dict(fused_commit=True), both=dict(kv_reuse=True, fused_commit=True))
    for name, opts in variants.items():
        seen, handle = _capture(model, monkeypatch)
        try:
            res = s2d2.generate(model, PROMPTS[1], DecodeConfig(block_length=8, **EXACT, **opts))
        finally:
            handle.remove()
            monkeypatch.undo()
        assert len(seen) == len(res.trace.forwards) and next(iter(seen[0].values())).dtype == torch.float64
        runs[name] = (res, _draft_rows(res, seen, shifted))
    full_res, full_rows = runs["full"]
    for name in list(variants)[1:]:
        res, rows = runs[name]
        assert res.token_ids == full_res.token_ids and len(rows) == len(full_rows)
        worst = 0.0
        for a, b in zip(full_rows, rows):
            assert a.keys() == b.keys()
            worst = max([worst] + [float((a[p] - b[p]).abs().max()) for p in a])
        assert rows[0] and worst <= 1e-10, (name, worst)
    if not shifted:
        kinds = runs["fused"][0].metrics["nfe_by_kind"]
        assert kinds.get("commit+draft", 0) >= 1 and kinds["draft"] >= 1


# -- perfect drafter: two forwards per block ---------------------------------------------------------------------

def test_perfect_drafter_costs_two_forwards_per_block():
    from tests.support.tiny_models import perfect_drafter

    model = perfect_drafter()
    cfg = DecodeConfig(method="s2d2", policy="always", acceptance="greedy_exact", block_length=4, gen_length=16,
                       cache_ver=True, draft_ver=True, kv_reuse=True, fused_commit=True)
    res = s2d2.generate(model, list(range(10, 18)), cfg)
    blocks = len(res.trace.blocks)
    assert res.metrics["nfe_by_kind"] == {"prefill": 1, "draft": blocks, "verify_2l": blocks}


# -- options off, and the diffusion baseline with options on ------------------------------------------------------

def test_fused_commit_keeps_the_baseline_tokens_with_fewer_forwards(models):
    model = models["aligned"]
    common = dict(method="diffusion", block_length=4, gen_length=GEN, cache_ver=True, draft_ver=True)
    base = s2d2.generate(model, PROMPTS[0], DecodeConfig(**common))
    fused = s2d2.generate(model, PROMPTS[0], DecodeConfig(**common, fused_commit=True, kv_reuse=True))
    assert fused.token_ids == base.token_ids
    assert fused.metrics["nfe"] == base.metrics["nfe"] - base.metrics["nfe_by_kind"]["commit"]
    assert fused.metrics["query_tokens"] < base.metrics["query_tokens"]


def test_paper_presets_keep_the_options_off():
    from s2d2.config import presets, preset

    for name in presets():
        cfg = preset(name)
        on = [k for k in ("kv_reuse", "fused_commit", "adaptive_block", "trim_verify") if getattr(cfg, k)]
        on += ["cost_aware"] if cfg.policy == "cost_aware" else []
        assert bool(on) == ("+" in name or name == "lossless"), name
        if on:
            assert presets()[name].startswith("Beyond the paper")


# -- the right-shifted family: the reference budget and stop rule -------------------------------------------------

def _run(model, gen, block=8):
    cfg = DecodeConfig(method="diffusion", remasking="sequential", block_length=block, gen_length=gen)
    return s2d2.generate(model, [1, 2, 3, 4, 5, 6], cfg)


def test_shifted_stops_mid_block_once_a_stop_has_no_mask_to_its_left():
    res = _run(Scripted("shifted", {10: 14}), gen=16)
    kinds = res.metrics["nfe_by_kind"]
    # block 0 [0, 8): decode 6, 7, commit (seeds 8); block 1: decode 9, 10 = stop -> stop before any other forward
    assert kinds == {"draft": 4, "commit": 1}
    assert res.token_ids == [3, 3, 3, 3] and res.trace.footer.stop_position == 4
    assert res.trace.footer.finish_reason == "stop_token"


def test_aligned_finishes_and_commits_the_block_as_sdar_does():
    res = _run(Scripted("aligned", {10: 14}), gen=16)
    assert res.metrics["nfe_by_kind"] == {"draft": 2 + 8, "commit": 2}
    assert res.token_ids == [3, 3, 3, 3] and res.trace.footer.finish_reason == "stop_token"


@pytest.mark.parametrize("gen", [16, 20, 23])
def test_shifted_budget_is_gen_length_over_block_blocks(gen):
    res = _run(Scripted("shifted", {}), gen=gen)
    assert len(res.trace.blocks) == gen // 8
    assert res.metrics["generated_tokens"] == (gen // 8) * 8 - 6


def test_shifted_seed_that_is_a_stop_ends_the_run_before_drafting():
    res = _run(Scripted("shifted", {8: 14}), gen=24)
    assert res.metrics["nfe_by_kind"] == {"draft": 2, "commit": 1}
    assert res.token_ids == [3, 3] and res.trace.footer.stop_position == 2


# -- adaptive block size -----------------------------------------------------------------------------------------

def _rule(**kw):
    cfg = DecodeConfig(cache_ver=True, block_length=8, adaptive_block=True, adaptive_min_block=4,
                       adaptive_max_block=32, **kw)
    return AdaptiveBlock(cfg)


def test_adaptive_rule_grows_shrinks_keeps_and_aligns():
    rule = _rule()
    assert rule.decide(BlockFeedback(8, [], []), 16).length == 8  # no verification: keep
    assert rule.decide(BlockFeedback(8, [0, 1, 0], [8, 7, 5]), 16).length == 4  # early rejections: halve
    grow = rule.decide(BlockFeedback(8, [5, 3], [5, 3]), 32)
    assert grow.length == 16 and "grow" in grow.reason  # every span was accepted whole
    assert rule.decide(BlockFeedback(8, [3, 4], [8, 4]), 32).length == 8  # a rejection, but not early: keep
    assert rule.decide(BlockFeedback(8, [8], [8]), 24).length == 8  # 16 would not start at a multiple of 16
    assert rule.decide(BlockFeedback(32, [32], [32]), 64).length == 32  # clamped to the largest size
    assert rule.decide(BlockFeedback(4, [0], [4]), 8).length == 4  # clamped to the smallest size


@pytest.mark.parametrize("changes, field", [
    (dict(adaptive_block=True), "adaptive_block"),  # needs cache_ver
    (dict(adaptive_block=True, cache_ver=True, adaptive_min_block=3), "adaptive_min_block"),
    (dict(adaptive_block=True, cache_ver=True, block_length=4, adaptive_min_block=8), "adaptive_min_block"),
    (dict(adaptive_block=True, cache_ver=True, block_length=8, sub_block_length=4), "sub_block_length"),
    (dict(kv_reuse=True, cache_ver=True), "kv_reuse"),  # needs draft_ver too
    (dict(fused_commit=True, method="ar"), "fused_commit"),
])
def test_option_settings_are_checked(changes, field):
    with pytest.raises(ValueError) as info:
        DecodeConfig.from_dict(changes)
    assert str(info.value).startswith(field + ":"), str(info.value)


def test_adaptive_blocks_are_aligned_recorded_and_comparable(models):
    from s2d2.compare import compare_traces

    model = models["aligned"]
    cfg = DecodeConfig(block_length=4, **{**EXACT, "gen_length": 40}, **OPTIONS["adaptive"])
    res = s2d2.generate(model, PROMPTS[0], cfg)
    lengths = [b.length for b in res.trace.blocks]
    assert len(set(lengths)) > 1, lengths  # the run did adapt
    for a, b in zip(res.trace.blocks, res.trace.blocks[1:]):
        assert b.start == a.start + a.length and b.start % b.length == 0 and b.length_reason
    assert res.trace.header.total_length == res.trace.blocks[-1].start + res.trace.blocks[-1].length
    back = s2d2.Trace.from_json(res.trace.to_json())
    assert back.to_dict() == res.trace.to_dict() and back.replay() == res.token_ids
    ar = s2d2.generate(model, PROMPTS[0], DecodeConfig(method="ar", gen_length=40)).trace
    comp = compare_traces({"ar": ar, "adaptive": res.trace})
    assert comp.grid == max(lengths)
    for blk in res.trace.blocks:  # every block lies inside one aligned block
        assert blk.start // comp.grid == (blk.start + blk.length - 1) // comp.grid


# -- the mask viewer draws the fused layout ------------------------------------------------------------------------

@pytest.mark.parametrize("cache_ver", [True, False])
def test_fused_query_mask_matches_the_library_mask(cache_ver):
    from components.views import attention_mask
    from s2d2.models.masks import fused_draft_mask

    m = fused_draft_mask(5, 3, 4, cache_ver, causal_prefix=1)
    want = [[int(v) for v in row[5:]] for row in m.tolist()]
    assert attention_mask.query_mask("commit+draft", 7, 4, cache_ver, causal_prefix=1, tail=3) == want
    assert not m[:3, 5 + 3:].any() and m[3:, 5:8].all()  # the tail never sees the block; the block sees the tail


def test_fused_forward_is_shown_and_indexed(models):
    from components.views import attention_mask
    from components.views.trace_index import build_index

    cfg = DecodeConfig(block_length=4, fused_commit=True, **EXACT)
    trace = s2d2.generate(models["aligned"], PROMPTS[0], cfg).trace
    fused = [f for f in trace.forwards if f.kind == "commit+draft"]
    assert fused and all(f.query_tokens == 4 + 4 for f in fused)  # no reuse: the whole previous block + the block
    idx = build_index(trace)
    assert set(idx.commit_forward.values()) == {f.index for f in fused}
    step = next(s for s in trace.steps if s.forwards[0] == fused[0].index)
    fig = attention_mask.mask_figure(trace, step.index + 1, "draft")
    assert "(commit + next draft (fused))" in fig.layout.title.text and "4 tail rows" in fig.layout.title.text
    assert math.isclose(sum(map(sum, fig.data[0].z)), sum(map(sum, attention_mask.query_mask(
        "commit+draft", 8, 4, True, tail=4))) + 8)  # + the cache band column


@pytest.mark.parametrize("family", ["aligned", "shifted"])
def test_static_backend_gives_the_same_run_with_every_option(family):
    """Variable query lengths (reuse), tail + block forwards (fused) and varying blocks (adaptive) on the static
    backend: the same tokens and forwards as the dynamic one."""
    build = tiny_qwen3 if family == "aligned" else tiny_qwen2
    dynamic, static = build(seed=1), build(seed=1)
    static.set_backend("static")
    cfg = DecodeConfig(block_length=8, **EXACT, **OPTIONS["all"])
    a, b = (s2d2.generate(m, PROMPTS[0], cfg) for m in (dynamic, static))
    assert a.token_ids == b.token_ids
    assert [(f.kind, f.input_len, f.cache_len) for f in a.trace.forwards] == \
        [(f.kind, f.input_len, f.cache_len) for f in b.trace.forwards]
