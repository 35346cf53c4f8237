"""`always`: verify at every step (the forcing rule τ_span = 1 of docs/algorithm.md, 'Routing policies', as a named
policy)."""
from __future__ import annotations

from ..trace.records import PolicyDecision, PolicyInputs
from .base import Policy


class Always(Policy):
    name = "always"
    summary = "verify at every step"

    def decide(self, inputs: PolicyInputs) -> PolicyDecision:
        return self._decision(True, None, "policy always → verify", {"span_len": inputs.span_len})

    def always_verifies(self) -> bool:
        return True
