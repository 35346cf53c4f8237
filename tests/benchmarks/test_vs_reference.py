"""benchmarks/vs_reference.py: skipped in one line without a reference checkout; its adapter gives the reference
decoder exactly our model's forward (mask semantics, KV kept or cropped) and its option mapping is complete."""
from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import s2d2
from tests.support.tiny_models import tiny_qwen3
from s2d2.models import masks

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bench():
    return importlib.import_module("benchmarks.vs_reference")


def test_without_a_checkout_it_says_so_in_one_line():
    env = {k: v for k, v in __import__("os").environ.items() if k != "S2D2_REFERENCE"}
    out = subprocess.run([sys.executable, "-m", "benchmarks.vs_reference"], cwd=ROOT, capture_output=True, text=True,
                         env=env, timeout=120)
    assert out.returncode == 0 and out.stdout.strip().count("\n") == 0
    assert "skipped" in out.stdout and "S2D2_REFERENCE" in out.stdout


def test_adapter_runs_our_forward_with_the_reference_call(bench):
    from transformers import DynamicCache

    model = tiny_qwen3(seed=0)
    adapter = bench.ReferenceAdapter(model.model)
    ids = torch.arange(5, 17)
    ours, theirs = model.new_cache(), DynamicCache()
    model.forward(ours, ids[:8], torch.arange(8), "causal", keep=8)
    adapter(ids[None, :8], torch.tril(torch.ones(1, 8, 8)), torch.arange(8)[None], theirs, store_kv=True)
    blk = torch.cat([ids[8:], torch.full((4,), 299)])
    want = model.forward(ours, blk, torch.arange(8, 16), masks.draft_query(8, 0, "cpu"), keep=0)
    mask = torch.ones(1, 8, 16)  # the reference's float 0/1 block-diffusion mask: all ones here
    got = adapter(blk[None], mask, torch.arange(8, 16)[None], theirs, store_kv=False).logits[0].float()
    assert torch.equal(got, want) and theirs.get_seq_length() == 8 and adapter.forwards == 2
    zero = torch.ones(1, 8, 16)
    zero[0, :, 12:] = 0  # a 0 is "do not attend"
    got = adapter(blk[None], zero, torch.arange(8, 16)[None], theirs, store_kv=True).logits[0].float()
    assert not torch.equal(got, want) and theirs.get_seq_length() == 16


def test_option_mapping_names_every_reference_option(bench):
    cfg = s2d2.preset("sdar-config-b")
    kwargs = bench.reference_kwargs(cfg, [1, 2], 3)
    assert kwargs["do_verify_policy"] == "score_threshold" and kwargs["ssd_entropy_temperature"] == 1.0
    assert kwargs["cache_ver"] and kwargs["draft_ver"] and kwargs["block_length"] == 16
    ours, paper = bench.setting("sdar-config-b+reuse+fused", 64)
    assert ours.kv_reuse and ours.fused_commit and not paper.kv_reuse and paper.gen_length == 64
    with pytest.raises(SystemExit, match="unknown option"):
        bench.setting("sdar-config-b+turbo", 64)
    with pytest.raises(SystemExit, match="not an SDAR S2D2 preset"):
        bench.setting("fastdllm-config-a", 64)
    params = {"mask_id", "gen_length", "block_length", "denoising_steps", "temperature", "top_k", "top_p",
              "do_sample", "remasking_strategy", "confidence_threshold", "eb_threshold", "stopping_criteria_idx",
              "cache_ver", "draft_ver", "min_ssd_span_length", "ssd_ratio_tempering_factor", "allow_resample",
              "do_verify_policy", "do_verify_score_threshold", "hysteresis_threshold_on",
              "hysteresis_threshold_off", "token_acceptance_estimator", "ssd_confidence_margin_threshold",
              "ssd_confidence_power", "ssd_entropy_threshold", "ssd_confidence_margin_coef",
              "ssd_entropy_temperature", "ucb_beta", "ucb_span_length_bins", "ucb_block_progress_bins",
              "ucb_entropy_bins", "ucb_entropy_source", "do_verify_score_type", "score_penalty_coef"}
    assert set(kwargs) == params  # the reference's keyword names (SDAR/generate_ssd_policy.py)
