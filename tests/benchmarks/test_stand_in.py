"""benchmarks/stand_in.py: the stand-in model's batched forward gives every request exactly what its lone forward
gives (rows read, `last` rows, every row) and grows each cache by its own `keep`, so the host figure's two engines
decode the same sequences whichever way their forwards are grouped."""
from __future__ import annotations

import torch

import s2d2
from benchmarks.stand_in import StandInModel, stand_in_prompts
from s2d2.models.base import ForwardRequest


def request(model: StandInModel, start: int, q: int, keep: int, last=None, rows=None) -> ForwardRequest:
    ids = torch.zeros(q, dtype=torch.long)
    return ForwardRequest(model.new_cache(), ids, torch.arange(start, start + q), "full", keep, last, rows)


def test_a_batched_forward_gives_each_request_its_lone_forwards_rows_and_cache_growth():
    model = StandInModel("aligned")
    batch = [request(model, 10, 8, 0, rows=torch.tensor([5, 2, 7])), request(model, 40, 4, 4, last=1),
             request(model, 0, 6, 6), request(model, 100, 8, 0, rows=torch.tensor([0])),
             request(model, 3, 8, 2, last=3)]
    lone = [model.forward(model.new_cache(), r.input_ids, r.positions, r.attention, r.keep, r.last, r.rows)
            for r in batch]
    got = model.forward_batch(batch)
    assert len(got) == len(batch)
    for g, want in zip(got, lone):
        assert torch.equal(g, want)
    assert [r.cache.get_seq_length() for r in batch] == [0, 4, 6, 0, 2]


def test_both_engines_decode_the_stand_in_to_the_same_tokens():
    model, cfg = StandInModel("aligned"), s2d2.preset("sdar-config-b", gen_length=16)
    prompts = stand_in_prompts(6)
    runs = {engine: s2d2.generate_batch(model, prompts, cfg, list(range(6)), batch_size=6, detailed=False,
                                        engine=engine) for engine in ("threads", "batch-first")}
    assert [r.token_ids for r in runs["threads"]] == [r.token_ids for r in runs["batch-first"]]
    assert [r.metrics["nfe"] for r in runs["threads"]] == [r.metrics["nfe"] for r in runs["batch-first"]]
