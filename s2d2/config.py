"""Decoding configuration, validation and the paper presets.

`DecodeConfig` uses the reference option names where they exist. Every invalid setting raises exactly one
`ValueError` that names the field and its allowed range; nothing else escapes `validate()`.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from .config_cache import FrozenCache
from .config_types import check_type
from .limits import value_text
from .suggest import did_you_mean
from .policies import (POLICIES, REGISTRY, SCORE_TYPES, UCB_ENTROPY_SCOPES, AdaptiveBlock, all_knobs, pipeline,
                       self_correction, speedups)
from .policies.knob import check_choice as _choice
from .policies.knob import check_float as _float_range
from .policies.knob import check_int as _int_range

__all__ = ["DecodeConfig", "preset", "presets", "METHODS", "REMASKING", "POLICIES", "SCORE_TYPES", "ESTIMATORS",
           "ACCEPTANCE", "AR_ACCOUNTING", "UCB_ENTROPY_SCOPES", "LOOPS", "MAX_POST_STEPS", "MAX_GEN_LENGTH",
           "MAX_BLOCK_LENGTH", "RNGS"]

METHODS = ("ar", "diffusion", "s2d2")
REMASKING = ("low_confidence_static", "low_confidence_dynamic", "sequential", "entropy_bounded")
ESTIMATORS = (
    "hard_margin_threshold",
    "hard_entropy_threshold",
    "soft_confidence_power",
    "soft_clipped_linear_margin",
    "soft_entropy_negexp",
    "soft_renyi_2_entropy",
)
ACCEPTANCE = ("paper", "sampled", "greedy_exact")
AR_ACCOUNTING = ("fused", "reference")
LOOPS, MAX_POST_STEPS = self_correction.LOOPS, self_correction.MAX_POST_STEPS
MAX_GEN_LENGTH = 4096
MAX_BLOCK_LENGTH = 256
RNGS = ("torch", "counter")  # DecodeConfig.rng: s2d2/decoding/draws.py
# Options added after traces and sweep rows were first written: `to_dict` leaves them out at these defaults.
LATER_DEFAULTS: dict[str, Any] = {"cost_threshold": 0.0, "cost_verify_scale": 1.0, "cost_skip_value": "prefix",
                                  "trim_verify": False, "rng": "torch"}


@dataclass(frozen=True)
class DecodeConfig(FrozenCache):
    """Every knob of one decode; defaults as in the reference (docs/algorithm.md, 'Paper configurations as presets')."""

    method: str = "s2d2"
    block_length: int = 4
    denoising_steps: int | None = None  # None: equal to block_length (k_s = 1), as in every paper config
    gen_length: int = 128
    sub_block_length: int | None = None  # right-shifted family only; None: the whole block
    # baseline remasking
    remasking: str = "low_confidence_dynamic"
    confidence_threshold: float = 0.85
    eb_gamma: float = 0.35
    # routing policy
    policy: str = "mask_span_length"
    min_span_length: int = 1
    score_threshold: float = 0.0
    score_type: str = "difference_dynamic"
    penalty_coef: float = 2.0
    hysteresis_on: float = 0.0
    hysteresis_off: float = -1.0
    hysteresis_strict: bool = True  # reference experiments switch ON at s > tau_on; False uses >= (the figure)
    ucb_beta: float = 1.0
    ucb_span_bins: int = 2
    ucb_progress_bins: int = 2
    ucb_entropy_bins: int = 2
    ucb_entropy_scope: str = "span"
    cost_threshold: float = 0.0  # cost_aware (beyond the paper): verify iff E − skip·(D+V)/D >= this, in tokens
    cost_verify_scale: float = 1.0  # cost_aware: multiply the measured verifier cost (a what-if knob)
    cost_skip_value: str = "prefix"  # cost_aware: a skip's tokens that count: the span's leading ones above τ, any
    #                                  above τ ("confident"), or every pick ("all")
    # acceptance estimator
    estimator: str = "soft_entropy_negexp"
    margin_threshold: float = 0.05
    entropy_threshold: float = 0.1
    confidence_power: float = 0.8
    margin_scale: float = 1.0
    negexp_beta: float = 1.0
    # verification
    acceptance: str = "paper"
    ratio_gamma: float = 1.0
    allow_resample: bool = True
    ratio_threshold: float | None = None  # extra: unmask unchosen span positions with r_i >= thr (off in papers)
    always_check_high_conf: bool = False  # extra: unmask remaining masks with p > confidence_threshold
    cache_ver: bool = False
    draft_ver: bool = False
    # sampling
    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    # AR accounting: "fused" = 1 forward per token (commit i fused with query i+1); "reference" = B=1 diffusion
    ar_accounting: str = "fused"
    # Beyond the paper (off in every paper preset; see s2d2/decoding/kv.py and s2d2/policies/adaptive_block.py):
    kv_reuse: bool = False  # keep the verifier's causal KV of the accepted prefix (needs cache_ver + draft_ver)
    fused_commit: bool = False  # the next block's first draft forward caches this block's uncached tail
    adaptive_block: bool = False  # next block length from the last block's verifications (needs cache_ver)
    adaptive_min_block: int = 4
    adaptive_max_block: int = 32
    adaptive_shrink_below: float = 0.25
    trim_verify: bool = False  # the verifier queries only the rows its span reads (s2d2/decoding/verify_branch.py)
    # LLaDA2.x loop (docs/algorithm.md, 'Family variants'; docs/editing.md; knobs, checks: policies/self_correction.py):
    # "editing" runs edits (tau_edit = editing_threshold; None: off), up to max_post_steps mask-free steps per block,
    # EOS early stop, and no commit after the last block. confidence_threshold is its tau_mask.
    loop: str = "block"
    editing_threshold: float | None = None
    max_post_steps: int = 0
    # D2F pipeline loop (loop="pipeline", s2d2/decoding/pipeline.py; knobs and checks in s2d2/policies/pipeline.py):
    # a block joins at block_add_threshold progress of the last one, counts as complete once its predecessor is
    # decoded_token_threshold decoded; confidence_threshold is D2F's skip_threshold. Left out of to_dict() for
    # the other loops, so their traces keep the headers they always had.
    block_add_threshold: float = 0.5
    decoded_token_threshold: float = 0.8
    confidence_score: str = "probability"
    draft_confidence_threshold: float | None = None
    verify_confidence_threshold: float | None = None
    pipeline_fallback: str = "d2f"
    rng: str = "torch"  # every draw's source: torch's generator (as the reference) or "counter" (s2d2/counter_rng.py)

    @property
    def steps(self) -> int:
        return self.block_length if self.denoising_steps is None else self.denoising_steps

    @property
    def do_sample(self) -> bool:
        return self.temperature >= 1e-6

    def transfer_schedule(self) -> list[int]:
        """k_s per step: floor(B/S), the first B mod S steps one more (docs/algorithm.md,
        'How many tokens a step decodes')."""
        b, s = self.block_length, self.steps
        base, extra = divmod(b, s)
        return [base + (1 if i < extra else 0) for i in range(s)]

    def replace(self, **changes: Any) -> "DecodeConfig":
        return dataclasses.replace(self, **changes).validate()

    __hash__ = FrozenCache.fields_hash  # computed once per config (config_cache.py): rows are grouped by config

    def to_dict(self) -> dict[str, Any]:
        """Every option, except those added after traces and sweep rows were first written while at their default
        (and the pipeline's knobs outside the pipeline, where validate holds them at their defaults): leaving those out
        keeps every earlier configuration's dict (trace headers, sweep keys) as it was.
        Built once per config (config_cache.py) and handed out as a fresh copy: every trace of a batch asks."""
        return dict(self.once("_as_dict", self._fields_dict))

    def _fields_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}  # scalars: asdict minus deep copies
        for name in [n for n, d in LATER_DEFAULTS.items() if out[n] == d and type(out[n]) is type(d)]:
            del out[name]
        if self.loop != "pipeline":
            for name in pipeline.DEFAULTS:
                del out[name]
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "DecodeConfig":
        if not isinstance(data, dict):
            raise ValueError("config: expected a mapping of option names to values")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            hint = did_you_mean(unknown[0], known) if len(unknown) == 1 else ""
            raise ValueError(f"config: unknown option(s) {unknown}{hint}; known options: {sorted(known)}")
        return cls(**data).validate()

    def validate(self) -> "DecodeConfig":
        """Raise one ValueError naming the first invalid field; return self when valid."""
        for f in dataclasses.fields(self):
            check_type(f.name, getattr(self, f.name), f.type)
        _choice("method", self.method, METHODS)
        _int_range("block_length", self.block_length, 1, MAX_BLOCK_LENGTH)
        if self.denoising_steps is not None:
            _int_range("denoising_steps", self.denoising_steps, 1, self.block_length)
        _int_range("gen_length", self.gen_length, 1, MAX_GEN_LENGTH)
        if self.sub_block_length is not None:
            _int_range("sub_block_length", self.sub_block_length, 1, self.block_length)
            if self.block_length % self.sub_block_length:
                raise ValueError(
                    f"sub_block_length: must divide block_length={self.block_length}, got {self.sub_block_length}"
                )
        _choice("remasking", self.remasking, REMASKING)
        _float_range("confidence_threshold", self.confidence_threshold, 0.0, 1.0)
        _float_range("eb_gamma", self.eb_gamma, 0.0, 1e6, lo_open=True)
        _choice("policy", self.policy, POLICIES)
        for knob in all_knobs():  # every policy's and option's knobs declare their own ranges
            knob.check(getattr(self, knob.field))
        REGISTRY[self.policy].check(self)
        _choice("estimator", self.estimator, ESTIMATORS)
        _float_range("margin_threshold", self.margin_threshold, 0.0, 1.0)
        _float_range("entropy_threshold", self.entropy_threshold, 0.0, 1.0)
        _float_range("confidence_power", self.confidence_power, 0.0, 100.0, lo_open=True)
        _float_range("margin_scale", self.margin_scale, 0.0, 1e6, lo_open=True)
        _float_range("negexp_beta", self.negexp_beta, 0.0, 1e6)
        _choice("acceptance", self.acceptance, ACCEPTANCE)
        _float_range("ratio_gamma", self.ratio_gamma, 0.0, 100.0, lo_open=True)
        if self.ratio_threshold is not None:
            _float_range("ratio_threshold", self.ratio_threshold, 0.0, 1.0)
        _float_range("temperature", self.temperature, 0.0, 100.0)
        _int_range("top_k", self.top_k, 0, 10_000_000)
        _float_range("top_p", self.top_p, 0.0, 1.0, lo_open=True)
        _choice("ar_accounting", self.ar_accounting, AR_ACCOUNTING)
        _choice("rng", self.rng, RNGS)
        self_correction.check(self)  # before the block-loop options: it names the one the editing loop refuses
        pipeline.check(self)
        if self.acceptance == "greedy_exact" and self.do_sample:
            raise ValueError(f"temperature: acceptance='greedy_exact' needs temperature 0, got {self.temperature}")
        if self.acceptance == "sampled" and not self.do_sample:
            raise ValueError("temperature: acceptance='sampled' needs temperature > 0 (a sampled draft), got 0")
        if self.acceptance == "sampled" and self.ratio_gamma != 1.0:
            raise ValueError(f"ratio_gamma: acceptance='sampled' needs ratio_gamma 1.0, got {self.ratio_gamma}")
        speedups.check(self)
        if self.adaptive_block:
            AdaptiveBlock.check(self)
        return self


# ---------------------------------------------------------------------------------------------------------------
# Presets (docs/algorithm.md, 'Paper configurations as presets'); every S2D2 preset uses soft_entropy_negexp, beta 1.

_S2D2 = dict(method="s2d2", estimator="soft_entropy_negexp", negexp_beta=1.0)

_PRESETS: dict[str, tuple[dict[str, Any], str]] = {
    "ar": (
        dict(method="ar", block_length=1),
        "One token per forward, left to right (autoregressive, block size 1).",
    ),
    "dynamic-baseline": (
        dict(method="diffusion", block_length=4, remasking="low_confidence_dynamic", confidence_threshold=0.85),
        "Diffusion alone: each step keeps every draft the model gives p > 0.85 (at least its most confident one); "
        "never verifies.",
    ),
    "sdar-config-a": (
        dict(**_S2D2, block_length=4, remasking="low_confidence_dynamic", confidence_threshold=0.85,
             policy="score_threshold", score_threshold=0.0, score_type="difference_static", penalty_coef=1.0,
             cache_ver=True, draft_ver=True),
        "Blocks of 4. Verifies when the drafts are expected to win at least one token (K̂ ≥ 1), so a lone masked "
        "position practically never verifies; a skipped step keeps drafts with p > 0.85.",
    ),
    "sdar-config-b": (
        dict(**_S2D2, block_length=16, remasking="low_confidence_dynamic", confidence_threshold=0.85,
             policy="score_threshold", score_threshold=0.0, score_type="difference_static", penalty_coef=0.0,
             cache_ver=True, draft_ver=True),
        "Blocks of 16. Verifies at every step (its score K̂ − 0 is never negative): tokens are accepted strictly left "
        "to right.",
    ),
    "fastdllm-config-a": (
        dict(**_S2D2, block_length=32, sub_block_length=4, remasking="low_confidence_dynamic",
             confidence_threshold=0.9, policy="score_hysteresis", hysteresis_on=1.0, hysteresis_off=-5.0,
             score_type="difference_dynamic", penalty_coef=1.0),
        "Blocks of 32 in windows of 4. Verifying turns on once the expected accepted tokens beat the confident drafts "
        "by more than 1 (s = K̂ − N_hi > 1) and, in windows of 4, never turns off.",
    ),
    "fastdllm-config-b": (
        dict(**_S2D2, block_length=32, sub_block_length=16, remasking="low_confidence_dynamic",
             confidence_threshold=0.9, policy="score_hysteresis", hysteresis_on=1.0, hysteresis_off=-5.0,
             score_type="difference_dynamic", penalty_coef=1.0),
        "As Fast-dLLM config A in windows of 16: verifying turns off only when at least 6 drafts are confident.",
    ),
    "fastdllm-config-c": (
        dict(**_S2D2, block_length=32, sub_block_length=32, remasking="low_confidence_dynamic",
             confidence_threshold=0.9, policy="mask_span_length", min_span_length=8),
        "Blocks of 32. Verifies when the first run of masked positions is at least 8 long.",
    ),
}

# Beyond the paper: the same SDAR Config-B decoder with the forward-saving options (each off in the paper presets).
_BEYOND = "Beyond the paper: "
_PRESETS.update({
    "sdar-config-b+reuse": (
        {**_PRESETS["sdar-config-b"][0], "kv_reuse": True},
        _BEYOND + "sdar-config-b keeping the verifier's KV of the accepted prefix: later forwards query only the "
        "undecided rest; a fully accepted block needs no commit.",
    ),
    "sdar-config-b+fused": (
        {**_PRESETS["sdar-config-b"][0], "fused_commit": True},
        _BEYOND + "sdar-config-b whose next draft forward also caches the finished block: no commit forwards.",
    ),
    "sdar-config-b+adaptive": (
        {**_PRESETS["sdar-config-b"][0], "adaptive_block": True},
        _BEYOND + "sdar-config-b choosing each block's length (4-32) from the last block's verifications.",
    ),
    "sdar-config-b+all": (
        {**_PRESETS["sdar-config-b"][0], "kv_reuse": True, "fused_commit": True, "adaptive_block": True},
        _BEYOND + "sdar-config-b with KV reuse, fused commits and adaptive block size together.",
    ),
    "sdar-config-b+trim": (
        {**_PRESETS["sdar-config-b"][0], "trim_verify": True},
        _BEYOND + "sdar-config-b whose 2L verifier queries only the rows its span reads (same tokens).",
    ),
    "sdar-config-b+reuse+fused+trim": (
        {**_PRESETS["sdar-config-b"][0], "kv_reuse": True, "fused_commit": True, "trim_verify": True},
        _BEYOND + "sdar-config-b with KV reuse, fused commits and the trimmed verifier: the fewest query tokens.",
    ),
    "sdar-config-b+cost-aware": (
        {**_PRESETS["sdar-config-b"][0], "policy": "cost_aware", "confidence_threshold": 0.99, "kv_reuse": True,
         "fused_commit": True, "trim_verify": True},
        _BEYOND + "sdar-config-b routing in seconds: verify when a verify's expected tokens per second beat a "
        "skip's, from this machine's measured forward costs; skips commit drafts above 0.99; KV reuse, fused "
        "commits, trimmed verifier.",
    ),
    # Lossless mode (docs/algorithm.md, 'Acceptance modes and AR-exactness'): greedy_exact, a verify at every step,
    # the causal verifier cache; kept are the forward savers that never change a token (KV reuse and the fused commit
    # only move where a KV row is computed). Adaptive blocks keep exactness too but cost forwards here, so they are off.
    "lossless": (
        dict(**_S2D2, block_length=16, remasking="low_confidence_dynamic", confidence_threshold=0.85,
             policy="mask_span_length", min_span_length=1, acceptance="greedy_exact", cache_ver=True, draft_ver=True,
             kv_reuse=True, fused_commit=True),
        _BEYOND + "greedy AR's output token for token (greedy_exact acceptance, always verify, cache_ver), block 16 "
        "with KV reuse and fused commits: fewer forwards, the same text.",
    ),
})


# LLaDA2.x presets (docs/algorithm.md, 'Family variants'): block 32, k_s = 1, tau_mask = confidence_threshold.
_LLADA2 = dict(loop="editing", block_length=32, remasking="low_confidence_dynamic")
_LLADA2_S2D2 = dict(**_S2D2, **_LLADA2, policy="score_threshold", score_type="difference_static", penalty_coef=4.0)
_PRESETS.update({
    "llada2-static": (
        {**_LLADA2, "method": "diffusion", "remasking": "low_confidence_static"},
        "LLaDA2 static baseline: one token per step (the most confident mask), no editing, never verifies.",
    ),
    "llada2-dynamic": (
        dict(**_LLADA2, method="diffusion", confidence_threshold=0.7),
        "LLaDA2 threshold decoder: every mask with p > 0.7, else the most confident one; no editing.",
    ),
    "llada2-dynamic-edit": (
        dict(**_LLADA2, method="diffusion", confidence_threshold=0.7, editing_threshold=0.5),
        "LLaDA2.1 threshold decoder with self-correction: unmask at p > 0.7, edit decoded tokens at p > 0.5.",
    ),
    "llada2-conservative": (
        dict(**_LLADA2_S2D2, confidence_threshold=0.95, editing_threshold=0.9, score_threshold=-5.0),
        "Paper's Conservative setting: K_hat - 4 >= -4 > -5, so it ALWAYS verifies (the reference repository's "
        "README calls it selective); tau_mask 0.95, edits at p > 0.9.",
    ),
    "llada2-conservative-noedit": (
        dict(**_LLADA2_S2D2, confidence_threshold=0.95, score_threshold=-5.0),
        "Conservative without self-correction (always verifies, tau_mask 0.95, no edits): the editing ablation.",
    ),
    "llada2-quality": (
        dict(**_LLADA2_S2D2, confidence_threshold=0.7, editing_threshold=0.5, score_threshold=0.0),
        "Paper's Quality setting: verify iff K_hat >= 4 (a span of >= 5 confident drafts); tau_mask 0.7, edits at "
        "p > 0.5.",
    ),
    "llada2-quality-noedit": (
        dict(**_LLADA2_S2D2, confidence_threshold=0.7, score_threshold=0.0),
        "Quality without self-correction (verify iff K_hat >= 4, tau_mask 0.7, no edits): the editing ablation.",
    ),
})


# D2F (the reference's D2F/ demo, example_d2f.py defaults): block 32, skip_threshold 0.9, a block joins at 0.5 of the
# last one, the next counts as complete at 0.8. S2D2 there supports the minimum-span policy (min_ssd_span_length).
_D2F = dict(loop="pipeline", block_length=32, remasking="low_confidence_dynamic", confidence_threshold=0.9,
            block_add_threshold=0.5, decoded_token_threshold=0.8)
_PRESETS.update({
    "d2f": (
        dict(**_D2F, method="diffusion"),
        "D2F's own pipelined decoder: several blocks in flight, each decodes its masks with p > 0.9 (a complete "
        "block at least its most confident one); never verifies.",
    ),
    "d2f-s2d2": (
        dict(**_D2F, **_S2D2, policy="mask_span_length", min_span_length=1),
        "S2D2 on the D2F pipeline, minimum span 1: every step verifies the first mask span in AR mode.",
    ),
    "d2f-s2d2-dream": (
        dict(**_D2F, **_S2D2, policy="mask_span_length", min_span_length=1, allow_resample=False,
             draft_confidence_threshold=0.5),
        "The reference's Dream stability setting: S2D2 on D2F with no residual resampling, and a verified draft "
        "also needs p > 0.5.",
    ),
})


def presets() -> dict[str, str]:
    """Preset name -> one line saying what the rule reduces to."""
    return {name: line for name, (_, line) in _PRESETS.items()}


def preset(name: str, **overrides: Any) -> DecodeConfig:
    """A named paper configuration, optionally with overrides (validated)."""
    if name not in _PRESETS:
        raise ValueError(f"preset: unknown preset {value_text(name)}{did_you_mean(name, _PRESETS)}; allowed: "
                         f"{', '.join(_PRESETS)}")
    settings = {**_PRESETS[name][0], **overrides}
    return DecodeConfig.from_dict(settings)
