"""Random configs, mixed in one batch, decode as alone (tests/support/random_configs.py): every sequence of a
`generate_batch` (the batch-first engine wherever it covers the config, else the thread engine) has its own
`generate` tokens, NFE and trace, in float64; in a third of the cases one sequence is stopped at a random forward,
in the batch and alone alike.

Four models: the sharpened tiny random ones (position-aligned and right-shifted) and the D2F fixtures (LLaDA and
Dream). The seeded cases cover combinations of policies, estimators, acceptance modes, remasking rules, sampling,
the options beyond the paper and block sizes that the hand-picked batch tests do not name. (The bundled LLaDA2 MoE
is left out: its router computes in float32 whatever the model's dtype, so a lone one-row forward's last bits differ
from the same row's in a batch: s2d2/models/read_rows.py `may_cut`.)"""
from __future__ import annotations

import random

import pytest

from tests.support.batch_cases import StopsOne, assert_batch_equals_single
from tests.support.random_configs import VOCAB, case_models, random_case

CASES_PER_MODEL = 8


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return case_models(tmp_path_factory.mktemp("random-configs"))


@pytest.mark.parametrize("family", list(VOCAB))
@pytest.mark.parametrize("number", range(CASES_PER_MODEL))
def test_random_configs_in_one_batch_decode_as_alone(models, family, number):
    rng = random.Random(f"{family}-{number}")
    case = random_case(rng, family, VOCAB[family])
    model = models[family]
    if number % 3 == 0:  # one sequence stopped at a random forward (its prompt's first id marks it: made unique)
        j = rng.randrange(len(case.prompts))
        case.prompts[j] = [VOCAB[family] - 1, *case.prompts[j]]
        for k, p in enumerate(case.prompts):
            if k != j and p[0] == VOCAB[family] - 1:
                p[0] = 3
        model = StopsOne(model, VOCAB[family] - 1, rng.randint(1, 12))
    assert_batch_equals_single(model, case.prompts, case.cfgs, case.seeds, batch_size=case.batch_size,
                               detailed=case.detailed)
