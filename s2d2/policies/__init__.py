"""Routing policies: should this step verify its first mask span? (docs/algorithm.md,
'Expected accepted tokens and the score', 'Routing policies')

One policy, one file: each module defines a `Policy` subclass with its settings object, its knobs (label, range,
step, help), `decide` and what the routing figure draws. This registry is the only list of them: DecodeConfig
validation, the Run panel, the what-if panel and the figures read knobs and guides from here, so a new policy is
its file plus one line below (and its tests).

Decisions depend only on the recorded inputs (and recorded rewards, for UCB), so `redecide` replays a trace exactly
(invariant 12) and re-decides it under new thresholds (the what-if view).
"""
from __future__ import annotations

from typing import Any, Iterable, Optional

from ..limits import value_text
from ..trace.records import PolicyDecision, PolicyInputs
from .adaptive_block import AdaptiveBlock, BlockChoice, BlockFeedback
from .always import Always
from .base import SKIP, VERIFY, Policy
from .contextual_bandit_ucb import UCB_ENTROPY_SCOPES, ContextualBanditUCB, ucb_bin
from .cost_aware import CostAware
from .knob import Knob, unique
from .mask_span_length import MaskSpanLength
from .never import Never
from .score import SCORE_KNOBS, SCORE_TYPES, score, score_expression
from .score_hysteresis import ScoreHysteresis
from .score_threshold import ScoreThreshold
from . import pipeline, self_correction, speedups

REGISTRY: dict[str, type[Policy]] = {
    p.name: p for p in (MaskSpanLength, ScoreThreshold, ScoreHysteresis, ContextualBanditUCB, Always, Never, CostAware)
}
POLICIES = tuple(REGISTRY)

__all__ = [
    "REGISTRY", "POLICIES", "SCORE_TYPES", "UCB_ENTROPY_SCOPES", "SKIP", "VERIFY", "Knob", "Policy",
    "MaskSpanLength", "ScoreThreshold", "ScoreHysteresis", "ContextualBanditUCB", "Always", "Never", "CostAware",
    "AdaptiveBlock", "BlockChoice", "BlockFeedback", "score", "score_expression", "ucb_bin", "make_policy",
    "redecide", "policy_class", "scoring_policies", "routing_knobs", "option_knobs", "editing_knobs", "pipeline_knobs",
    "all_knobs",
    "whatif_knobs",
    "figure_guides",
    "score_label", "plotted_score", "uses_costs",
]


def policy_class(name: Any) -> Optional[type[Policy]]:
    return REGISTRY.get(name) if isinstance(name, str) else None


def uses_costs(cfg: Any) -> bool:
    """Whether cfg's run routes with measured forward costs (its trace then records the cost table)."""
    cls = policy_class(getattr(cfg, "policy", None))
    return getattr(cfg, "method", None) == "s2d2" and cls is not None and cls.uses_costs


def make_policy(cfg: Any) -> Policy:
    """A fresh policy object (fresh state) for cfg.policy."""
    cls = policy_class(cfg.policy)
    if cls is None:
        raise ValueError(f"policy: unknown value {value_text(cfg.policy)}; allowed: {', '.join(REGISTRY)}")
    return cls(cfg)


def routing_knobs() -> list[Knob]:
    """Every routing policy's knobs, in registry order, each field once."""
    return unique([k for cls in REGISTRY.values() for k in cls.knobs])


def option_knobs() -> list[Knob]:
    """Knobs of the decoder options beyond the paper: KV reuse, fused commit, adaptive block size."""
    return list(speedups.KNOBS) + list(AdaptiveBlock.knobs)


def editing_knobs() -> list[Knob]:
    """Knobs of the editing loop (LLaDA2.x self-correction): loop, τ_edit, post steps."""
    return list(self_correction.KNOBS)


def pipeline_knobs() -> list[Knob]:
    """Knobs of the pipeline loop (D2F): add / complete thresholds, the top-1 score, S2D2-on-D2F gates."""
    return list(pipeline.KNOBS)


def all_knobs() -> list[Knob]:
    return unique(routing_knobs() + option_knobs() + editing_knobs() + pipeline_knobs())


def whatif_knobs(include_advanced: bool = False) -> list[tuple[Knob, tuple[str, ...]]]:
    """(knob, policies it applies to) for every knob a what-if may change.

    Order: the scoring policies' own thresholds, then the shared score knobs, then the other policies' knobs.
    """
    scoring = [k for cls in REGISTRY.values() if cls.scores for k in cls.knobs if k not in SCORE_KNOBS]
    rest = [k for cls in REGISTRY.values() if not cls.scores for k in cls.knobs]
    out = []
    for knob in unique(scoring + list(SCORE_KNOBS) + rest):
        if not knob.whatif or (knob.advanced and not include_advanced):
            continue
        users = tuple(name for name, cls in REGISTRY.items() if any(k.field == knob.field for k in cls.knobs))
        out.append((knob, users))
    return out


def scoring_policies() -> tuple[str, ...]:
    """Policies that read K̂, so an estimator parameter changes their decisions."""
    return tuple(name for name, cls in REGISTRY.items() if cls.scores)


def figure_guides(config: dict[str, Any]) -> dict[str, Optional[float]]:
    """The threshold line ({"threshold": y}) or band ({"on", "off"}) the routing figure draws for a trace."""
    cls = policy_class(config.get("policy"))
    return cls.guides(config) if cls is not None else {}


def score_label(policy: Any) -> str:
    cls = policy_class(policy)
    return cls.score_label if cls is not None else ""


def plotted_score(policy: Any, details: dict[str, Any], inputs: Optional[PolicyInputs]) -> Optional[float]:
    cls = policy_class(policy)
    return cls.plotted_score(details, inputs) if cls is not None else None


def redecide(cfg: Any, records: Iterable[tuple[PolicyInputs, Optional[float]]]) -> list[PolicyDecision]:
    """Replay recorded (inputs, reward) pairs in order through a fresh policy for cfg.

    With the recording's cfg this reproduces every recorded decision (invariant 12). With changed thresholds it
    re-decides every step; the results are meaningful only up to the first step whose decision changes, because
    later inputs and rewards came from the recorded trajectory (docs/algorithm.md, 'What a trace records'). A recorded
    reward is credited to the new decision's action; a None reward (a step that did not learn) is skipped.
    """
    policy = make_policy(cfg)
    decisions = []
    for inputs, reward in records:
        decision = policy.decide(inputs)
        if reward is not None:
            policy.learn(decision, reward)
        decisions.append(decision)
    return decisions
