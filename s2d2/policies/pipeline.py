"""The pipeline loop's options (D2F, `loop="pipeline"`; the loop is s2d2/decoding/pipeline.py): knobs and checks.

D2F's knobs keep the reference names; `confidence_threshold` is D2F's `skip_threshold` (as it is LLaDA2's
τ_mask), and `confidence_score` folds the reference's two flags `margin_confidence` / `neg_entropy` into one
choice. Defaults are the reference demo's (`example_d2f.py`: add at 0.5, complete at 0.8, skip at 0.9; its
generate functions' own defaults are 0.1 / 0.5 / 0.9).

Reference S2D2-on-D2F knobs offered: `min_ssd_span_length` (= `min_span_length`), `allow_resample`,
`ssd_ratio_tempering_factor` (= `ratio_gamma`), `ssd_threshold_draft_confidence` + `draft_confidence_threshold`
(one optional threshold here), `verify_confidence_threshold`. Not offered: `target_block_size` > 1 (for the
right-shifted family the reference's mask then lets the row that predicts a draft see that draft; the verifier of
docs/algorithm.md is AR, block size 1), `min_tokens_per_step` > 1 and `ssd_partial_ar_span` (extras that commit more
than the verifier checked, off in the reference demo), `cache_ver` / `draft_ver` (the reference asserts them equal and
never reads them).
"""
from __future__ import annotations

from typing import Any

from .knob import Knob

SCORES = ("probability", "margin", "neg_entropy")  # what picks the top-1 of a complete block
FALLBACKS = ("d2f", "reference")
# Pipeline fields and their defaults: DecodeConfig.to_dict leaves them out of other loops' configs (every trace
# recorded before the pipeline existed keeps its header byte for byte).
DEFAULTS: dict[str, Any] = {"block_add_threshold": 0.5, "decoded_token_threshold": 0.8,
                            "confidence_score": "probability", "draft_confidence_threshold": None,
                            "verify_confidence_threshold": None, "pipeline_fallback": "d2f"}

KNOBS = (
    Knob("block_add_threshold", "Add a block at progress", "float", 0.0, 1.0, 0.05, whatif=False, short="τ_add",
         help="a new block of masks joins the pipeline when the last block is this fraction decoded"),
    Knob("decoded_token_threshold", "Next block complete at", "float", 0.0, 1.0, 0.05, whatif=False,
         short="τ_complete",
         help="once a block is this fraction decoded, the next one counts as complete: it decodes at least one "
              "token per step"),
    Knob("confidence_score", "Top-1 pick by", "choice", choices=SCORES, whatif=False, advanced=True,
         help="how a complete block with no mask above the threshold picks its one token: probability, top-1 "
              "minus top-2 margin, or negative entropy"),
    Knob("draft_confidence_threshold", "Accept only drafts with p above", "float", 0.0, 1.0, 0.05, optional=True,
         whatif=False, advanced=True, short="τ_draft",
         help="a verified draft also needs p above this (the reference's Dream stability setting: 0.5)"),
    Knob("verify_confidence_threshold", "Resample only if q(draft) at least", "float", 0.0, 1.0, 0.05,
         optional=True, whatif=False, advanced=True,
         help="at a rejection, draw the residual only when the verifier gave the rejected draft this much "
              "probability; otherwise the position stays masked"),
    Knob("pipeline_fallback", "Blocks the verifier decoded nothing in", "choice", choices=FALLBACKS,
         whatif=False, advanced=True,
         help="d2f: they run the D2F rule (so never verifying is the D2F decoder); reference: as the reference's "
              "S2D2-on-D2F, only complete blocks fall back and incomplete ones wait"),
)

_REFUSED = {  # option -> why the pipeline refuses it
    "kv_reuse": "the pipeline already caches a finished block with the next forward",
    "fused_commit": "the pipeline already caches a finished block with the next forward",
    "adaptive_block": "the pipeline's blocks all have block_length",
    "cache_ver": "D2F's cache is block-causal, as it was trained (the reference accepts cache_ver but never reads it)",
    "draft_ver": "D2F's cache is block-causal, as it was trained (the reference accepts draft_ver but never reads it)",
    "always_check_high_conf": "extras are not defined for the pipeline",
}


def check(cfg: Any) -> None:
    """One ValueError naming a field when a pipeline option is set outside the pipeline loop, or the pipeline is
    combined with something it does not define."""
    if cfg.loop != "pipeline":
        for name, default in DEFAULTS.items():
            if getattr(cfg, name) != default:
                raise ValueError(f"{name}: a pipeline option; it needs loop='pipeline' (D2F)")
        return
    if cfg.method == "ar":
        raise ValueError("loop: 'pipeline' decodes blocks by diffusion; use method 'diffusion' or 's2d2'")
    if cfg.remasking != "low_confidence_dynamic":
        raise ValueError("remasking: the pipeline's rule is D2F's (every mask above confidence_threshold, or the "
                         "top-1 of a complete block): use 'low_confidence_dynamic'")
    for name in ("sub_block_length", "denoising_steps", "ratio_threshold"):
        if getattr(cfg, name) is not None:
            raise ValueError(f"{name}: not defined for loop='pipeline'; leave it unset")
    for name, why in _REFUSED.items():
        if getattr(cfg, name):
            raise ValueError(f"{name}: not available with loop='pipeline': {why}")
    if cfg.gen_length < cfg.block_length:
        raise ValueError(f"gen_length: the pipeline decodes gen_length // block_length blocks; {cfg.gen_length} < "
                         f"block_length {cfg.block_length} gives none")
    s2d2_only = ("draft_confidence_threshold", "verify_confidence_threshold")
    for name in s2d2_only:
        if getattr(cfg, name) is not None and cfg.method != "s2d2":
            raise ValueError(f"{name}: acts on verification; it needs method 's2d2'")
    if cfg.pipeline_fallback != "d2f" and cfg.method != "s2d2":
        raise ValueError("pipeline_fallback: acts on S2D2 steps; the D2F decoder (method 'diffusion') has one rule")
