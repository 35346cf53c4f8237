"""The policy base class and the small helpers every policy's reason line uses.

A policy is one file: a settings dataclass (its knobs' values, read from DecodeConfig by field name), the knobs
themselves (label, range, step, help), a pure-ish `decide` (state only in hysteresis / UCB, reset per call) and, for
the routing figure, `guides` (the threshold line or band to draw) and `plotted_score` (what to plot when the decision
carries no score).
"""
from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any, ClassVar, Optional

from ..trace.records import PolicyDecision, PolicyInputs
from .knob import Knob

SKIP, VERIFY = "skip", "verify"


def fmt(x: float) -> str:
    """A number for a reason line: 2 decimals, ∞ symbols for infinities."""
    if math.isinf(x):
        return "∞" if x > 0 else "-∞"
    return f"{x:.2f}"


def num(x: float) -> str:
    """A coefficient as written by the user (1, 2, 0.5), without trailing zeros."""
    return f"{x:g}"


def arrow(verify: bool) -> str:
    return "→ verify" if verify else "→ skip"


@dataclasses.dataclass(frozen=True)
class NoSettings:
    """Settings of a policy without knobs."""


def _read_settings(cls: type, cfg: Any) -> Any:
    return cls.Settings(**{f.name: getattr(cfg, f.name) for f in dataclasses.fields(cls.Settings)})


@functools.lru_cache(maxsize=256)
def _settings(cls: type, cfg: Any) -> Any:
    return _read_settings(cls, cfg)


class Policy:
    """Base: stateless, never learns. Subclasses override `decide` (and `reset` / `learn` if stateful)."""

    name: ClassVar[str] = "policy"
    summary: ClassVar[str] = ""  # one line for the UI: when does it verify?
    knobs: ClassVar[tuple[Knob, ...]] = ()
    Settings: ClassVar[type] = NoSettings
    scores: ClassVar[bool] = False  # reads K̂ (so the estimator's parameter matters to it)
    score_label: ClassVar[str] = ""  # routing figure: what the plotted score means, when not the score s
    uses_costs: ClassVar[bool] = False  # reads PolicyInputs.costs (the run's measured forward costs)

    def __init__(self, cfg: Any):
        self.cfg = cfg
        self.settings = self.settings_from(cfg)
        self.reset()

    @classmethod
    def settings_from(cls, cfg: Any) -> Any:
        """The policy's settings object, read from a DecodeConfig (or anything with the same attributes). Kept per
        (policy, config) where the config hashes (a frozen DecodeConfig does; a batch makes a policy per sequence,
        and the settings are frozen, so sequences of one config share them)."""
        try:
            return _settings(cls, cfg)
        except TypeError:  # an unhashable stand-in for a config: read it each time
            return _read_settings(cls, cfg)

    @classmethod
    def check(cls, cfg: Any) -> None:
        """Cross-field checks when this policy is selected (ranges are checked from the knobs)."""

    @classmethod
    def guides(cls, config: dict[str, Any]) -> dict[str, Optional[float]]:
        """What the routing figure draws over the score: {"threshold": y} or {"on": y1, "off": y0}."""
        return {}

    @classmethod
    def plotted_score(cls, details: dict[str, Any], inputs: Optional[PolicyInputs]) -> Optional[float]:
        """A plottable score for a decision that carries none (None: nothing to plot)."""
        return None

    def reset(self) -> None:
        """Forget all per-call state (a new prompt)."""

    def decide(self, inputs: PolicyInputs) -> PolicyDecision:
        raise NotImplementedError

    def always_verifies(self) -> bool:
        """True when every step with a span verifies, whatever its inputs (the step then prepares no skip)."""
        return False

    def update(self, decision: PolicyDecision, decoded: int) -> float:
        """Report how many tokens the step decoded; return the reward, tokens per forward (docs/algorithm.md,
        'Routing policies')."""
        reward = decoded / (2 if decision.verify else 1)
        self.learn(decision, reward)
        return reward

    def learn(self, decision: PolicyDecision, reward: float) -> None:
        """Credit `reward` to the decision's action. Only UCB learns; replay feeds recorded rewards here."""

    def _decision(self, verify: bool, score_: Optional[float], reason: str, details: dict[str, Any]) -> PolicyDecision:
        return PolicyDecision(policy=self.name, verify=verify, score=score_, reason=reason, details=details)
