"""The LLaDA2.x editing loop (s2d2/decoding/editing.py, docs/editing.md): the edit rule on hand-built logits,
post-mask steps, EOS early stop and commits, what verification means next to an edit, and exactness with
editing off."""
from __future__ import annotations

import copy

import pytest
import torch

import s2d2
from tests.support.tiny_models import StopAt, tiny_qwen2, tiny_qwen3
from s2d2 import DecodeConfig
from s2d2.decoding.editing import edit_positions
from tests.support.scripted_model import MASK, STOP, ScriptedModel

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
    # strictly above the threshold only (τ_edit = the edit's own p: no edit); and never with editing off
    p_edit = next(e.p for s in on.trace.steps for e in s.edits)
    assert edits(run(model, method="diffusion", editing_threshold=p_edit)) == []
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
    assert "ALWAYS verifies" in s2d2.presets()["llada2-conservative"]  # labelled honestly:
    # docs/algorithm.md, 'Where we deviate from the reference code'
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
    """docs/algorithm.md, 'Where we deviate from the reference code': the reference's prefill passes a {0,1} float mask;
    every mask here is bool (or a named pattern)."""
    model = ScriptedModel({(9, 10): (4, 0.9)}, fill_p=0.6)
    res = run(model, prompt=list(range(1, 10)), method="s2d2", policy="always", editing_threshold=0.5)
    kinds = [f.kind for f in res.trace.forwards]
    assert kinds[0] == "prefill" and "verify_2l" in kinds
    for kind, attention in zip(kinds, model.attention):
        assert attention in ("full", "causal") or attention.dtype == torch.bool, (kind, attention)
    assert isinstance(model.attention[0], torch.Tensor)  # the prefill's block-causal mask


# -- the editing loop inside everything else the library does (Stop, time limit, backends, trace rules, files) ------

def edited_run_model() -> ScriptedModel:
    """Edits while masks remain (position 4: 5 -> 9) and in a mask-free step after block 1's last mask (7: 8 -> 12)."""
    return ScriptedModel({(4, 5): (9, 0.8), (7, 8): (12, 0.9)},
                         fill=lambda pos: 5 if pos == 4 else 1 + pos % 10, fill_p=0.6)


EDITED = dict(method="s2d2", policy="mask_span_length", min_span_length=3, editing_threshold=0.5, max_post_steps=2)


def _shape(t):
    return ([(f.kind, f.block, f.step, f.cache_len, f.query_tokens) for f in t.forwards], t.blocks, t.steps,
            t.footer.output_ids)


def test_a_stop_raised_by_a_forward_rolls_an_editing_run_back_to_its_last_complete_block():
    """The app's Stop (a forward raises StopDecoding) ends an editing run at once, its trace what should_stop gives
    at the end of the last complete block: edits of the dropped block are undone with its commits, and the trace
    passes the validator."""
    full = run(edited_run_model(), **EDITED).trace
    assert {e.position for s in full.steps for e in s.edits} == {4, 7}
    assert any(s.edits and not s.masks_before for s in full.steps)  # a post step edited
    forwards, blocks, steps, output = _shape(full)
    kept = set()
    for n in range(len(full.forwards)):
        stopped = StopAt(edited_run_model(), n)
        t = run(stopped, **EDITED).trace
        assert stopped.calls == n and t.footer.finish_reason == "cancelled"
        f, b, s, out = _shape(t)
        assert (f, b, s, out) == (forwards[:len(f)], blocks[:len(b)], steps[:len(s)], output[:len(out)])
        assert out == t.replay() and s2d2.Trace.from_json(t.to_json()).to_dict() == t.to_dict()
        if t.blocks:
            checks = iter(range(1, len(full.blocks) + 1))
            cfg = DecodeConfig(loop="editing", block_length=4, gen_length=9, **EDITED)
            same = s2d2.generate(edited_run_model(), PROMPT, cfg, should_stop=lambda: next(checks) == len(t.blocks))
            assert _shape(same.trace) == (f, b, s, out)
        kept.add(len(t.blocks))
    assert kept == set(range(len(full.blocks)))  # every block boundary is reached by some stop


def test_time_limit_ends_an_editing_run_after_a_block_with_a_valid_trace():
    res = s2d2.generate(edited_run_model(), PROMPT, DecodeConfig(loop="editing", block_length=4, gen_length=9,
                                                                 **EDITED), max_seconds=0.0)
    assert res.trace.footer.finish_reason == "time_limit" and len(res.trace.blocks) == 1
    assert s2d2.Trace.from_json(res.trace.to_json()).replay() == res.token_ids


@pytest.mark.parametrize("option", ["kv_reuse", "fused_commit", "adaptive_block"])
def test_the_editing_loop_refuses_the_block_loop_options_in_one_message(option):
    with pytest.raises(ValueError) as err:
        s2d2.preset("llada2-quality", cache_ver=True, draft_ver=True, **{option: True})
    assert str(err.value).startswith(f"{option}: not available with loop='editing'")
    assert "\n" not in str(err.value) and "turn it off" in str(err.value)


def test_a_static_backend_warms_up_the_editing_loops_block_before_the_timer():
    class Warmed(ScriptedModel):
        warmed: list = []

        def warmup(self, **kw):
            self.warmed.append(kw)

    model = Warmed(fill_p=0.99)
    run(model, method="diffusion", editing_threshold=0.5)
    assert model.warmed == [{"block_lengths": [4], "max_length": 12}]  # blocks 0..2 of 4 positions


def test_trace_rules_for_edits():
    """check_trace relates each edit to its run: editing loop on, a generated decoded position of the step's block,
    a different token, p above τ_edit; the step bound admits the post steps the header allows."""
    good = run(edited_run_model(), **EDITED).trace.to_dict()
    at = next(i for i, s in enumerate(good["steps"]) if s.get("edits"))

    def refused(change, match):
        data = copy.deepcopy(good)
        change(data, data["steps"][at], data["steps"][at]["edits"][0])
        with pytest.raises(ValueError, match=match):
            s2d2.Trace.from_dict(data)

    s2d2.Trace.from_dict(copy.deepcopy(good))
    refused(lambda d, s, e: d["header"]["config"].update(loop="block", editing_threshold=None, max_post_steps=0),
            r"edits: only the editing loop")
    refused(lambda d, s, e: e.update(position=1), r"edits: at most 4 positions, each a generated position")
    refused(lambda d, s, e: e.update(position=11), r"edits: at most 4 positions, each a generated position")
    refused(lambda d, s, e: e.update(p=0.5), r"edits: position \d+: old \d+ -> new \d+ at p 0.5")
    refused(lambda d, s, e: e.update(new=e["old"]), r"two different token ids")
    refused(lambda d, s, e: e.update(new=16), r"two different token ids below 16")
    refused(lambda d, s, e: s["edits"].append(dict(e)), r"each position once")
    refused(lambda d, s, e: s["masks_before"].append(e["position"]), r"decoded before the step")
    refused(lambda d, s, e: e.update(p=1.5), r"edits\[0\]\.p: must be <= 1")
    refused(lambda d, s, e: e.update(extra=1), r"edits\[0\]\.extra: unknown field")
    # one token per step: 13 steps over 9 generated positions and 3 blocks, which only max_post_steps = 2 admits
    slow = run(ScriptedModel({(7, 8): (12, 0.9)}, fill_p=0.6), method="diffusion", editing_threshold=0.5,
               max_post_steps=2).trace.to_dict()
    assert len(slow["steps"]) == 13 and s2d2.Trace.from_dict(copy.deepcopy(slow))
    slow["header"]["config"]["max_post_steps"] = 0
    with pytest.raises(ValueError, match=r"trace\.steps: 13 steps; a run of 9 positions has at most 12"):
        s2d2.Trace.from_dict(slow)
    shifted = copy.deepcopy(good)
    shifted["header"]["model"]["alignment"] = "shifted"
    with pytest.raises(ValueError, match=r"trace\.header\.config\.loop: 'editing'.*position-aligned"):
        s2d2.Trace.from_dict(shifted)


def test_traces_without_edits_keep_their_old_form_and_results_files_keep_edits_per_token():
    plain = run(ScriptedModel(), method="diffusion").trace.to_dict()
    assert all("edits" not in s for s in plain["steps"])  # written only by steps that edit
    from s2d2.sweeps.results_file import validate_results
    from s2d2.sweeps.grid import COLUMNS

    cell = {k: None for k in COLUMNS} | {"name": "x", "method": "s2d2", "n": 1, "edits_per_token": 0.25}
    assert validate_results({"version": 1, "cells": [cell]})["cells"][0]["edits_per_token"] == 0.25
    old = {k: v for k, v in cell.items() if k != "edits_per_token"}  # a file written before editing existed
    assert validate_results({"version": 1, "cells": [old]})["cells"][0]["edits_per_token"] is None
