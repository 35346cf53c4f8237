"""Which Run-tab knob belongs to which method, routing policy and remasking rule, and which are shown before
"Advanced". The routing policies' knobs come from the policy registry (s2d2/policies: each policy declares its
own), so a new policy needs no line here; the table below covers the decoder's other options.

A knob is shown when the chosen method is in its `methods`, and (if it names them) the chosen policy is in its
`policies`, the chosen remasking rule in its `remasking` and the chosen block loop in its `loops`. Hidden knobs keep
their values (a preset sets them all). The editing loop (LLaDA2.x self-correction) shows τ_edit and the post-mask
steps and hides the block-loop options it refuses (sub-blocks, KV reuse, fused commits, adaptive blocks); the
pipeline (D2F) shows its add / complete thresholds and hides what it refuses (sub-blocks, denoising steps, the
remasking rule, cache_ver / draft_ver and the block loop's forward savers).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from s2d2.policies import REGISTRY

ALL = ("ar", "diffusion", "s2d2")
BLOCKS = ("diffusion", "s2d2")  # methods that decode a block at a time
S2D2 = ("s2d2",)
SCORING = ("score_threshold", "score_hysteresis", "cost_aware")  # policies that read K̂ (the estimator matters)
EDITING = ("editing",)
BLOCK_LOOP = ("block",)
PIPELINE = ("pipeline",)
NOT_PIPELINE = ("block", "editing")
MAX_MAIN = 8  # knobs shown before "Advanced", for any method, policy and loop


@dataclass(frozen=True)
class Scope:
    methods: tuple[str, ...]
    policies: Optional[tuple[str, ...]] = None  # None: every policy (and methods without one)
    remasking: Optional[tuple[str, ...]] = None  # None: every remasking rule
    main: bool = False  # shown before "Advanced"
    loops: Optional[tuple[str, ...]] = None  # None: every loop ("block", "editing", "pipeline")


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
    "remasking": Scope(BLOCKS, loops=NOT_PIPELINE),
    "eb_gamma": Scope(BLOCKS, remasking=("entropy_bounded",)),
    "denoising_steps": Scope(BLOCKS, loops=NOT_PIPELINE),
    "sub_block_length": Scope(BLOCKS, loops=BLOCK_LOOP),
    "estimator": Scope(S2D2, SCORING),
    "negexp_beta": Scope(S2D2, SCORING),
    "acceptance": Scope(S2D2),
    "ratio_gamma": Scope(S2D2),
    "allow_resample": Scope(S2D2),
    "cache_ver": Scope(S2D2, loops=NOT_PIPELINE),
    "draft_ver": Scope(S2D2, loops=NOT_PIPELINE),
    "temperature": Scope(ALL),
    "seed": Scope(ALL),
    # beyond the paper (s2d2/policies/speedups.py, adaptive_block.py): the first two and the adaptive size read the
    # verifier's results, fusing the commit needs only blocks
    "kv_reuse": Scope(S2D2, loops=BLOCK_LOOP),
    "fused_commit": Scope(BLOCKS, loops=BLOCK_LOOP),
    "adaptive_block": Scope(S2D2, loops=BLOCK_LOOP),
    "adaptive_min_block": Scope(S2D2, loops=BLOCK_LOOP),
    "adaptive_max_block": Scope(S2D2, loops=BLOCK_LOOP),
    "adaptive_shrink_below": Scope(S2D2, loops=BLOCK_LOOP),
    "trim_verify": Scope(S2D2),
    # the editing loop (s2d2/policies/self_correction.py): the loop itself for any block method, τ_edit before
    # "Advanced" once it is on
    "loop": Scope(BLOCKS),
    "editing_threshold": Scope(BLOCKS, loops=EDITING, main=True),
    "max_post_steps": Scope(BLOCKS, loops=EDITING),
    # the pipeline loop (s2d2/policies/pipeline.py): when a block joins and when the next counts as complete
    "block_add_threshold": Scope(BLOCKS, loops=PIPELINE, main=True),
    "decoded_token_threshold": Scope(BLOCKS, loops=PIPELINE),
}


def shown(knob: str, method: str, policy: str, remasking: str, loop: str = "block") -> bool:
    """Does `knob` matter for this method / policy / remasking rule / block loop?"""
    scope = KNOB_SCOPE[knob]
    if method not in scope.methods:
        return False
    if scope.loops is not None and loop not in scope.loops:
        return False
    if scope.policies is not None and (method != "s2d2" or policy not in scope.policies):
        return False
    return scope.remasking is None or remasking in scope.remasking


def is_main(knob: str) -> bool:
    return KNOB_SCOPE[knob].main
