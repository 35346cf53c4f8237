"""A forward computes only what some row reads (s2d2/models/read_rows.py, issue 37): the lm_head runs over the read
rows alone, on the CPU the query rows nothing read or kept needs are dropped, and the read logits are the full
forward's (float64, summation order aside) at batch 1 and in a padded batch."""
from __future__ import annotations

import pytest
import torch
from transformers import DynamicCache

from s2d2.models.base import ForwardRequest, QueryMask
from s2d2.models.masks import draft_pattern, to_additive, verify_2l_pattern, widen
from s2d2.models.dense_layers import light_layers
from s2d2.models.read_rows import head_logits, may_cut, needed_rows, plan_rows, read_index
from tests.support.tiny_models import MASK_ID, tiny_qwen2_model, tiny_qwen3, tiny_qwen3_model, tiny_qwen3_moe_model

B = 4
PROMPT = torch.tensor([5, 17, 42, 9, 100, 7])


def _cached(model, n: int = 6):
    """A cache holding the first n prompt tokens."""
    cache = model.new_cache()
    model.forward(cache, PROMPT[:n], torch.arange(n), "causal", keep=n, last=1)
    return cache


def _verify(model, span: list[int], n: int = 6) -> ForwardRequest:
    """A 2L verifier request over the block after n cached tokens whose span is `span` (block offsets)."""
    block = torch.tensor([11, 12, 13, 14])
    pos = torch.arange(n, n + B)
    return ForwardRequest(_cached(model, n), torch.cat([block, torch.full((B,), MASK_ID)]), torch.cat([pos, pos]),
                          QueryMask(verify_2l_pattern(B)), 0, B, torch.tensor(span, dtype=torch.long))


def _draft(model, masks: list[int], n: int = 6) -> ForwardRequest:
    ids = torch.tensor([11, MASK_ID, 13, MASK_ID])
    return ForwardRequest(_cached(model, n), ids, torch.arange(n, n + B), QueryMask(draft_pattern(B, 0)), 0, None,
                          torch.tensor(masks))


def _full_logits(model, req: ForwardRequest) -> torch.Tensor:
    """The request's read rows from a forward of every query row with the head over all of them (the old path)."""
    c = req.cache.get_seq_length()
    cache = _cached(model, c)  # the same cached prefix, freshly computed
    mask = widen(req.attention.pattern, c)[None, None]
    out = model.model(input_ids=req.input_ids[None], position_ids=req.positions[None], attention_mask=mask,
                      cache=cache, use_cache=True, logits_to_keep=0).logits[0]
    q = out.shape[0]
    return out[read_index(q, req.last, req.rows, out.device)]


class _Count:
    """Rows through the lm_head and query rows through the first layer, per forward (hooks on the model)."""

    def __init__(self, model) -> None:
        self.head: list[int] = []
        self.layer: list[int] = []
        inner = model.model
        self.hooks = [inner.lm_head.register_forward_hook(
                          lambda m, a, o: self.head.append(a[0].numel() // a[0].shape[-1])),
                      inner.model.layers[0].self_attn.q_proj.register_forward_hook(
                          lambda m, a, o: self.layer.append(a[0].numel() // a[0].shape[-1]))]

    def close(self) -> None:
        for h in self.hooks:
            h.remove()


def test_the_2l_verifier_needs_the_first_half_before_the_span_and_the_span_only():
    need = needed_rows(verify_2l_pattern(B), torch.tensor([B + 1, B + 2]), 0)
    assert need.nonzero().squeeze(1).tolist() == [0, 1, B + 1, B + 2]
    assert needed_rows(verify_2l_pattern(B), torch.tensor([B]), 0).nonzero().squeeze(1).tolist() == [B]


def test_kept_rows_and_everything_a_read_row_attends_are_needed():
    assert needed_rows(draft_pattern(B, 0), torch.tensor([3]), 0).all()  # a draft row sees its whole block
    causal = torch.ones(B, B, dtype=torch.bool).tril()
    assert needed_rows(causal, torch.tensor([1]), 3).nonzero().squeeze(1).tolist() == [0, 1, 2]


def test_a_lone_verify_forward_runs_only_the_needed_rows_and_heads_only_the_read_ones():
    model = tiny_qwen3()
    req = _verify(model, [1, 2])
    want = _full_logits(model, req)
    count = _Count(model)
    try:
        got = model.forward(*req)
    finally:
        count.close()
    assert count.head == [2] and count.layer == [4]  # of 8 query rows: first half [0, 2) and the span's two
    torch.testing.assert_close(got, want.float(), rtol=1e-6, atol=1e-6)
    assert req.cache.get_seq_length() == 6  # nothing kept


def test_a_batch_forward_heads_only_the_rows_some_request_reads():
    model = tiny_qwen3()
    reqs = [_verify(model, [1, 2]), _draft(model, [1, 3], n=5), _verify(model, [0], n=4),
            ForwardRequest(_cached(model, 3), PROMPT[3:6], torch.arange(3, 6), "causal", 3, 1)]
    want = [_full_logits(model, r) if isinstance(r.attention, QueryMask) else None for r in reqs]
    count = _Count(model)
    try:
        got = model.forward_batch(reqs)
    finally:
        count.close()
    assert count.head == [2 + 2 + 1 + 1]  # the read rows, not 4 requests x the padded width
    assert count.layer == [4 * 4]  # the widest run request: 4 of the first verify's 8 rows, the draft's 4
    assert [g.shape[0] for g in got] == [2, 2, 1, 1]
    for g, w in zip(got, want):
        if w is not None:
            torch.testing.assert_close(g, w.float(), rtol=1e-6, atol=1e-6)  # float32 logits, as forward gives
    assert reqs[3].cache.get_seq_length() == 6  # the commit-like row kept its 3


def test_the_plan_cuts_the_verify_request_and_maps_its_reads_into_the_cut_rows():
    model = tiny_qwen3()
    plan = plan_rows(_verify(model, [1, 2]), 6, True)
    assert plan.request.input_ids.tolist() == [11, 12, MASK_ID, MASK_ID]
    assert plan.request.positions.tolist() == [6, 7, 7, 8] and plan.reads.tolist() == [2, 3]
    assert plan.request.last is None and plan.request.rows is None


def test_read_rows_come_back_in_the_order_asked():
    model = tiny_qwen3()
    a = model.forward(*_draft(model, [3, 1]))
    b = model.forward(*_draft(model, [1, 3]))
    torch.testing.assert_close(a, b.flip(0), rtol=1e-6, atol=1e-6)



def _inputs(raw, n: int = 3, q: int = 6, c: int = 5, seed: int = 0):
    """A padded batch's inputs over a cache of c tokens per row: ids, positions, a random 4D mask (every row sees
    itself), a cache."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, 290, (n, q), generator=g)
    pos = c + torch.arange(q).repeat(n, 1)
    mask = torch.rand(n, 1, q, c + q, generator=g) > 0.4
    mask[:, 0, torch.arange(q), c + torch.arange(q)] = True
    cache = DynamicCache(config=raw.config)
    raw(input_ids=torch.randint(0, 290, (n, c), generator=g), position_ids=torch.arange(c).repeat(n, 1), cache=cache,
        use_cache=True)
    return ids, pos, mask, cache


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
@pytest.mark.parametrize("family", ["qwen3", "qwen2"])
def test_the_dense_layers_give_the_full_forwards_read_logits_and_cache(family, attn):
    raw = (tiny_qwen3_model if family == "qwen3" else tiny_qwen2_model)(attn=attn)
    assert light_layers(raw)
    reads = [torch.tensor([5, 0]), torch.tensor([2]), torch.tensor([], dtype=torch.long)]
    ids, pos, mask, cache = _inputs(raw)
    if attn == "eager":  # hf.py hands eager attention an additive mask
        mask = to_additive(mask, torch.float64)
    full = raw(input_ids=ids, position_ids=pos, attention_mask=mask, cache=cache, use_cache=True).logits
    want = torch.cat([full[i, a] for i, a in enumerate(reads)])
    ids, pos, mask, light_cache = _inputs(raw)
    if attn == "eager":
        mask = to_additive(mask, torch.float64)
    seen: list[int] = []
    hook = raw.model.layers[-1].mlp.register_forward_hook(lambda m, a, o: seen.append(a[0].shape[0] * a[0].shape[1]))
    try:
        got = head_logits(raw, reads, ids, pos, mask, light_cache)
    finally:
        hook.remove()
    assert seen == [3 * 2]  # the last layer's MLP ran over the read rows (padded to 2 per batch row), not 3 x 6
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    for a, b in zip(cache.layers, light_cache.layers):
        assert torch.equal(a.keys, b.keys) and torch.equal(a.values, b.values)


def test_a_model_of_another_layout_runs_its_own_forward_and_keeps_every_row():
    moe = tiny_qwen3_moe_model()
    assert not light_layers(moe) and not may_cut(moe)  # its float32 router would move a float64 trace
    assert may_cut(tiny_qwen3_model())



def test_the_mlp_in_row_chunks_gives_each_row_what_the_whole_gives(monkeypatch):
    import s2d2.models.dense_layers as dense

    raw = tiny_qwen3_model()
    layer = raw.model.layers[0]
    rows = torch.randn(3, 7, raw.config.hidden_size, dtype=torch.float64)
    whole = layer.mlp(layer.post_attention_layernorm(rows))
    monkeypatch.setattr(dense, "MLP_ROWS", 4)
    seen: list[int] = []
    hook = layer.mlp.register_forward_hook(lambda m, a, o: seen.append(a[0].shape[0]))
    try:
        got = dense.mlp_rows(layer, rows)
    finally:
        hook.remove()
    assert seen == [4, 4, 4, 3, 3, 3]  # 21 rows in six near-equal chunks of at most 4
    torch.testing.assert_close(got, whole, rtol=1e-13, atol=1e-13)


def test_a_forward_that_reads_and_keeps_nothing_still_runs_its_rows():
    model = tiny_qwen3()
    req = _verify(model, [])
    plan = plan_rows(req, 6, True)
    assert int(plan.request.input_ids.shape[0]) == 2 * B and plan.reads.tolist() == []
    assert model.forward(*req).shape == (0, model.spec.vocab_size)
