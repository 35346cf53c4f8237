"""The D2F pipeline loop (`loop="pipeline"`, s2d2/decoding/pipeline.py) and S2D2 on it: every knob, the block
lifecycle in the trace, the spec invariants that carry over (never verify ≡ the baseline, a rejected draft is
never committed, the mask token is never drafted), both model families, Stop's rollback and the trace rules.

The models are the tiny official-layout LLaDA (position-aligned, 2L verifier) and Dream (right-shifted, causal
verifier) of fixtures/tiny_d2f.py; decision-for-decision agreement with the reference code is
benchmarks/d2f_reference.py's job (it needs the reference checkout)."""
from __future__ import annotations

import json

import pytest
import torch

from fixtures import tiny_d2f as M
import s2d2
from s2d2.decoding.result import StopDecoding
from s2d2.models.masks import segments_pattern
from s2d2.trace import Trace

PROMPT = [5, 9, 17, 33, 2, 71, 3]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("pipe")
    return {"llada": s2d2.load_model(M.write_llada(tmp / "llada"), device="cpu", dtype=torch.float64),
            "dream": s2d2.load_model(M.write_dream(tmp / "dream"), device="cpu", dtype=torch.float64)}


FAMILIES = ["llada", "dream"]


def run(model, preset="d2f", seed=0, prompt=PROMPT, **changes):
    settings = dict(block_length=4, gen_length=24, confidence_threshold=0.5)
    settings.update(changes)
    res = s2d2.generate(model, prompt, s2d2.preset(preset, **settings), seed=seed)
    back = Trace.from_json(res.trace.to_json())  # every trace passes its own rules
    assert back.replay() == res.token_ids
    return res


def block_of(trace, pos):
    return next(b.index for b in trace.blocks if b.start <= pos < b.start + b.length)


@pytest.mark.parametrize("fam", FAMILIES)
def test_blocks_join_before_the_previous_one_is_finished(models, fam):
    t = run(models[fam], block_add_threshold=0.25).trace
    B, P = 4, len(PROMPT)
    assert [(b.index, b.start, b.length, b.prompt_tail) for b in t.blocks] == [
        (k + 1, P + k * B, B, 0) for k in range(24 // B)]
    assert max(len(s.in_flight) for s in t.steps) >= 2  # several blocks in flight at once
    added = {e.block: i for i, s in enumerate(t.steps) for e in s.events if e.event == "added"}
    finished = {e.block: i for i, s in enumerate(t.steps) for e in s.events if e.event == "finished"}
    cached = {e.block: i for i, s in enumerate(t.steps) for e in s.events if e.event == "cached"}
    assert any(added[b + 1] <= finished[b] for b in finished if b + 1 in added)  # joined before b finished
    assert all(finished[b] < cached[b] for b in cached)
    assert sorted(finished) == [b.index for b in t.blocks]  # every block decodes to the end
    kinds = [f.kind for f in t.forwards]
    assert kinds[0] == "prefill+draft" and "commit+draft" in kinds
    for s in t.steps:  # the window starts at the first block in flight and every position lies in it
        assert s.window[0] == t.blocks[s.block - 1].start
        assert all(s.window[0] <= c.position < s.window[1] for c in s.commits)
        assert sum(r.decoded for r in s.in_flight) == len(s.commits)


@pytest.mark.parametrize("fam", FAMILIES)
def test_block_add_threshold(models, fam):
    one = run(models[fam], block_add_threshold=1.0).trace  # a block joins only once the last one is decoded
    assert max(len(s.in_flight) for s in one.steps) == 1
    every = run(models[fam], block_add_threshold=0.0).trace  # a new block every step
    added = [sum(e.event == "added" for e in s.events) for s in every.steps]
    assert added[: len(every.blocks)] == [1] * len(every.blocks)


@pytest.mark.parametrize("fam", FAMILIES)
def test_decoded_token_threshold(models, fam):
    t = run(models[fam], block_add_threshold=0.0, decoded_token_threshold=1.0).trace
    step_of = {(e.block, e.event): i for i, s in enumerate(t.steps) for e in s.events}
    for b in t.blocks[1:]:  # complete only after the previous block is fully decoded (the step after it finished)
        if (b.index, "complete") in step_of:
            assert step_of[(b.index, "complete")] > step_of[(b.index - 1, "finished")]
        else:  # it finished on confident drafts alone, before its predecessor did
            assert step_of[(b.index, "finished")] <= step_of[(b.index - 1, "finished")]
    early = run(models[fam], block_add_threshold=0.0, decoded_token_threshold=0.0).trace
    for s in early.steps:
        assert all(r.complete for r in s.in_flight)


def _rule_facts(trace, tau):
    """Per (step, block): the drafts of the block's masks and its commits by the D2F rule."""
    for s in trace.steps:
        complete = {r.block: r.complete for r in s.in_flight}
        for r in s.in_flight:
            drafts = [d for d in s.drafts if block_of(trace, d.position) == r.block]
            picks = [c for c in s.commits if block_of(trace, c.position) == r.block]
            yield s, r.block, complete[r.block], drafts, picks


@pytest.mark.parametrize("fam", FAMILIES)
@pytest.mark.parametrize("tau", [0.3, 0.9])
def test_the_d2f_rule_threshold_and_top1(models, fam, tau):
    t = run(models[fam], confidence_threshold=tau, block_add_threshold=0.25).trace
    saw_top1 = saw_incomplete_threshold = False
    for s, _, complete, drafts, picks in _rule_facts(t, tau):
        above = {d.position for d in drafts if d.p > tau}
        if above:  # every mask above tau, nothing else
            assert {c.position for c in picks} == above and all(c.how == "threshold" for c in picks)
            saw_incomplete_threshold |= not complete
        elif complete and drafts:  # none above: exactly the most confident one
            best = max(drafts, key=lambda d: d.p)
            assert [(c.position, c.how) for c in picks] == [(best.position, "fallback")]
            saw_top1 = True
        else:  # incomplete and nothing confident: the block waits
            assert picks == []
    assert saw_top1 or tau < 0.5  # a low threshold may always find a confident mask
    assert saw_incomplete_threshold or tau > 0.5  # an incomplete block decodes its confident masks


@pytest.mark.parametrize("score,key", [("margin", lambda d: d.margin), ("neg_entropy", lambda d: -d.entropy)])
def test_confidence_score_picks_the_top1(models, score, key):
    t = run(models["llada"], confidence_threshold=0.99, confidence_score=score).trace
    picked = 0
    for s, _, complete, drafts, picks in _rule_facts(t, 0.99):
        if complete and drafts and not any(d.p > 0.99 for d in drafts):
            best = max(drafts, key=key)
            assert [c.position for c in picks] == [best.position]
            picked += 1
    assert picked
    by_p = run(models["llada"], confidence_threshold=0.99).trace
    assert [c.position for s in by_p.steps for c in s.commits] != [c.position for s in t.steps for c in s.commits]


@pytest.mark.parametrize("fam", FAMILIES)
@pytest.mark.parametrize("T", [0.0, 1.0])
def test_never_verifying_is_the_d2f_decoder(models, fam, T):
    """Invariant 5 on the pipeline: S2D2 whose policy never verifies makes exactly the D2F decoder's steps."""
    base = run(models[fam], "d2f", temperature=T, block_add_threshold=0.25)
    for policy in (dict(policy="never"), dict(min_span_length=10_000)):
        never = run(models[fam], "d2f-s2d2", temperature=T, block_add_threshold=0.25, **policy)
        assert never.token_ids == base.token_ids and len(never.trace.forwards) == len(base.trace.forwards)
        assert [[(c.position, c.token, c.how) for c in s.commits] for s in never.trace.steps] == [
            [(c.position, c.token, c.how) for c in s.commits] for s in base.trace.steps]


@pytest.mark.parametrize("fam", FAMILIES)
def test_always_verify_checks_the_first_span_after_the_cache(models, fam):
    res = run(models[fam], "d2f-s2d2", temperature=1.0, block_add_threshold=0.25)
    t = res.trace
    kind = "verify_2l" if fam == "llada" else "verify_causal"
    assert all(s.verification is not None for s in t.steps)
    assert sum(f.kind == kind for f in t.forwards) == len(t.steps)
    crossed = False
    for s in t.steps:
        v = s.verification
        span = list(range(s.span[0], s.span[0] + s.span[1]))
        assert [r.position for r in v.positions] == span and s.span[0] == min(s.masks_before)
        crossed |= len({block_of(t, p) for p in span}) > 1  # a span may run across blocks
        verified = [c for c in s.commits if c.how in ("accepted", "resampled")]
        assert [c.position for c in verified] == span[: len(verified)]
        assert [c.how for c in verified] == ["accepted"] * v.accepted_len + (["resampled"] if v.resampled is not None
                                                                               else [])
    assert crossed
    assert any(s.verification.first_reject is not None for s in t.steps)
    assert res.metrics["num_drafts"] == len(t.steps)


@pytest.mark.parametrize("fam", FAMILIES)
def test_the_dream_stability_preset(models, fam):
    t = run(models[fam], "d2f-s2d2-dream", temperature=1.0).trace
    cfg = s2d2.preset("d2f-s2d2-dream")
    assert (cfg.allow_resample, cfg.draft_confidence_threshold) == (False, 0.5)
    for s in t.steps:
        v = s.verification
        assert v.resampled is None and not any(c.how == "resampled" for c in s.commits)
        for r in v.positions[: v.accepted_len]:
            assert r.p > 0.5  # a verified draft also needs p above the gate
        if v.first_reject is not None:  # the rejected draft is never committed as verified
            rej = v.positions[v.first_reject].position
            assert all(c.how != "accepted" for c in s.commits if c.position == rej)


def test_verify_confidence_threshold(models):
    t = run(models["llada"], "d2f-s2d2", temperature=1.0, verify_confidence_threshold=0.02).trace
    kinds = set()
    for s in t.steps:
        v = s.verification
        if v.first_reject is not None:
            q = v.positions[v.first_reject].q
            kinds.add(v.resampled is not None)
            assert (v.resampled is not None) == (q >= 0.02)
    assert kinds == {True, False}


def test_reference_fallback_leaves_incomplete_blocks_to_the_verifier(models):
    t = run(models["llada"], "d2f-s2d2", block_add_threshold=0.0, decoded_token_threshold=1.0,
            confidence_threshold=0.3, pipeline_fallback="reference").trace
    default = run(models["llada"], "d2f-s2d2", block_add_threshold=0.0, decoded_token_threshold=1.0,
                  confidence_threshold=0.3).trace
    for s in t.steps:
        complete = {r.block: r.complete for r in s.in_flight}
        for c in s.commits:
            if not complete[block_of(t, c.position)]:
                assert c.how in ("accepted", "resampled")
    incomplete_rule = [c for s in default.steps for c in s.commits if c.how == "threshold"
                       and not {r.block: r.complete for r in s.in_flight}[block_of(default, c.position)]]
    assert incomplete_rule  # the default lets them run the D2F rule


@pytest.mark.parametrize("fam", FAMILIES)
def test_a_stop_id_ends_the_pipeline(models, fam):
    free = run(models[fam], block_add_threshold=0.25, gen_length=32)
    stop = free.token_ids[6]  # a token the model decodes early: make it the stop id
    model = models[fam]
    saved = model.spec.stop_ids
    model.spec.stop_ids = [stop]
    try:
        res = run(model, block_add_threshold=0.25, gen_length=32)
    finally:
        model.spec.stop_ids = saved
    t = res.trace
    at = next(i for i, s in enumerate(t.steps) for c in s.commits if c.token == stop)
    assert not any(e.event == "added" for s in t.steps[at + 1:] for e in s.events)
    assert len(t.blocks) < 8 and stop not in res.token_ids and t.footer.stop_position is not None


@pytest.mark.parametrize("fam", FAMILIES)
def test_greedy_exact_and_sampled_acceptance(models, fam):
    for mode, T in (("greedy_exact", 0.0), ("sampled", 1.0)):
        t = run(models[fam], "d2f-s2d2", acceptance=mode, temperature=T).trace
        assert all(s.verification.mode == mode for s in t.steps)
    greedy = run(models[fam], "d2f-s2d2", acceptance="greedy_exact").trace
    for s in greedy.steps:  # accepted drafts are the verifier's argmax; the resampled token is argmax q
        v = s.verification
        assert all(r.draft == r.argmax_q for r in v.positions[: v.accepted_len])
        if v.resampled is not None:
            assert v.resampled == v.positions[v.first_reject].argmax_q


@pytest.mark.parametrize("policy", [dict(policy="score_threshold", score_threshold=0.5),
                                    dict(policy="score_hysteresis", hysteresis_on=0.6, hysteresis_off=0.2),
                                    dict(policy="contextual_bandit_ucb")])
def test_other_policies_route_the_pipeline(models, policy):
    t = run(models["dream"], "d2f-s2d2", temperature=1.0, **policy).trace
    decisions = [s.decision.verify for s in t.steps]
    assert t.steps and all(s.policy_inputs.window_len == s.window[1] - s.window[0] for s in t.steps)
    from s2d2.policies import redecide
    cfg = s2d2.DecodeConfig.from_dict(t.header.config)
    assert [d.verify for d in redecide(cfg, [(s.policy_inputs, s.reward) for s in t.steps])] == decisions


def test_the_mask_token_is_never_drafted(models):
    model = models["llada"]
    head = model.model.lm_head.weight
    saved = head[M.MASK_ID].clone()
    with torch.no_grad():
        head[M.MASK_ID] = 50 * head[M.MASK_ID].sign()  # the mask token would win every argmax
    try:
        t = run(model, "d2f-s2d2").trace
    finally:
        with torch.no_grad():
            head[M.MASK_ID] = saved
    assert all(d.token != M.MASK_ID for s in t.steps for d in s.drafts)
    assert M.MASK_ID not in t.footer.output_ids and len(t.footer.output_ids) == 24


def test_stop_mid_run_rolls_back_to_the_last_complete_step(models):
    model = models["dream"]
    forward = model.forward
    calls = {"n": 0}

    def stopping(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 7:
            raise StopDecoding()
        return forward(*args, **kwargs)

    model.forward = stopping
    try:
        res = run(model, "d2f-s2d2")
    finally:
        del model.forward
    t = res.trace
    assert t.footer.finish_reason == "cancelled" and len(t.forwards) < 7
    assert all(f.index < len(t.forwards) for s in t.steps for f in [t.forwards[i] for i in s.forwards])


def test_the_pipeline_forward_mask():
    assert segments_pattern((3, 2)).int().tolist() == [[1, 1, 1, 0, 0], [1, 1, 1, 0, 0], [1, 1, 1, 0, 0],
                                                      [1, 1, 1, 1, 1], [1, 1, 1, 1, 1]]
    m = segments_pattern((2, 2, 2))
    assert m[5].tolist() == [True] * 6 and m[2].tolist() == [True] * 4 + [False] * 2


@pytest.mark.parametrize("settings,words", [
    (dict(loop="pipeline", method="ar"), "method"),
    (dict(loop="pipeline", remasking="sequential"), "remasking"),
    (dict(loop="pipeline", kv_reuse=True, cache_ver=True, draft_ver=True), "kv_reuse"),
    (dict(loop="pipeline", cache_ver=True), "cache_ver"),
    (dict(loop="pipeline", sub_block_length=2), "sub_block_length"),
    (dict(loop="pipeline", block_length=32, gen_length=16), "gen_length"),
    (dict(loop="pipeline", method="diffusion", draft_confidence_threshold=0.5), "draft_confidence_threshold"),
    (dict(loop="pipeline", method="diffusion", pipeline_fallback="reference"), "pipeline_fallback"),
    (dict(block_add_threshold=0.2), "block_add_threshold"),
    (dict(loop="pipeline", decoded_token_threshold=1.5), "decoded_token_threshold"),
    (dict(loop="pipeline", confidence_score="entropy"), "confidence_score"),
])
def test_invalid_pipeline_settings_are_refused(settings, words):
    with pytest.raises(ValueError, match=words):
        s2d2.DecodeConfig(**settings).validate()


def test_other_loops_keep_their_config_header():
    assert "block_add_threshold" not in s2d2.preset("sdar-config-b").to_dict()
    d = s2d2.preset("d2f").to_dict()
    assert d["loop"] == "pipeline" and d["block_add_threshold"] == 0.5 and d["decoded_token_threshold"] == 0.8


def test_trace_rules_refuse_a_broken_pipeline_trace(models):
    data = json.loads(run(models["llada"], block_add_threshold=0.25).trace.to_json())
    cases = []
    bad = json.loads(json.dumps(data))
    bad["steps"][0]["in_flight"][0]["block"] = 5  # a block that has not joined
    cases.append((bad, "in_flight"))
    bad = json.loads(json.dumps(data))
    bad["steps"][1]["events"] = bad["steps"][0]["events"]  # "added" twice
    cases.append((bad, "events"))
    bad = json.loads(json.dumps(data))
    bad["steps"][0]["window"] = [bad["steps"][0]["window"][0], bad["steps"][0]["window"][0] + 3]
    cases.append((bad, "window"))
    bad = json.loads(json.dumps(data))
    bad["blocks"][1]["start"] += 1
    cases.append((bad, "blocks"))
    for trace, words in cases:
        with pytest.raises(ValueError, match=words):
            Trace.from_dict(trace)


def test_min_span_length_and_ratio_gamma(models):
    t = run(models["llada"], "d2f-s2d2", temperature=1.0, min_span_length=5, ratio_gamma=0.5,
            block_add_threshold=0.25).trace
    verified = [s for s in t.steps if s.verification is not None]
    assert verified and len(verified) < len(t.steps)
    for s in t.steps:  # verify iff the first span after the cache has at least 5 masks (it crosses blocks)
        assert (s.verification is not None) == (s.span[1] >= 5) == s.decision.verify
    for s in verified:  # r = min(1, (q / p) ** gamma)
        for r in s.verification.positions:
            assert r.ratio == pytest.approx(min(1.0, (r.q / max(r.p, 1e-12)) ** 0.5), rel=1e-5)


def _one_block(p: list[float], scores: list[float], threshold: float, complete: bool, reference: bool):
    """A block's rule written out plainly (module docstring of pipeline_rules.py): (chosen, took its top-1)."""
    high = [s >= threshold for s in scores] if reference else [v > threshold for v in p]
    if not complete:
        return ([False] * len(p) if reference else high), False
    if any(high) or not p:
        return high, False
    best = max(range(len(scores)), key=lambda i: (scores[i], -i))  # the first of equal bests
    return [i == best for i in range(len(p))], True


@pytest.mark.parametrize("reference", [False, True])
def test_the_blocks_rule_runs_over_many_blocks_as_over_each_alone(reference):
    """`block_rules` over blocks of different fill (empty ones too), complete or not, ties included, against each
    block's rule written out (so a block's picks do not depend on the blocks beside it)."""
    from s2d2.decoding.pipeline_rules import block_rules
    g = torch.Generator().manual_seed(3)
    width, threshold = 6, 0.6
    blocks = []
    for k in range(40):
        n = int(torch.randint(0, width + 1, (1,), generator=g))
        cols = sorted(torch.randperm(width, generator=g)[:n].tolist())
        p = torch.rand(len(cols), generator=g, dtype=torch.float64)
        if k % 5 == 0:  # ties, and nothing above the threshold
            p = torch.full((len(cols),), 0.25, dtype=torch.float64)
        blocks.append((cols, p.tolist(), (1 - p).tolist() if reference else p.tolist(), bool(k % 3)))
    block_of = torch.tensor([j for j, (cols, *_) in enumerate(blocks) for _ in cols], dtype=torch.long)
    col = torch.tensor([c for cols, *_ in blocks for c in cols], dtype=torch.long)
    p = torch.tensor([v for _, ps, _, _ in blocks for v in ps], dtype=torch.float64)
    scores = torch.tensor([v for _, _, ss, _ in blocks for v in ss], dtype=torch.float64)
    done = torch.tensor([c for *_, c in blocks])
    threshold_used = 0.5 if reference else threshold
    chosen, took = block_rules(p, scores, block_of, col, done, width, threshold_used, reference)
    want = [_one_block(ps, ss, threshold_used, c, reference) for _, ps, ss, c in blocks]
    assert chosen.tolist() == [v for w, _ in want for v in w]
    assert took.tolist() == [t for _, t in want]
    assert any(t for _, t in want) and any(any(w) for w, t in want if not t)  # both kinds of pick happened
