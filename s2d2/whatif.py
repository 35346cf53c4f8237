"""Honest what-if: re-decide every recorded step of an S2D2 trace under changed policy thresholds (docs/algorithm.md,
'What a trace records').

The recorded policy inputs (α, K̂, N_hi, bins) and UCB rewards are replayed in order through a fresh policy, so
hysteresis and UCB state evolve exactly as they would have. Everything before the first flipped decision is exact;
from the first flip on, the real run would have drafted, verified and committed differently, so later inputs (and
later decisions) are only what the recorded trajectory implies: they need a re-run.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Optional

from .config import DecodeConfig
from .estimators import expected_accepted_tokens
from .policies import Knob, redecide, scoring_policies, whatif_knobs
from .trace import PolicyInputs, StepRecord, Trace

# Fields a what-if may change (declared by each policy's knobs, `Knob.whatif`): they act only on recorded inputs.
# Anything else (remasking τ, block length, acceptance, estimator choice, the policy itself) changes what was drafted
# or recorded: that needs a new run.
POLICY_FIELDS = tuple(k.field for k, _ in whatif_knobs(include_advanced=True))
# Estimator parameters: α is recomputed from the recorded per-mask p, entropy and margin (a detailed trace).
ESTIMATOR_FIELDS = {
    "hard_margin_threshold": "margin_threshold",
    "hard_entropy_threshold": "entropy_threshold",
    "soft_confidence_power": "confidence_power",
    "soft_clipped_linear_margin": "margin_scale",
    "soft_entropy_negexp": "negexp_beta",
}


@dataclass
class WhatIfStep:
    index: int
    block: int
    step: int
    old_verify: Optional[bool]  # None: the step made no routing decision
    new_verify: Optional[bool]
    old_score: Optional[float]
    new_score: Optional[float]
    old_reason: str
    new_reason: str
    flipped: bool
    exact: bool  # False after the first flip: the real trajectory would differ
    edits: int = 0  # edits recorded at this step (editing loop); decided before routing, so exact while `exact`


@dataclass
class WhatIf:
    changes: dict[str, Any]
    policy: str
    steps: list[WhatIfStep]
    flipped: list[int]  # indices of steps whose decision flips
    first_flip: Optional[int]
    exact_until: int  # steps[:exact_until] are exactly as recorded; the rest depend on a re-run
    config: dict[str, Any] = field(default_factory=dict)  # the changed configuration, ready to re-run
    exact_edits: int = 0  # recorded edits that stand under the change (editing loop): those up to the first flip
    first_block: int = 0  # engine index of the first block that decodes answer tokens (answer block 1)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @property
    def summary(self) -> str:
        edits = (f" Editing state carried: the {self.exact_edits} edit(s) recorded up to there stand (edits are "
                 "decided by the draft before routing)." if self.exact_edits else "")
        if self.first_flip is None:
            return f"No decision flips: all {len(self.steps)} recorded steps stay exactly as recorded.{edits}"
        s = self.steps[self.first_flip]
        before = f"Steps 1–{s.index} are exactly as recorded; after" if s.index else "After"
        block = s.block - self.first_block + 1  # numbered as a reader counts blocks: 1 = the first answer block
        n = len(self.flipped)
        return (f"{n} decision{'s' if n != 1 else ''} flip{'' if n != 1 else 's'}; the first at step {s.index + 1} "
                f"(answer block {block}). {before} step {s.index + 1} the trajectory is unknown: re-run to see "
                f"it.{edits}")


# The estimator parameter of the paper presets' estimator, as a what-if knob for the policies that read K̂.
ESTIMATOR_KNOB = Knob("negexp_beta", "neg-exp β (estimator)", "float", 0.0, 1e6, 0.1, ui=(0.0, 10.0),
                      help="β of soft_entropy_negexp: α = exp(−β·H̃); recomputed from the recorded drafts")


def knob_specs() -> list[tuple[Knob, tuple[str, ...]]]:
    """(knob, policies it applies to) for the what-if panel: the policies' numeric knobs, then the estimator's."""
    knobs = [(k, users) for k, users in whatif_knobs() if k.kind in ("int", "float")]
    return knobs + [(ESTIMATOR_KNOB, scoring_policies())]


def allowed_fields(cfg: DecodeConfig) -> tuple[str, ...]:
    """Fields a what-if may change for this configuration."""
    est = ESTIMATOR_FIELDS.get(cfg.estimator)
    return POLICY_FIELDS + ((est,) if est else ())


def changed_config(trace: Trace, changes: dict[str, Any]) -> tuple[DecodeConfig, DecodeConfig]:
    """(recorded config, changed config); one readable ValueError for a non-S2D2 trace or a forbidden field."""
    cfg_data = trace.header.config
    if cfg_data.get("method") != "s2d2":
        raise ValueError(f"what-if needs an S2D2 trace (method 's2d2'); this trace's method is "
                         f"{cfg_data.get('method')!r}, which makes no routing decisions")
    cfg = DecodeConfig.from_dict(dict(cfg_data))
    allowed = allowed_fields(cfg)
    bad = [k for k in changes if k not in allowed]
    if bad:
        raise ValueError(f"what-if can change only policy and estimator thresholds ({', '.join(allowed)}); "
                         f"{', '.join(map(repr, bad))} change(s) what the run drafted or recorded: record a new run")
    return cfg, cfg.replace(**changes)


def what_if(trace: Trace, **changes: Any) -> WhatIf:
    """Re-decide every recorded step with `changes` applied to the trace's configuration."""
    cfg, new = changed_config(trace, changes)
    est_field = ESTIMATOR_FIELDS.get(cfg.estimator)
    recompute = est_field is not None and getattr(new, est_field) != getattr(cfg, est_field)
    decided = [s for s in trace.steps if s.policy_inputs is not None]
    if not decided:
        raise ValueError("what-if: this trace records no policy inputs (no S2D2 step made a routing decision)")
    records = [(_inputs(new, s) if recompute else s.policy_inputs, s.reward) for s in decided]
    new_by_index = dict(zip((s.index for s in decided), redecide(new, records)))
    rows, flipped = [], []
    for s in trace.steps:
        old, nd = s.decision, new_by_index.get(s.index)
        flip = old is not None and nd is not None and old.verify != nd.verify
        if flip:
            flipped.append(s.index)
        rows.append(WhatIfStep(
            index=s.index, block=s.block, step=s.step, old_verify=old.verify if old else None,
            new_verify=nd.verify if nd else None, old_score=old.score if old else None,
            new_score=nd.score if nd else None, old_reason=old.reason if old else "",
            new_reason=nd.reason if nd else "", flipped=flip, exact=not flipped or s.index <= flipped[0],
            edits=len(s.edits),
        ))
    first = flipped[0] if flipped else None
    exact_until = first if first is not None else len(trace.steps)
    exact_edits = sum(r.edits for r in rows if r.exact)
    first_block = trace.blocks[0].index if trace.blocks else 0
    return WhatIf(dict(changes), cfg.policy, rows, flipped, first, exact_until, new.to_dict(), exact_edits,
                  first_block)


def _inputs(cfg: DecodeConfig, step: StepRecord) -> PolicyInputs:
    """Policy inputs with α and K̂ recomputed under cfg's estimator parameter from the recorded drafts."""
    pi = step.policy_inputs
    assert pi is not None
    span = step.drafts[: pi.span_len]
    if len(span) < pi.span_len:
        raise ValueError("what-if: changing an estimator parameter needs a detailed trace (per-mask drafts); "
                         "this one was recorded with detailed=False")
    alphas = [_alpha(cfg, d.p, d.entropy, d.margin) for d in span]
    return dataclasses.replace(pi, alphas=alphas, k_hat=float(expected_accepted_tokens(alphas)))


def _alpha(cfg: DecodeConfig, p: float, entropy: float, margin: float) -> float:
    """α of one span position from its recorded scalars (docs/algorithm.md, 'Acceptance estimators'); Rényi-2 needs π
    itself, so it is absent."""
    name = cfg.estimator
    if name == "hard_margin_threshold":
        return 1.0 if margin > cfg.margin_threshold else 0.0
    if name == "hard_entropy_threshold":
        return 1.0 if entropy < cfg.entropy_threshold else 0.0
    if name == "soft_confidence_power":
        return min(max(p, 0.0), 1.0) ** cfg.confidence_power
    if name == "soft_clipped_linear_margin":
        return min(max(cfg.margin_scale * margin, 0.0), 1.0)
    return math.exp(-cfg.negexp_beta * entropy)
