"""Which Run-tab knob belongs to which method, routing policy and remasking rule, and which are shown before
"Advanced". One table on purpose: when each policy declares its own knobs in s2d2, this file is what changes.

A knob is shown when the chosen method is in its `methods`, and (if it names them) the chosen policy is in its
`policies` and the chosen remasking rule in its `remasking`. Hidden knobs keep their values (a preset sets them all).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

ALL = ("ar", "diffusion", "s2d2")
BLOCKS = ("diffusion", "s2d2")  # methods that decode a block at a time
S2D2 = ("s2d2",)
SCORING = ("score_threshold", "score_hysteresis")  # policies that compute s = K̂ − c(·N_hi)
MAX_MAIN = 8  # knobs shown before "Advanced", for any method and policy


@dataclass(frozen=True)
class Scope:
    methods: tuple[str, ...]
    policies: Optional[tuple[str, ...]] = None  # None: every policy (and methods without one)
    remasking: Optional[tuple[str, ...]] = None  # None: every remasking rule
    main: bool = False  # shown before "Advanced"


KNOB_SCOPE: dict[str, Scope] = {
    "method": Scope(ALL, main=True),
    "block_length": Scope(BLOCKS, main=True),
    "gen_length": Scope(ALL, main=True),
    "policy": Scope(S2D2, main=True),
    "score_threshold": Scope(S2D2, ("score_threshold",), main=True),
    "hysteresis_on": Scope(S2D2, ("score_hysteresis",), main=True),
    "hysteresis_off": Scope(S2D2, ("score_hysteresis",), main=True),
    "min_span_length": Scope(S2D2, ("mask_span_length",), main=True),
    "ucb_beta": Scope(S2D2, ("contextual_bandit_ucb",), main=True),
    "confidence_threshold": Scope(BLOCKS, remasking=("low_confidence_dynamic",), main=True),
    "remasking": Scope(BLOCKS),
    "eb_gamma": Scope(BLOCKS, remasking=("entropy_bounded",)),
    "denoising_steps": Scope(BLOCKS),
    "sub_block_length": Scope(BLOCKS),
    "score_type": Scope(S2D2, SCORING),
    "penalty_coef": Scope(S2D2, SCORING),
    "estimator": Scope(S2D2, SCORING),
    "negexp_beta": Scope(S2D2, SCORING),
    "acceptance": Scope(S2D2),
    "ratio_gamma": Scope(S2D2),
    "allow_resample": Scope(S2D2),
    "cache_ver": Scope(S2D2),
    "draft_ver": Scope(S2D2),
    "temperature": Scope(ALL),
    "seed": Scope(ALL),
}


def shown(knob: str, method: str, policy: str, remasking: str) -> bool:
    """Does `knob` matter for this method / policy / remasking rule?"""
    scope = KNOB_SCOPE[knob]
    if method not in scope.methods:
        return False
    if scope.policies is not None and (method != "s2d2" or policy not in scope.policies):
        return False
    return scope.remasking is None or remasking in scope.remasking


def is_main(knob: str) -> bool:
    return KNOB_SCOPE[knob].main
