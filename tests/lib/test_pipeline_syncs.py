"""Host transfers of the pipeline loop (s2d2/decoding/pipeline.py), counted on the CPU (s2d2/host_syncs.py): the
same discipline as the block loop. A step reads once after its draft (the drafts, every block's rule, the policy's
inputs) and once more after a verifier; a residual token waiting on the device is read early only when it decides
whether a block joins (it may be a stop id); no step uploads host data."""
from __future__ import annotations

import pytest
import torch

from fixtures import tiny_d2f as M
import s2d2
import s2d2.decoding.pipeline as pipeline
from s2d2.host_syncs import HostSyncCounter

PROMPT = [5, 9, 17, 33, 2, 71, 3]
CONFIGS = {
    "d2f": dict(preset="d2f"),
    "d2f sampled": dict(preset="d2f", temperature=1.0),
    "s2d2": dict(preset="d2f-s2d2"),
    "s2d2 sampled": dict(preset="d2f-s2d2", temperature=1.0, acceptance="sampled"),
    "s2d2 dream preset": dict(preset="d2f-s2d2-dream"),
    "s2d2 greedy_exact, span 3": dict(preset="d2f-s2d2", acceptance="greedy_exact", min_span_length=3),
    "s2d2 gates": dict(preset="d2f-s2d2", verify_confidence_threshold=0.05, temperature=1.0,
                       pipeline_fallback="reference"),
}


@pytest.fixture(scope="module", params=["llada", "dream"])
def model(request, tmp_path_factory):
    write = M.write_llada if request.param == "llada" else M.write_dream
    return s2d2.load_model(write(tmp_path_factory.mktemp(request.param)), device="cpu", dtype=torch.float64)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_pipeline_step_reads_once_and_once_more_after_a_verifier(model, monkeypatch, name):
    settings = dict(CONFIGS[name])
    cfg = s2d2.preset(settings.pop("preset"), block_length=4, gen_length=24, confidence_threshold=0.5, **settings)
    counter = HostSyncCounter(model)
    per_step: list[tuple[bool, int, int]] = []
    step = pipeline.pipeline_step

    def counted(*args, **kwargs):
        reads, uploads = counter.reads, counter.uploads
        record = step(*args, **kwargs)
        per_step.append((record.verification is not None, counter.reads - reads, counter.uploads - uploads))
        return record

    monkeypatch.setattr(pipeline, "pipeline_step", counted)
    with counter:
        res = s2d2.generate(model, PROMPT, cfg, seed=0, detailed=False)
    assert len(per_step) == len(res.trace.steps) and any(b for b, _, _ in per_step) == (cfg.method == "s2d2")
    for verified, reads, uploads in per_step:
        assert reads <= (2 if verified else 1) and uploads == 0, counter.summary()
    resamples = sum(1 for s in res.trace.steps if s.verification and s.verification.resampled is not None)
    outside = counter.reads - sum(r for _, r, _ in per_step)
    assert outside <= resamples + 1, counter.summary()  # an early residual read before a block joins; the output
    assert counter.uploads == 1, counter.summary()  # the prompt, once per run
