"""Which Run-tab knob belongs to which method, routing policy and remasking rule, and which are shown before
"Advanced". The routing policies' knobs come from the policy registry (s2d2/policies: each policy declares its
own), so a new policy needs no line here; the table below covers the decoder's other options.

A knob is shown when the chosen method is in its `methods`, and (if it names them) the chosen policy is in its
`policies` and the chosen remasking rule in its `remasking`. Hidden knobs keep their values (a preset sets them all).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from s2d2.policies import REGISTRY

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


def policy_scopes() -> dict[str, Scope]:
    """Every routing policy's knobs, from the registry: shown for s2d2 with a policy that declares them. A policy's
    own threshold (declared by that policy alone, not marked advanced) comes before "Advanced"; knobs shared by
    several policies (the score type and penalty) after it."""
    users: dict[str, list[str]] = {}
    advanced: set[str] = set()
    for name, cls in REGISTRY.items():
        for knob in cls.knobs:
            users.setdefault(knob.field, []).append(name)
            if knob.advanced:
                advanced.add(knob.field)
    return {field: Scope(S2D2, tuple(names), main=len(names) == 1 and field not in advanced)
            for field, names in users.items()}


KNOB_SCOPE: dict[str, Scope] = {
    "method": Scope(ALL, main=True),
    "block_length": Scope(BLOCKS, main=True),
    "gen_length": Scope(ALL, main=True),
    "policy": Scope(S2D2, main=True),
    **policy_scopes(),
    "confidence_threshold": Scope(BLOCKS, remasking=("low_confidence_dynamic",), main=True),
    "remasking": Scope(BLOCKS),
    "eb_gamma": Scope(BLOCKS, remasking=("entropy_bounded",)),
    "denoising_steps": Scope(BLOCKS),
    "sub_block_length": Scope(BLOCKS),
    "estimator": Scope(S2D2, SCORING),
    "negexp_beta": Scope(S2D2, SCORING),
    "acceptance": Scope(S2D2),
    "ratio_gamma": Scope(S2D2),
    "allow_resample": Scope(S2D2),
    "cache_ver": Scope(S2D2),
    "draft_ver": Scope(S2D2),
    "temperature": Scope(ALL),
    "seed": Scope(ALL),
    # beyond the paper (s2d2/policies/speedups.py, adaptive_block.py): the first two and the adaptive size read the
    # verifier's results, fusing the commit needs only blocks
    "kv_reuse": Scope(S2D2),
    "fused_commit": Scope(BLOCKS),
    "adaptive_block": Scope(S2D2),
    "adaptive_min_block": Scope(S2D2),
    "adaptive_max_block": Scope(S2D2),
    "adaptive_shrink_below": Scope(S2D2),
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
