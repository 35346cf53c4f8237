"""The diffusion baselines' every option on the batch-first step (issue 37, s2d2/decoding/lockstep_block.py
`_rules`): sub-blocks, entropy-bounded remasking and the high-confidence extras, alone and together with KV reuse
and fused commits, on both families, and configs of the batch form and of the per-row form in one batch.

Each runs in float64 inside a batch with fewer slots than prompts, with `engine="batch-first"` named and the thread
engine refusing to run, so a silent fall-back cannot pass; each sequence's tokens, NFE and trace must equal its lone
`generate` decode's (tests/support/trace_compare.py). Each test also checks that its option really acted (a window
smaller than the block, a step decoding more than one token by the entropy bound, an extra).
"""
from __future__ import annotations

from typing import Any

import pytest

import s2d2
from s2d2 import DecodeConfig
from s2d2.decoding import batch as thread_engine
from s2d2.decoding.lockstep import covers
from tests.support.batch_cases import assert_batch_equals_single, model64

PROMPTS = [list(range(5, 15)), [3, 1, 4, 1, 5, 9, 2, 6], list(range(40, 60)), [7, 8, 9], [11]]
SEEDS = [3, 1, 4, 1, 5]
BASE = dict(method="diffusion", gen_length=24, block_length=8)
OPTIONS = {
    "sub-blocks": dict(sub_block_length=2, remasking="low_confidence_dynamic", confidence_threshold=0.5),
    "entropy-bounded": dict(remasking="entropy_bounded", eb_gamma=1.0),
    "extras, static": dict(always_check_high_conf=True, confidence_threshold=0.3),
    "extras, dynamic": dict(always_check_high_conf=True, remasking="low_confidence_dynamic", confidence_threshold=0.3),
    "extras, sequential": dict(always_check_high_conf=True, remasking="sequential", confidence_threshold=0.3),
    "all, sampled": dict(sub_block_length=4, remasking="entropy_bounded", eb_gamma=1.0, always_check_high_conf=True,
                         confidence_threshold=0.3, temperature=0.8, kv_reuse=True, fused_commit=True, cache_ver=True,
                         draft_ver=True),
}


@pytest.fixture(autouse=True)
def no_threads(monkeypatch) -> None:
    """The thread engine raises if used: what passes ran on the batch-first engine."""
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the thread engine ran")

    monkeypatch.setattr(thread_engine.Scheduler, "run", refuse)


def acted(name: str, results: list[Any]) -> bool:
    """Whether option `name` changed a step somewhere in `results` (so its batch form really ran)."""
    steps = [s for r in results for s in r.trace.steps]
    checks = {"sub-blocks": lambda s: s.window[1] - s.window[0] < 8,
              "entropy-bounded": lambda s: len(s.commits) > 1,
              "all, sampled": lambda s: s.window[1] - s.window[0] < 8 and any(c.how == "hiconf_extra"
                                                                             for c in s.commits)}
    check = checks.get(name, lambda s: any(c.how == "hiconf_extra" for c in s.commits))
    return any(check(s) for s in steps)


@pytest.mark.parametrize("family", ["aligned", "shifted"])
@pytest.mark.parametrize("name", list(OPTIONS))
def test_a_baseline_option_decodes_each_sequence_as_alone(family, name):
    model = model64(family)
    cfg = DecodeConfig(**{**BASE, **OPTIONS[name]}).validate()
    assert covers(cfg, model)
    for detailed in (True, False):
        results = assert_batch_equals_single(model, PROMPTS, cfg, SEEDS, batch_size=3, detailed=detailed)
    assert acted(name, results)


@pytest.mark.parametrize("family", ["aligned", "shifted"])
def test_batch_form_and_per_row_rules_share_one_step(family):
    """Rows of a config whose rule runs once over all of them (dynamic), of two per-row configs (entropy-bounded,
    extras) and an S2D2 row, interleaved in one batch: each keeps its own rule and its lone answer."""
    cfgs = [DecodeConfig(**{**BASE, **OPTIONS[n]}) for n in ("sub-blocks", "entropy-bounded", "extras, dynamic")]
    cfgs.append(s2d2.preset("sdar-config-b", gen_length=24, block_length=8))
    order = [cfgs[k % len(cfgs)] for k in range(len(PROMPTS))]
    assert_batch_equals_single(model64(family), PROMPTS, order, SEEDS, batch_size=4)
