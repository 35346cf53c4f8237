"""The batch-first step's rules over many rows at once (issue 37): the routing summary (route_summary.py) and the
acceptance test (acceptance.py `acceptance_rows`) give every row, bit for bit, what its lone batch-1 call gives; the
engine runs them once per span length of a step, not once per row; and a batch decode keeps the collector off the
heap it found (heap_freeze.py) without leaving the process frozen.
"""
from __future__ import annotations

import gc
import threading
from typing import Any

import pytest
import torch

import s2d2
from s2d2.config import ESTIMATORS, DecodeConfig
from s2d2.decoding import heap_freeze, lockstep_verify, route_summary
from s2d2.decoding.acceptance import acceptance, acceptance_each, acceptance_rows
from s2d2.decoding.draws import make_generator
from s2d2.decoding.step import window_has_mask, window_masks
from tests.support.batch_cases import model64
from tests.support.golden_cases import PROMPTS

SIZES = [5, 3, 5, 1, 8, 3, 5]  # masks per row
SPANS = [2, 3, 2, 1, 4, 1, 5]  # first span per row: several rows share a length, several do not


def _rows(seed: int = 0, vocab: int = 11) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    probs = torch.softmax(torch.randn(sum(SIZES), vocab, generator=g, dtype=torch.float64) * 3, -1)
    return probs, probs.max(-1).values


def _each_row(parts: route_summary.SummaryParts) -> list[dict[str, torch.Tensor]]:
    """Each row's summary as its own dict, read out of the bucketed tensors (what batch 1's policy_summary gives)."""
    out = [{"n_hi": view} for view in parts.n_hi.unbind(0)]
    for rows, summary in parts.buckets:
        for name, views in summary.items():
            for j, view in zip(rows, views.unbind(0)):
                out[j][name] = view
    return out


def _one(values: torch.Tensor, j: int) -> torch.Tensor:
    start = sum(SIZES[:j])
    return values[start : start + SIZES[j]].clone()  # a row of its own, as batch 1 holds it


@pytest.mark.parametrize("estimator", ESTIMATORS)
@pytest.mark.parametrize("scope", ["span", "masks"])
def test_a_routing_summary_over_many_rows_is_each_rows_own_bit_for_bit(estimator, scope):
    cfg = DecodeConfig(method="s2d2", estimator=estimator, ucb_entropy_scope=scope, confidence_threshold=0.5)
    probs, p = _rows()
    many = _each_row(route_summary.summary_parts(cfg, probs, p, SIZES, SPANS, sure_prefix=True))
    for j in range(len(SIZES)):  # what batch 1 computes (step.py `policy_summary`) on the row held alone
        row_probs, row_p, s = _one(probs, j), _one(p, j), SPANS[j]
        alone = {**route_summary.span_summary(cfg, row_probs[:s], row_p[:s], row_probs if scope == "masks" else None,
                                              True), "n_hi": (row_p > cfg.confidence_threshold).sum()}
        assert many[j].keys() == alone.keys() == {"alphas", "k_hat", "n_hi", "mean_entropy", "sure_prefix"}
        for name, value in alone.items():
            assert value.dtype == many[j][name].dtype and torch.equal(value, many[j][name]), (j, name)


@pytest.mark.parametrize("mode,gamma,sample", [("paper", 1.0, False), ("paper", 0.7, False),
                                               ("sampled", 1.0, True), ("greedy_exact", 1.0, False)])
def test_an_acceptance_test_over_many_rows_is_each_rows_own_with_its_own_draws(mode, gamma, sample):
    g = torch.Generator().manual_seed(1)
    rows, s, vocab = 5, 3, 9
    q = torch.softmax(torch.randn(rows, s, vocab, generator=g, dtype=torch.float64), -1)
    p_probs = torch.softmax(torch.randn(rows, s, vocab, generator=g, dtype=torch.float64), -1)
    drafts = (torch.multinomial(p_probs.view(-1, vocab), 1, generator=g).view(rows, s) if sample
              else p_probs.argmax(-1))
    p = p_probs.gather(-1, drafts[..., None]).squeeze(-1)
    many = acceptance_rows(mode, drafts, p, q, gamma, [make_generator("torch", 10 + i, "cpu") for i in range(rows)],
                           with_argmax=True)
    for i in range(rows):
        alone = acceptance(mode, drafts[i].clone(), p[i].clone(), q[i].clone(), gamma,
                           make_generator("torch", 10 + i, "cpu"), with_argmax=True)
        row = acceptance_each(many)[i]  # what the engine hands row i
        for name in ("q_draft", "ratio", "draws", "accepted", "argmax_q", "argmax_q_prob"):
            a, b = getattr(alone, name), getattr(row, name)
            assert (a is None and b is None) or torch.equal(a, b), (i, name)
    if mode != "greedy_exact":  # each row drew from its own source: the rows' uniforms differ
        assert len({tuple(many.draws[i].tolist()) for i in range(rows)}) == rows


def test_routing_and_acceptance_run_once_per_span_length_of_a_step_not_once_per_row(monkeypatch):
    """Eight S2D2 sequences of different prompts: in each step the estimator and the acceptance test run once per
    distinct span length among the rows they serve (one call carries every row of that length), and together
    those calls carry every row the step routed or tested."""
    from s2d2.decoding import lockstep, lockstep_block

    step = [0]
    calls: dict[str, list[tuple[int, int, int]]] = {"acceptance_alphas": [], "acceptance_rows": []}  # (step, s, rows)
    served = {"drafted": 0, "acceptance_test": 0}

    def spy(module: Any, name: str, record: Any) -> None:
        real = getattr(module, name)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            record(*args)
            return real(*args, **kwargs)

        monkeypatch.setattr(module, name, wrapper)

    spy(lockstep.Lockstep, "_step", lambda *a: step.__setitem__(0, step[0] + 1))
    spy(route_summary, "acceptance_alphas",
        lambda cfg, probs, *a: calls["acceptance_alphas"].append((step[0], probs.shape[-2], probs.shape[0])))
    spy(lockstep_verify, "acceptance_rows",
        lambda mode, drafts, *a: calls["acceptance_rows"].append((step[0], drafts.shape[-1], drafts.shape[0])))
    spy(lockstep_block, "drafted", lambda *a: served.__setitem__("drafted", served["drafted"] + 1))
    spy(lockstep_verify, "acceptance_test",
        lambda *a: served.__setitem__("acceptance_test", served["acceptance_test"] + 1))
    prompts = [PROMPTS[k] for k in sorted(PROMPTS)] + [[7, 8, 9], [5, 6, 7, 8, 9, 10], [3, 4], [9, 8, 7, 6],
                                                      [2, 3, 4, 5, 6]]
    cfg = s2d2.DecodeConfig(method="s2d2", policy="always", gen_length=16, block_length=4)
    got = s2d2.generate_batch(model64("aligned"), prompts[:8], cfg, list(range(8)), batch_size=8, detailed=False,
                              engine="batch-first")
    assert len(got) == 8 and served["drafted"] >= 8 * 4 and served["acceptance_test"] >= 8 * 4
    for name, rows in (("acceptance_alphas", "drafted"), ("acceptance_rows", "acceptance_test")):
        keys = [(st, s) for st, s, _ in calls[name]]
        assert len(keys) == len(set(keys)), f"{name}: two calls for one span length in one step"
        assert sum(r for *_, r in calls[name]) == served[rows]
        assert max(r for *_, r in calls[name]) >= 4  # one call carried four rows


def test_a_batch_decode_freezes_the_heap_it_found_and_unfreezes_it_after():
    seen: list[tuple[int, int]] = []
    cfg = s2d2.DecodeConfig(method="ar", gen_length=4)
    s2d2.generate_batch(model64("aligned"), [PROMPTS["a"]] * 3, cfg, [0, 1, 2], batch_size=2, detailed=False,
                        engine="batch-first",
                        on_result=lambda i, r: seen.append((heap_freeze.holders(), gc.get_freeze_count())))
    assert len(seen) == 3 and all(h == 1 and frozen > 0 for h, frozen in seen)
    assert heap_freeze.holders() == 0 and gc.get_freeze_count() == 0


def test_a_batch_decode_alone_freezes_each_steps_survivors_so_no_older_pass_walks_its_growing_records():
    """Each step's survivors join the frozen heap (heap_freeze.py `refreeze`): the collector's oldest walked
    generation, which every full pass walks, never holds more than one step's survivors, where without the
    refreeze it grows with every record the batch has made (over 6,000 objects after the first results here)."""
    oldest: list[int] = []
    model = model64("aligned")
    prompts = ([PROMPTS[k] for k in sorted(PROMPTS)] * 6)[:16]
    cfg = s2d2.preset("fastdllm-config-a", gen_length=64)
    old = gc.get_threshold()
    gc.set_threshold(700, 10, 10)  # CPython's defaults, whatever the test run set
    try:
        s2d2.generate_batch(model, prompts, cfg, list(range(16)), batch_size=16, detailed=False,
                            engine="batch-first", on_result=lambda i, r: oldest.append(len(gc.get_objects(2))))
    finally:
        gc.set_threshold(*old)
    assert len(oldest) == 16 and max(oldest) < 2000, oldest
    assert heap_freeze.holders() == 0 and gc.get_freeze_count() == 0


def test_while_a_decode_refreezes_young_passes_wait_for_many_new_containers_and_the_thresholds_come_back():
    """A refreezing decode raises the first generation's threshold (heap_freeze.py `STEP_YOUNG`: a step's records
    all survive it, so young passes over them are wasted); a second holder gets the caller's thresholds back, and
    so does everyone once the last holder leaves."""
    old = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    try:
        seen: list[int] = []
        s2d2.generate_batch(model64("aligned"), [PROMPTS["a"]] * 3, s2d2.preset("sdar-config-b", gen_length=16),
                            [0, 1, 2], batch_size=3, detailed=False, engine="batch-first",
                            on_result=lambda i, r: seen.append(gc.get_threshold()[0]))
        assert seen == [heap_freeze.STEP_YOUNG] * 3
        assert gc.get_threshold() == (700, 10, 10)
        with heap_freeze.frozen_heap():
            assert heap_freeze.refreeze() and gc.get_threshold()[0] == heap_freeze.STEP_YOUNG
            with heap_freeze.frozen_heap():  # another decode joins: it never refreezes, so the usual passes
                assert gc.get_threshold() == (700, 10, 10) and not heap_freeze.refreeze()
            assert heap_freeze.refreeze() and gc.get_threshold()[0] == heap_freeze.STEP_YOUNG
        assert gc.get_threshold() == (700, 10, 10) and heap_freeze.holders() == 0
    finally:
        gc.set_threshold(*old)


def test_a_decode_refreezes_only_while_it_holds_the_freeze_alone():
    with heap_freeze.frozen_heap():
        assert heap_freeze.refreeze()
        with heap_freeze.frozen_heap():  # another decode (the live batch, a second batch) holds it too
            assert not heap_freeze.refreeze()
    assert heap_freeze.holders() == 0 and gc.get_freeze_count() == 0


def test_the_heap_stays_frozen_until_the_last_of_two_overlapping_decodes_ends_even_one_that_raises():
    inside, release = threading.Event(), threading.Event()

    def first() -> None:
        with heap_freeze.frozen_heap():
            inside.set()
            release.wait(30)

    t = threading.Thread(target=first)
    t.start()
    assert inside.wait(30)
    with pytest.raises(RuntimeError):
        with heap_freeze.frozen_heap():
            assert heap_freeze.holders() == 2
            raise RuntimeError("a decode fails")
    assert heap_freeze.holders() == 1 and gc.get_freeze_count() > 0  # the other decode still holds it
    release.set()
    t.join(30)
    assert heap_freeze.holders() == 0 and gc.get_freeze_count() == 0


def test_on_an_accelerators_cost_one_forward_per_step_carries_every_live_row_whatever_its_phase(monkeypatch):
    """At the accelerator's fixed cost (batch.py `fixed_tokens_for`) every step is ONE forward over all live rows
    (prefill, draft, 2L verify and commit rows of different sequences), each sequence still its batch-1 trace; at
    the CPU's cost the same batch splits some steps' rows into several forwards."""
    from s2d2.decoding import lockstep
    from s2d2.decoding.batch import FIXED_TOKENS, FIXED_TOKENS_ACCELERATOR, fixed_tokens_for
    from tests.support.batch_cases import assert_batch_equals_single

    model = model64("aligned")
    assert fixed_tokens_for(model) == FIXED_TOKENS
    assert fixed_tokens_for(type("Gpu", (), {"device": torch.device("cuda")})()) == FIXED_TOKENS_ACCELERATOR
    steps = [0]
    real = lockstep.Lockstep._step

    def counted(self: Any, live: list[Any]) -> None:
        steps[0] += 1
        real(self, live)

    monkeypatch.setattr(lockstep.Lockstep, "_step", counted)
    prompts = [PROMPTS["a"], PROMPTS["b"], [7, 8, 9, 10, 11], [3, 4], [5, 6, 7, 8, 9, 10, 11, 12, 13]]
    cfgs = [s2d2.DecodeConfig(method="s2d2", policy="always", gen_length=16, block_length=4),
            s2d2.DecodeConfig(method="diffusion", gen_length=16, block_length=4),
            s2d2.DecodeConfig(method="s2d2", policy="score_threshold", score_threshold=0.5, gen_length=16,
                              block_length=8, temperature=1.0),
            s2d2.preset("sdar-config-b", gen_length=16), s2d2.DecodeConfig(method="ar", gen_length=6)]
    forwards = {}
    for cost in (FIXED_TOKENS, FIXED_TOKENS_ACCELERATOR):
        monkeypatch.setattr(model, "batch_fixed_tokens", cost, raising=False)
        steps[0] = 0
        got = assert_batch_equals_single(model, prompts, cfgs, [0, 1, 2, 3, 4], batch_size=5, detailed=False)
        forwards[cost] = len(got[0].batch.forwards)
        if cost == FIXED_TOKENS_ACCELERATOR:
            assert forwards[cost] == steps[0]
            assert any(len({got[s].trace.forwards[f].kind for s, f in zip(bf.sequences, bf.seq_forwards)}) >= 3
                       for bf in got[0].batch.forwards)
    assert forwards[FIXED_TOKENS] > forwards[FIXED_TOKENS_ACCELERATOR]


@pytest.mark.parametrize("remasking", ["low_confidence_static", "low_confidence_dynamic", "sequential"])
def test_a_skips_remasking_rule_runs_once_over_the_padded_rows_not_once_per_row(remasking, monkeypatch):
    """S2D2 rows that may skip: what a skip would decode comes from one run of the rule over the step's padded draft
    rows (never the per-row call in step.py), and each sequence still decodes as alone."""
    from s2d2.decoding import lockstep_block, step
    from tests.support.trace_compare import trace_mismatch

    calls = {"per_row": 0, "shared": 0}

    def counted(module: Any, key: str) -> None:
        real = module.skip_inputs

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            calls[key] += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(module, "skip_inputs", wrapper)

    counted(step, "per_row")
    counted(lockstep_block, "shared")
    cfg = s2d2.DecodeConfig(method="s2d2", policy="score_threshold", score_threshold=0.5, gen_length=16,
                            block_length=8, remasking=remasking)
    prompts = [PROMPTS["a"], PROMPTS["b"], [7, 8, 9, 10, 11], [3, 4]]
    model = model64("aligned")
    got = s2d2.generate_batch(model, prompts, cfg, [0, 1, 2, 3], batch_size=4, detailed=False, engine="batch-first")
    assert calls["per_row"] == 0 and calls["shared"] > 0
    for i, (g, prompt) in enumerate(zip(got, prompts)):
        want = s2d2.generate(model, prompt, cfg, seed=i, detailed=False)
        assert g.token_ids == want.token_ids and trace_mismatch(g.trace, want.trace) is None, f"sequence {i}"
    assert calls["per_row"] > 0  # alone, the same rule runs per step in step.py


def test_a_windows_masks_by_bisection_are_the_filter_over_the_blocks_ascending_masks():
    g = torch.Generator().manual_seed(3)
    for _ in range(200):
        masks = sorted(set(torch.randint(0, 32, (int(torch.randint(0, 20, (1,), generator=g)),), generator=g).tolist()))
        lo = int(torch.randint(-2, 34, (1,), generator=g))
        hi = lo + int(torch.randint(0, 12, (1,), generator=g))
        assert window_masks(masks, lo, hi) == [m for m in masks if lo <= m < hi]
        assert window_has_mask(masks, lo, hi) == any(lo <= m < hi for m in masks)
