"""Routing policies: should this step verify its first mask span? (spec §4.2, §4.3)

Each policy is a small object. `decide(inputs)` reads one step's `PolicyInputs` and returns a `PolicyDecision` that
carries its own explanation (`reason`, one human line; `details`, plain JSON). Stateful policies (hysteresis, UCB)
keep their state for one `generate` call, across steps and blocks; `reset()` starts a new call.

Decisions depend only on the recorded inputs (and recorded rewards, for UCB), so `redecide` replays a trace exactly
(invariant 12) and re-decides it under new thresholds (the what-if view).
"""
from __future__ import annotations

import math
from typing import Any, Iterable, Optional

from .config import DecodeConfig
from .trace import PolicyDecision, PolicyInputs

SKIP, VERIFY = "skip", "verify"


def _fmt(x: float) -> str:
    """A number for a reason line: 2 decimals, ∞ symbols for infinities."""
    if math.isinf(x):
        return "∞" if x > 0 else "-∞"
    return f"{x:.2f}"


def _num(x: float) -> str:
    """A coefficient as written by the user (1, 2, 0.5), without trailing zeros."""
    return f"{x:g}"


# -- score (§4.2) ---------------------------------------------------------------------------------------------------

def score(cfg: DecodeConfig, k_hat: float, n_hi: int, span_len: int) -> float:
    """s = K̂ − c (static) or K̂ − c·N_hi (dynamic); −∞ for an empty span."""
    if span_len <= 0:
        return -math.inf
    c = cfg.penalty_coef
    return k_hat - c if cfg.score_type == "difference_static" else k_hat - c * n_hi


def score_expression(cfg: DecodeConfig, k_hat: float, n_hi: int, span_len: int) -> str:
    """The score written out for a reason line: "s = K̂ − c·N_hi = 1.73 − 2·0 = 1.73"."""
    s = score(cfg, k_hat, n_hi, span_len)
    if span_len <= 0:
        return "s = -∞ (empty span)"
    c = _num(cfg.penalty_coef)
    if cfg.score_type == "difference_static":
        return f"s = K̂ − c = {_fmt(k_hat)} − {c} = {_fmt(s)}"
    return f"s = K̂ − c·N_hi = {_fmt(k_hat)} − {c}·{n_hi} = {_fmt(s)}"


def _score_details(cfg: DecodeConfig, inputs: PolicyInputs) -> dict[str, Any]:
    return {
        "span_len": inputs.span_len,
        "k_hat": float(inputs.k_hat),
        "n_hi": inputs.n_hi,
        "score_type": cfg.score_type,
        "penalty_coef": float(cfg.penalty_coef),
        "score": score(cfg, inputs.k_hat, inputs.n_hi, inputs.span_len),
    }


def _arrow(verify: bool) -> str:
    return "→ verify" if verify else "→ skip"


def _state(is_on: bool) -> str:
    return "ON" if is_on else "OFF"


# -- policies -------------------------------------------------------------------------------------------------------

class Policy:
    """Base: stateless, never learns. Subclasses override `decide` (and `reset` / `learn` if stateful)."""

    name = "policy"

    def __init__(self, cfg: DecodeConfig):
        self.cfg = cfg
        self.reset()

    def reset(self) -> None:
        """Forget all per-call state (a new prompt)."""

    def decide(self, inputs: PolicyInputs) -> PolicyDecision:
        raise NotImplementedError

    def update(self, decision: PolicyDecision, decoded: int) -> float:
        """Report how many tokens the step decoded; return the reward, tokens per forward (§4.3)."""
        reward = decoded / (2 if decision.verify else 1)
        self.learn(decision, reward)
        return reward

    def learn(self, decision: PolicyDecision, reward: float) -> None:
        """Credit `reward` to the decision's action. Only UCB learns; replay feeds recorded rewards here."""

    def _decision(self, verify: bool, score_: Optional[float], reason: str, details: dict[str, Any]) -> PolicyDecision:
        return PolicyDecision(policy=self.name, verify=verify, score=score_, reason=reason, details=details)


class Always(Policy):
    name = "always"

    def decide(self, inputs: PolicyInputs) -> PolicyDecision:
        return self._decision(True, None, "policy always → verify", {"span_len": inputs.span_len})


class Never(Policy):
    name = "never"

    def decide(self, inputs: PolicyInputs) -> PolicyDecision:
        return self._decision(False, None, "policy never → skip", {"span_len": inputs.span_len})


class MaskSpanLength(Policy):
    name = "mask_span_length"

    def decide(self, inputs: PolicyInputs) -> PolicyDecision:
        tau = self.cfg.min_span_length
        verify = inputs.span_len >= tau
        op = "≥" if verify else "<"
        reason = f"span |C| = {inputs.span_len} {op} τ_span {tau} {_arrow(verify)}"
        return self._decision(verify, None, reason, {"span_len": inputs.span_len, "min_span_length": tau})


class ScoreThreshold(Policy):
    name = "score_threshold"

    def decide(self, inputs: PolicyInputs) -> PolicyDecision:
        tau = self.cfg.score_threshold
        s = score(self.cfg, inputs.k_hat, inputs.n_hi, inputs.span_len)
        verify = s >= tau
        op = "≥" if verify else "<"
        expr = score_expression(self.cfg, inputs.k_hat, inputs.n_hi, inputs.span_len)
        reason = f"{expr} {op} τ {_fmt(tau)} {_arrow(verify)}"
        details = {**_score_details(self.cfg, inputs), "score_threshold": float(tau)}
        return self._decision(verify, s, reason, details)


class ScoreHysteresis(Policy):
    """OFF → ON when s > τ_on (≥ when not strict); ON → OFF when s < τ_off. Verify iff the new state is ON."""

    name = "score_hysteresis"

    def reset(self) -> None:
        self.is_on = False

    def decide(self, inputs: PolicyInputs) -> PolicyDecision:
        cfg = self.cfg
        on, off, strict = cfg.hysteresis_on, cfg.hysteresis_off, cfg.hysteresis_strict
        s = score(cfg, inputs.k_hat, inputs.n_hi, inputs.span_len)
        before = self.is_on
        if not before:  # OFF: switch ON above τ_on (strict > as in the reference experiments, or ≥)
            self.is_on = s > on if strict else s >= on
            ops = (">", "≤") if strict else ("≥", "<")
            test = f"{ops[0] if self.is_on else ops[1]} τ_on {_fmt(on)}"
        else:  # ON: switch OFF below τ_off
            self.is_on = not s < off
            test = f"{'≥' if self.is_on else '<'} τ_off {_fmt(off)}"
        expr = score_expression(cfg, inputs.k_hat, inputs.n_hi, inputs.span_len)
        reason = f"{_state(before)}: {expr} {test} {_arrow(self.is_on)} ({_state(self.is_on)})"
        details = {
            **_score_details(cfg, inputs),
            "state_before": _state(before),
            "state_after": _state(self.is_on),
            "band": [float(off), float(on)],
            "hysteresis_on": float(on),
            "hysteresis_off": float(off),
            "strict": strict,
            "on_comparison": ">" if strict else ">=",
        }
        return self._decision(self.is_on, s, reason, details)


def ucb_bin(v: float, lo: float, hi: float, n: int) -> int:
    """bin(v; lo, hi, n) = min(n−1, max(0, ⌊(clip(v,lo,hi)−lo)/(hi−lo)·n⌋)); 0 if n ≤ 1 or hi ≤ lo (§4.3)."""
    if n <= 1 or hi <= lo or math.isnan(v):  # NaN (e.g. the mean of an empty set) falls in the first bin
        return 0
    x = min(max(v, lo), hi)
    return min(n - 1, max(0, math.floor((x - lo) / (hi - lo) * n)))


class ContextualBanditUCB(Policy):
    """UCB1 per context bucket (span, progress, entropy bins) over the actions skip / verify (§4.3)."""

    name = "contextual_bandit_ucb"

    def reset(self) -> None:
        cfg = self.cfg
        self.n_buckets = cfg.ucb_span_bins * cfg.ucb_progress_bins * cfg.ucb_entropy_bins
        self.t = 0
        self.counts = {a: [0] * self.n_buckets for a in (SKIP, VERIFY)}
        self.sums = {a: [0.0] * self.n_buckets for a in (SKIP, VERIFY)}

    def bins(self, inputs: PolicyInputs) -> list[int]:
        cfg = self.cfg
        span = ucb_bin(max(1, inputs.span_len), 1, inputs.window_len, cfg.ucb_span_bins)
        prog = ucb_bin(inputs.progress, 0.0, 1.0, cfg.ucb_progress_bins)
        ent = ucb_bin(inputs.mean_entropy, 0.0, 1.0, cfg.ucb_entropy_bins)
        return [span, prog, ent]

    def bucket(self, bins: list[int]) -> int:
        span, prog, ent = bins
        return (span * self.cfg.ucb_progress_bins + prog) * self.cfg.ucb_entropy_bins + ent

    def value(self, action: str, b: int) -> float:
        """R/n + β·sqrt(ln t / n); +∞ when unvisited; no bonus while ln t ≤ 0."""
        n = self.counts[action][b]
        if n == 0:
            return math.inf
        log_t = math.log(self.t) if self.t > 0 else 0.0
        bonus = self.cfg.ucb_beta * math.sqrt(log_t / n) if log_t > 0 else 0.0
        return self.sums[action][b] / n + bonus

    def decide(self, inputs: PolicyInputs) -> PolicyDecision:
        self.t += 1  # the clock ticks at every decision, learned from or not
        bins = self.bins(inputs)
        b = self.bucket(bins)
        u_skip, u_verify = self.value(SKIP, b), self.value(VERIFY, b)
        verify = u_verify >= u_skip  # ties (incl. both unvisited) verify
        counts = {a: self.counts[a][b] for a in (SKIP, VERIFY)}
        means = {a: (self.sums[a][b] / counts[a] if counts[a] else 0.0) for a in (SKIP, VERIFY)}
        op = "≥" if verify else "<"
        reason = (f"t={self.t} bucket {b} {tuple(bins)}: UCB verify {_fmt(u_verify)} (n={counts[VERIFY]}) "
                  f"{op} UCB skip {_fmt(u_skip)} (n={counts[SKIP]}) {_arrow(verify)}")
        details = {
            "t": self.t,
            "bins": bins,
            "n_bins": [self.cfg.ucb_span_bins, self.cfg.ucb_progress_bins, self.cfg.ucb_entropy_bins],
            "bucket": b,
            "counts": counts,
            "means": means,
            "ucb": {SKIP: u_skip, VERIFY: u_verify},
            "ucb_beta": float(self.cfg.ucb_beta),
            "span_len": inputs.span_len,
            "window_len": inputs.window_len,
            "progress": float(inputs.progress),
            "mean_entropy": float(inputs.mean_entropy),
            "k_hat": float(inputs.k_hat),
            "n_hi": inputs.n_hi,
        }
        return self._decision(verify, None, reason, details)

    def learn(self, decision: PolicyDecision, reward: float) -> None:
        b = decision.details["bucket"]
        action = VERIFY if decision.verify else SKIP
        self.counts[action][b] += 1
        self.sums[action][b] += float(reward)


_POLICIES: dict[str, type[Policy]] = {
    p.name: p for p in (MaskSpanLength, ScoreThreshold, ScoreHysteresis, ContextualBanditUCB, Always, Never)
}


def make_policy(cfg: DecodeConfig) -> Policy:
    """A fresh policy object (fresh state) for cfg.policy."""
    if cfg.policy not in _POLICIES:
        raise ValueError(f"policy: unknown value {cfg.policy!r}; allowed: {', '.join(_POLICIES)}")
    return _POLICIES[cfg.policy](cfg)


def redecide(cfg: DecodeConfig, records: Iterable[tuple[PolicyInputs, Optional[float]]]) -> list[PolicyDecision]:
    """Replay recorded (inputs, reward) pairs in order through a fresh policy for cfg.

    With the recording's cfg this reproduces every recorded decision (invariant 12). With changed thresholds it
    re-decides every step; the results are meaningful only up to the first step whose decision changes, because
    later inputs and rewards came from the recorded trajectory (§10). A recorded reward is credited to the new
    decision's action; a None reward (a step that did not learn) is skipped.
    """
    policy = make_policy(cfg)
    decisions = []
    for inputs, reward in records:
        decision = policy.decide(inputs)
        if reward is not None:
            policy.learn(decision, reward)
        decisions.append(decision)
    return decisions
