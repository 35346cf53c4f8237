"""`never`: never verify; an S2D2 run with it is exactly the diffusion baseline (invariant 5)."""
from __future__ import annotations

from ..trace.records import PolicyDecision, PolicyInputs
from .base import Policy


class Never(Policy):
    name = "never"
    summary = "never verify (the diffusion baseline)"

    def decide(self, inputs: PolicyInputs) -> PolicyDecision:
        return self._decision(False, None, "policy never → skip", {"span_len": inputs.span_len})
