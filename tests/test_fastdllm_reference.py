"""The right-shifted family (Fast-dLLM v2) where its reference code decides (issue 18, item 5): UCB progress counts
every non-mask of the sub-block, prompt tail and AR seed included (docs/algorithm.md, 'Family variants',
'Routing policies'); the output ends with the last decoded block (the reference also returns the next block's argmax
seed; we do not, docs/faithfulness.md, 'Fast-dLLM v2: the stop rule and the reference check')."""
from __future__ import annotations

import pytest

import s2d2
from s2d2 import DecodeConfig
from scripted_model import PositionScripted

UCB = dict(method="s2d2", policy="contextual_bandit_ucb", acceptance="greedy_exact")


def _decisions(res):
    return [s for s in res.trace.steps if s.decision is not None]


def test_ucb_progress_counts_the_prompt_tail_and_the_seed_on_fast_dllm_v2():
    # Prompt of 7 tokens, block 8, sub-block 4: the first window with a mask is [4, 8), holding prompt tokens 4-6
    # and one mask. The reference's progress is 3 non-masks / 4 = 0.75 -> progress bin 1, so with a one-token span
    # (span bin 0) and confident drafts (entropy bin 0) decision 0 lands in bucket (0·2 + 1)·2 + 0 = 2. Excluding
    # the prompt tail, as on SDAR, would put it in bucket 0.
    model = PositionScripted("shifted", {})
    res = s2d2.generate(model, [1, 2, 3, 4, 5, 6, 7], DecodeConfig(block_length=8, sub_block_length=4, gen_length=16,
                                                                   **UCB))
    first = _decisions(res)[0]
    assert first.window == [4, 8] and first.policy_inputs.progress == pytest.approx(0.75)
    assert first.decision.details["bins"] == [0, 1, 0] and first.decision.details["bucket"] == 2
    # Block 1 opens on the AR seed at position 8: its first window [8, 12) has 1 non-mask of 4 (the seed).
    second_block = next(s for s in _decisions(res) if s.window[0] == 8)
    assert second_block.policy_inputs.progress == pytest.approx(0.25)
    assert any(c.how == "ar_seed" and c.position == 8 for s in res.trace.steps for c in s.commits)


def test_ucb_progress_still_excludes_the_prompt_tail_on_position_aligned_models():
    model = PositionScripted("aligned", {})
    res = s2d2.generate(model, [1, 2, 3, 4, 5, 6, 7], DecodeConfig(block_length=8, gen_length=16, **UCB))
    first = _decisions(res)[0]
    assert first.window == [0, 8] and first.policy_inputs.progress == 0.0  # 7 prompt tokens are not progress
    assert first.decision.details["bucket"] == 0


@pytest.mark.parametrize("prompt_len", [6, 8])
def test_the_output_ends_with_the_last_decoded_block(prompt_len):
    # The reference commits the last block and appends argmax(last logit), the seed of a block it never decodes:
    # one token more than its blocks hold (G + 1 tokens when the prompt fills whole blocks). We keep the commit's
    # forward (NFE as the reference counts it) but return only the decoded blocks' tokens, never more than G.
    model = PositionScripted("shifted", {})
    gen, block = 16, 8
    res = s2d2.generate(model, list(range(1, prompt_len + 1)),
                        DecodeConfig(method="diffusion", remasking="sequential", block_length=block, gen_length=gen))
    blocks = res.trace.blocks
    assert len(blocks) == gen // block and res.trace.header.total_length == blocks[-1].start + block
    assert len(res.token_ids) == blocks[-1].start + block - prompt_len <= gen
    kinds = res.metrics["nfe_by_kind"]
    assert kinds["commit"] == len(blocks)  # the last block is committed, as the reference does
    seeds = [c.position for s in res.trace.steps for c in s.commits if c.how == "ar_seed"]
    assert max(seeds) < blocks[-1].start + block  # no seed past the last block
