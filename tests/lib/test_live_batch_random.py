"""The Space's live batch with random configs (tests/support/random_configs.py): decodes submitted one after another
while the batch already runs (so they join at whatever step they reach it), some stopped by their flag at a random
forward, on a CPU's or an accelerator's grouping of the shared forwards; each result is its lone `generate` (the
flag read before each of its forwards alone too: live_jobs.py `StopOnFlag`), tokens, NFE and trace, in float64.

Where the decodes join depends on the threads' timing; the answer must not, which is what this checks."""
from __future__ import annotations

import random
from typing import Any, Optional

import pytest

import s2d2
from s2d2.api import prepare
from s2d2.decoding.decoder import make_check
from s2d2.decoding.live_batch import LiveBatch
from s2d2.decoding.live_jobs import Decode, StopOnFlag
from tests.support.random_configs import VOCAB, case_models, random_case
from tests.support.trace_compare import trace_mismatch

WAIT = 300.0  # a bound on waiting for a result, so a broken batch fails instead of hanging (never a timing test)


class RaisedAt:
    """A stop flag that goes up at its `n`-th read (never, for None)."""

    def __init__(self, n: Optional[int]) -> None:
        self.n, self.reads = n, 0

    def __call__(self) -> bool:
        self.reads += 1
        return self.n is not None and self.reads >= self.n


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return case_models(tmp_path_factory.mktemp("live-random"))


def never() -> bool:
    return False


@pytest.mark.parametrize("family", list(VOCAB))
@pytest.mark.parametrize("number", range(3))
def test_random_decodes_joining_a_live_batch_decode_as_alone(models, family, number):
    rng = random.Random(f"live-{family}-{number}")
    case = random_case(rng, family, VOCAB[family])
    model = models[family]
    stops = [rng.randint(1, 10) if rng.random() < .3 else None for _ in case.prompts]
    alone: list[Any] = []
    for prompt, cfg, seed, at in zip(case.prompts, case.cfgs, case.seeds, stops):
        alone.append(s2d2.generate(StopOnFlag(model, RaisedAt(at)), prompt, cfg, seed=seed, detailed=case.detailed))
    batch = LiveBatch(model, max_batch=case.batch_size, fixed_tokens=rng.choice([None, 4096]),
                      name=f"live-random-{family}-{number}")
    try:
        tickets = [batch.submit(Decode(prepare(model, prompt, cfg, None, None), seed,
                                       lambda: make_check(never, None, None), RaisedAt(at), case.detailed))
                   for prompt, cfg, seed, at in zip(case.prompts, case.cfgs, case.seeds, stops)]
        got = [t.outcome(WAIT) for t in tickets]
    finally:
        batch.close()
    for i, (g, w) in enumerate(zip(got, alone)):
        assert g.token_ids == w.token_ids, f"sequence {i}"
        assert g.metrics["nfe"] == w.metrics["nfe"], f"sequence {i}"
        assert trace_mismatch(g.trace, w.trace) is None, f"sequence {i}: {trace_mismatch(g.trace, w.trace)}"
