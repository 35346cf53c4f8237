"""The LLaDA2.x editing loop (s2d2/decoding/editing.py, docs/editing.md): the edit rule on hand-built logits,
post-mask steps, EOS early stop and commits, what verification means next to an edit, and exactness with
editing off."""
from __future__ import annotations

import pytest
import torch

import s2d2
from conftest import tiny_qwen2, tiny_qwen3
from s2d2 import DecodeConfig
from s2d2.decoding.editing import edit_positions
from scripted_model import MASK, STOP, ScriptedModel

PROMPT = [1, 2, 3]  # P = 3: block 0 holds the prompt tail and one mask (B = 4)


def run(model, prompt=PROMPT, seed=0, **kw):
    kw = {"loop": "editing", "block_length": 4, "gen_length": 9, **kw}
    return s2d2.generate(model, prompt, DecodeConfig(**kw), seed=seed)


def edits(result):
    return [(e.position, e.old, e.new, round(e.p, 6)) for s in result.trace.steps for e in s.edits]


# -- the rule ------------------------------------------------------------------------------------------------------

def test_edit_rule_on_hand_built_logits():
    current = torch.tensor([7, 8, MASK, 5, 6, 4])
    is_mask = current == MASK
    drafts = torch.tensor([9, 9, 2, 5, 1, 3])
    p = torch.tensor([0.99, 0.95, 0.99, 0.99, 0.51, 0.50])
    # position 0: prompt; 1: edit; 2: a mask is filled, never edited; 3: same token; 4: p 0.51 > 0.5; 5: not > 0.5
    assert edit_positions(is_mask, 1, current, drafts, p, 0.5).tolist() == [1, 4]
    assert edit_positions(is_mask, 0, current, drafts, p, 0.5).tolist() == [0, 1, 4]
    assert edit_positions(is_mask, 1, current, drafts, p, 0.96).tolist() == []
    assert edit_positions(is_mask, 0, current, drafts, p, None).tolist() == []


def test_edit_replaces_a_decoded_token_and_is_recorded():
    # masks fill one per step (p 0.6 < tau_mask 0.85); once position 4 holds 5, the model prefers 9 there (p 0.8)
    model = ScriptedModel({(4, 5): (9, 0.8)}, fill=lambda pos: 5 if pos == 4 else 1 + pos % 10, fill_p=0.6)
    on = run(model, method="diffusion", editing_threshold=0.5)
    assert edits(on) == [(4, 5, 9, 0.8)]
    step = next(s for s in on.trace.steps if s.edits)
    assert step.block == 1 and step.masks_before  # edited while masks remained; the edit needs no mask
    assert on.token_ids[4 - len(PROMPT)] == 9
    assert on.metrics["edits"] == 1 and on.metrics["edits_per_token"] == pytest.approx(1 / len(on.token_ids))
    # above the threshold only; and never with editing off
    assert edits(run(model, method="diffusion", editing_threshold=0.8)) == []
    off = run(model, method="diffusion")
    assert edits(off) == [] and off.token_ids[4 - len(PROMPT)] == 5
    # the trace rebuilds the edited output, also after a JSON round trip
    again = s2d2.Trace.from_json(on.trace.to_json())
    assert again.replay() == on.token_ids
    assert again.canvas_at(step.index)[4] == 5 and again.canvas_at(step.index + 1)[4] == 9


def test_prompt_tokens_are_never_edited():
    model = ScriptedModel({(2, 3): (11, 0.99), (1, 2): (11, 0.99)}, fill_p=0.6)
    assert all(e[0] >= len(PROMPT) for e in edits(run(model, method="diffusion", editing_threshold=0.1)))


def test_post_steps_edit_a_full_block_and_stop_without_edits():
    # position 7 is the last mask of block 1 to fill; afterwards it wants 12 instead of its fill (8)
    model = ScriptedModel({(7, 8): (12, 0.9)}, fill=lambda pos: 1 + pos % 10, fill_p=0.6)
    none = run(model, method="diffusion", editing_threshold=0.5, max_post_steps=0)
    assert edits(none) == []  # the block ends with its last mask: no mask-free step
    two = run(model, method="diffusion", editing_threshold=0.5, max_post_steps=2)
    assert edits(two) == [(7, 8, 12, 0.9)]
    block1 = [s for s in two.trace.steps if s.block == 1]
    # 4 filling steps, one mask-free step that edits, one mask-free step without edits that ends the block
    assert [len(s.masks_before) for s in block1] == [4, 3, 2, 1, 0, 0]
    assert [len(s.edits) for s in block1] == [0, 0, 0, 0, 1, 0]
    # one extra draft in blocks 0 and 2 (a mask-free step without edits), two in block 1
    assert two.metrics["nfe"] == none.metrics["nfe"] + 4


def test_last_block_and_eos_block_are_not_committed():
    model = ScriptedModel(fill=lambda pos: 1 + pos % 10)  # p 0.99: a block fills in one step
    full = run(model, method="diffusion", gen_length=9)  # blocks 0, 1, 2 (positions 0..11); P < B: no prefill
    assert full.metrics["nfe_by_kind"] == {"draft": 3, "commit": 2}  # the last block's KV is never needed
    assert full.trace.footer.finish_reason == "length"
    eos = run(ScriptedModel(fill=lambda pos: STOP if pos == 5 else 1 + pos % 10), method="diffusion", gen_length=9)
    assert eos.metrics["nfe_by_kind"] == {"draft": 2, "commit": 1}  # block 1 holds EOS: stop before its commit
    assert eos.token_ids == [4, 5] and eos.trace.footer.finish_reason == "stop_token"


def test_verifier_reads_the_edited_block_and_never_judges_an_edit():
    """docs/editing.md rule: edits are decided by the draft before verification; the 2L first half holds them."""
    # the AR verifier disagrees at 5 (step 0: accept 4, resample 5) and at 6 (step 1, next to the edit at 4)
    model = ScriptedModel({(4, 5): (9, 0.8)}, fill=lambda pos: 5 if pos == 4 else 1 + pos % 10, fill_p=0.6,
                          verify_script={5: (12, 0.99), 6: (13, 0.99)})
    res = run(model, method="s2d2", policy="always", acceptance="greedy_exact", editing_threshold=0.5)
    step = next(s for s in res.trace.steps if s.edits)
    assert step.verification is not None and step.step == 1
    kind, ids, positions = model.calls[step.forwards[-1]]  # forward i of the trace is the model's call i
    assert kind == "2l"
    first_half = dict(zip(positions[:4], ids[:4]))
    assert first_half[4] == 9  # the edit is in the verifier's context
    assert all(r.position != 4 for r in step.verification.positions)  # an edit is never a verified position
    assert step.verification.first_reject == 0  # the verifier rejects the draft at 6 ...
    assert [e.new for e in step.edits] == [9]  # ... and the edit stands anyway
    assert {c.position: c.how for c in step.commits} == {6: "resampled"}
    assert res.token_ids[6 - len(PROMPT)] == 13


@pytest.mark.parametrize("block", [4, 8])
def test_greedy_exact_always_verify_is_ar_with_editing_off(block):
    model = tiny_qwen3(seed=1)
    model.model.model.norm.weight.data *= 25  # peaked distributions: drafts and verifier disagree often
    for prompt in ([5, 6, 7, 8, 9, 10, 11], list(range(40, 72))):
        ar = s2d2.generate(model, prompt, DecodeConfig(method="ar", gen_length=20))
        sp = s2d2.generate(model, prompt, DecodeConfig(loop="editing", method="s2d2", policy="always",
                                                       acceptance="greedy_exact", cache_ver=True,
                                                       block_length=block, gen_length=20))
        assert sp.token_ids == ar.token_ids and len(ar.token_ids) > 0
        assert sp.metrics["verify_rate"] == 1.0 and sp.metrics["edits"] == 0


def test_never_verify_equals_the_editing_baseline():
    model = ScriptedModel({(4, 5): (9, 0.8)}, fill=lambda pos: 5 if pos == 4 else 1 + pos % 10, fill_p=0.6)
    base = run(model, method="diffusion", editing_threshold=0.5, confidence_threshold=0.5)
    never = run(model, method="s2d2", policy="never", editing_threshold=0.5, confidence_threshold=0.5)
    assert never.token_ids == base.token_ids and never.metrics["nfe"] == base.metrics["nfe"]
    assert edits(never) == edits(base)


def test_presets_and_validation():
    cons = s2d2.preset("llada2-conservative")
    assert (cons.loop, cons.block_length, cons.confidence_threshold, cons.editing_threshold) == ("editing", 32, 0.95,
                                                                                               0.9)
    assert "ALWAYS verifies" in s2d2.presets()["llada2-conservative"]  # labelled honestly (spec §9)
    assert s2d2.preset("llada2-quality-noedit").editing_threshold is None
    with pytest.raises(ValueError, match="editing_threshold"):
        DecodeConfig(editing_threshold=0.5).validate()
    with pytest.raises(ValueError, match="loop"):
        DecodeConfig(loop="editing", method="ar").validate()
    with pytest.raises(ValueError, match="max_post_steps"):
        DecodeConfig(loop="editing", max_post_steps=10_000).validate()
    with pytest.raises(ValueError, match="position-aligned"):
        s2d2.generate(tiny_qwen2(seed=0), [5, 6, 7], DecodeConfig(loop="editing", block_length=4, gen_length=4))


def test_masks_are_bool_never_float():
    """Spec §9: the reference's prefill passes a {0,1} float mask; every mask here is bool (or a named pattern)."""
    model = ScriptedModel({(9, 10): (4, 0.9)}, fill_p=0.6)
    res = run(model, prompt=list(range(1, 10)), method="s2d2", policy="always", editing_threshold=0.5)
    kinds = [f.kind for f in res.trace.forwards]
    assert kinds[0] == "prefill" and "verify_2l" in kinds
    for kind, attention in zip(kinds, model.attention):
        assert attention in ("full", "causal") or attention.dtype == torch.bool, (kind, attention)
    assert isinstance(model.attention[0], torch.Tensor)  # the prefill's block-causal mask
