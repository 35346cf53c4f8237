"""The Run tab's knob table: every knob with its range and group, the presets' values, the example prompts and the
layout bounds (read at import; the checks read s2d2/limits.py at call time)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from s2d2.config import ACCEPTANCE, ESTIMATORS, METHODS, POLICIES, REMASKING, preset
from s2d2.limits import SEED_MAX, limits
from s2d2.policies import Knob as PolicyKnob
from s2d2.policies import editing_knobs, option_knobs, pipeline_knobs, routing_knobs

from components.views.prompt_scope import fitting_prompts


MAX_PROMPT_CHARS = limits().max_prompt_chars  # layout values; the checks read limits() at call time


MAX_GEN_LENGTH = limits().max_gen_tokens


MAX_BLOCK_LENGTH = limits().max_block_length


MAX_RUN_SECONDS = limits().max_run_seconds


DEFAULT_PRESET = "sdar-config-a"


# model family (registry) -> the preset it opens on: LLaDA2.x S2D2 + editing; D2F S2D2 on the pipeline (Dream: the
# reference's stability setting)
FAMILY_PRESETS = {"llada2": "llada2-quality", "d2f_llada": "d2f-s2d2", "d2f_dream": "d2f-s2d2-dream"}


# Questions the bundled models were trained for, from the held-out set (never in a training stream): the Run box
# opens on the first, so a visitor's first run is one the model knows.
EXAMPLE_PROMPTS = fitting_prompts(3)


@dataclass(frozen=True)
class Knob:
    name: str  # DecodeConfig field (or "seed")
    label: str
    kind: str  # "choice" | "int" | "float" | "bool"
    choices: tuple[str, ...] = ()
    lo: float = 0.0
    hi: float = 1.0
    step: float = 1.0
    info: str = ""
    optional_zero: bool = False  # 0 in the UI means None (auto / off)
    group: str = ""


def _knob(k: PolicyKnob, group: str) -> Knob:
    """A Run-panel knob from a policy's (or decoder option's) own declaration; an optional one shows None as 0."""
    lo, hi = k.slider
    return Knob(k.field, k.label, k.kind, k.choices, lo, hi, k.step, k.help, optional_zero=k.optional, group=group)


_B, _R, _P = "Blocks and length", "Baseline remasking (skipped steps)", "Routing policy"


_E, _S, _F = "Estimator and verification", "Sampling", "Fewer forwards (beyond the paper)"


_L = "Self-correction (LLaDA2.x editing loop)"


_D = "D2F pipeline (several blocks in flight)"


KNOBS: tuple[Knob, ...] = (
    Knob("method", "Method", "choice", METHODS, group=_B,
         info="ar: one token per forward; diffusion: the baseline, never verifies; s2d2: draft, route, verify"),
    Knob("block_length", "Block length B", "int", lo=1, hi=MAX_BLOCK_LENGTH, group=_B),
    Knob("denoising_steps", "Denoising steps S (0 = B)", "int", lo=0, hi=MAX_BLOCK_LENGTH, optional_zero=True,
         group=_B),
    Knob("sub_block_length", "Sub-block (shifted models; 0 = whole block)", "int", lo=0, hi=MAX_BLOCK_LENGTH,
         optional_zero=True, group=_B),
    Knob("gen_length", "Generation length", "int", lo=1, hi=MAX_GEN_LENGTH, group=_B),
    Knob("remasking", "Remasking rule", "choice", REMASKING, group=_R),
    Knob("confidence_threshold", "Confidence threshold τ_conf", "float", lo=0.0, hi=1.0, step=0.01, group=_R),
    Knob("eb_gamma", "Entropy bound γ", "float", lo=0.01, hi=5.0, step=0.01, group=_R),
    Knob("policy", "Routing policy", "choice", POLICIES, group=_P,
         info="decides at each step whether the verifier forward is worth it"),
    *(_knob(k, _P) for k in routing_knobs() if not k.advanced),  # each policy declares its knobs
    Knob("estimator", "Acceptance estimator", "choice", ESTIMATORS, group=_E),
    Knob("negexp_beta", "neg-exp β", "float", lo=0.0, hi=10.0, step=0.1, group=_E),
    Knob("acceptance", "Acceptance mode", "choice", ACCEPTANCE, group=_E,
         info="paper: u < min(1, q/p); greedy_exact: draft == argmax q (AR-exact)"),
    Knob("ratio_gamma", "Ratio tempering γ", "float", lo=0.1, hi=5.0, step=0.1, group=_E),
    Knob("allow_resample", "Resample at first rejection", "bool", group=_E),
    Knob("cache_ver", "cache_ver (causal cache)", "bool", group=_E,
         info="causal prefill and commit: the verifier then equals exact AR"),
    Knob("draft_ver", "draft_ver (causal decoded prefix in drafts)", "bool", group=_E),
    *(_knob(k, _L) for k in editing_knobs()),  # the editing loop declares its own (s2d2/policies/self_correction.py)
    *(_knob(k, _D) for k in pipeline_knobs() if not k.advanced),  # and the pipeline (s2d2/policies/pipeline.py)
    Knob("temperature", "Temperature", "float", lo=0.0, hi=2.0, step=0.05, group=_S),
    Knob("seed", "Seed", "int", lo=0, hi=SEED_MAX, group=_S),
    *(_knob(k, _F) for k in option_knobs() if not k.advanced),
)


KNOB_NAMES = tuple(k.name for k in KNOBS)


INFO = {  # plain-words help under a knob, where the declaration's own is too terse
    "seed": f"a whole number from 0 to {SEED_MAX:,}; the same seed and settings give the same run",
    "method": "ar: one token per forward · diffusion: drafts a block, never verifies · s2d2: draft, route, verify",
    "policy": "decides at each step whether the extra verifier forward is worth it",
    "confidence_threshold": "steps that do not verify commit every draft with p above this (at least one)",
    "score_threshold": "verify when the score s = K̂ − c reaches this",
    "acceptance": "paper: accept if u < min(1, q/p) · greedy_exact: draft == argmax q (AR-exact)",
    "cache_ver": "causal prefill and commit: the verifier then equals exact AR",
    "temperature": "0 = greedy drafts",
}


CHOICE_WORDS = {  # a choice knob's values in words; the dropdown shows "words · id" (the id is what configs say)
    "method": {"ar": "One token per forward", "diffusion": "Diffusion drafts alone",
               "s2d2": "Draft, then maybe verify"},
    "remasking": {"low_confidence_static": "The most confident, a fixed number per step",
                  "low_confidence_dynamic": "Every draft above the threshold",
                  "sequential": "Left to right", "entropy_bounded": "The surest, up to an uncertainty budget"},
    "policy": {"mask_span_length": "When the run of masks is long enough",
               "score_threshold": "When the score reaches τ_score",
               "score_hysteresis": "Switched on and off by the score", "contextual_bandit_ucb": "Learns when it pays",
               "always": "Always verify", "never": "Never verify", "cost_aware": "When it saves time"},
    "score_type": {"difference_static": "Expected tokens minus c",
                   "difference_dynamic": "Expected tokens minus c per confident draft"},
    "estimator": {"hard_margin_threshold": "Drafts with a clear lead", "hard_entropy_threshold": "Drafts with low "
                  "uncertainty", "soft_confidence_power": "Confidence to a power",
                  "soft_clipped_linear_margin": "The lead, clipped", "soft_entropy_negexp": "Falls with uncertainty",
                  "soft_renyi_2_entropy": "Falls with collision entropy"},
    "acceptance": {"paper": "The paper's test", "sampled": "Speculative sampling",
                   "greedy_exact": "Exactly the model's greedy choice"},
    "loop": {"block": "One block at a time", "editing": "Edits decoded tokens (LLaDA2.x)",
             "pipeline": "Several blocks in flight (D2F)"},
}


def choice_labels(knob: Knob) -> list[tuple[str, str]]:
    """A choice knob's dropdown entries: (words · id, id); an id without words shows alone."""
    words = CHOICE_WORDS.get(knob.name, {})
    return [(f"{words[c]} · {c}" if c in words else c, c) for c in knob.choices]


def knob_info(knob: Knob) -> Optional[str]:
    """The help line under a knob (None: none), which a refused value replaces until the next Record."""
    return INFO.get(knob.name) or knob.info or None


def preset_values(name: str, seed: int = 0) -> list[Any]:
    """UI values (KNOBS order) for a preset; gen_length capped for the app."""
    cfg = preset(name, gen_length=min(64, MAX_GEN_LENGTH))
    values = []
    for knob in KNOBS:
        value = seed if knob.name == "seed" else getattr(cfg, knob.name)
        if knob.optional_zero and value is None:
            value = 0
        values.append(value)
    return values


def preset_for_model(model_name: Any, loop: Any) -> Optional[str]:
    """The preset to switch to when the model changes: its family's (a LLaDA2.x model opens on S2D2 with editing, a
    D2F model on S2D2 over the pipeline) when the loop does not fit it yet, DEFAULT_PRESET when leaving the editing
    or pipeline loop for another model; None to keep the knobs as they are (same kind of model, or a folder the
    registry does not know)."""
    from s2d2.models.registry import lookup

    entry = lookup(model_name) if isinstance(model_name, str) else None
    if entry is None:
        return None
    family = FAMILY_PRESETS.get(entry.family)
    if family is not None:
        return family if loop != preset(family).loop else None
    return DEFAULT_PRESET if loop in ("editing", "pipeline") else None
