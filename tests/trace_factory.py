"""Builders of valid synthetic `Trace` objects for component tests (provenance "synthetic").

A trace is described block by block as a list of step specs:

* `V("110")`: a verify step; one character per span position, '1' accepted, '0' rejected (cut at the first '0',
  which is resampled from the residual unless `allow_resample` is off).
* `D(2, "threshold")`: a diffusion-only step committing the 2 leftmost masks with the given `how`.
* AR traces come from `ar_trace()`.

Numbers (p, q, u, entropy) are deterministic functions of a seed, and are consistent with the outcome: an
accepted position has u < r, a rejected one u >= r.
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Optional, Union

from s2d2.config import DecodeConfig, preset
from s2d2.output import trim_output
from s2d2.trace import (
    SCHEMA_VERSION, BlockRecord, Candidate, Commit, Footer, ForwardRecord, Header, MaskDraft, ModelInfo,
    PolicyDecision, PolicyInputs, StepRecord, Trace, VerifyPosition, Verification,
)

MASK_ID, STOP_ID, VOCAB = 1, 2, 64
WORDS = ["The", " cat", " sat", " on", " the", " mat", ".", " It", " was", " warm", "\n", " 2", "+", "3", "=",
         " 5", " and", " then", " slept", " well"]
HOSTILE = ["<script>alert(1)</script>", "\" onmouseover=\"x", "&amp;", "<b>bold</b>", "'", "\u202e evil", "\t\n"]


@dataclass
class V:
    outcome: str = "1"
    fallback_to_q: bool = False
    score: Optional[float] = None
    details: dict = field(default_factory=dict)


@dataclass
class D:
    picks: int = 1
    how: str = "threshold"
    score: Optional[float] = None
    details: dict = field(default_factory=dict)


Spec = Union[V, D]


class _Builder:
    def __init__(self, config: DecodeConfig, prompt_len: int, gen_length: int, seed: int, words: list[str],
                 verifier: str) -> None:
        self.cfg, self.rng, self.words, self.verifier = config, random.Random(seed), words, verifier
        self.B = config.block_length
        self.P = prompt_len
        self.total = math.ceil((prompt_len + gen_length) / self.B) * self.B
        self.gen_length = gen_length
        self.ids = [MASK_ID] * self.total
        self.ids[:prompt_len] = [self.tok(i) for i in range(prompt_len)]
        self.forwards: list[ForwardRecord] = []
        self.steps: list[StepRecord] = []
        self.blocks: list[BlockRecord] = []
        self.cache = 0
        self.hyst_on = False

    def tok(self, pos: int, shift: int = 0) -> int:
        return 10 + (pos * 7 + shift * 3) % len(self.words)

    def text(self, token: int) -> str:
        return self.words[(token - 10) % len(self.words)] if token >= 10 else "<stop>"

    def forward(self, kind: str, block: int, step: int, input_len: int, query: int | None = None) -> int:
        idx = len(self.forwards)
        self.forwards.append(ForwardRecord(idx, kind, block, step, self.cache, input_len,
                                           input_len if query is None else query, idx + 1, 0.001 * (1 + idx % 3)))
        return idx

    def prefill(self) -> None:
        n = (self.P // self.B) * self.B
        if n:
            self.forward("prefill", -1, -1, n)
            self.cache = n

    def draft(self, pos: int, q_shift: int = 0) -> MaskDraft:
        r = self.rng
        token = self.tok(pos)
        p = round(0.35 + 0.6 * r.random(), 4)
        second = self.tok(pos, 1)
        top = [Candidate(token, self.text(token), p), Candidate(second, self.text(second), round((1 - p) * 0.6, 4))]
        entropy = round(0.05 + 0.5 * (1 - p), 4)
        return MaskDraft(pos, token, self.text(token), p, entropy, round(p - top[1].prob, 4), top)

    def block(self, index: int, specs: list[Spec]) -> None:
        start = index * self.B
        tail = max(0, min(self.P - start, self.B))
        self.blocks.append(BlockRecord(index, start, self.B, tail))
        for j, spec in enumerate(specs):
            masks = [p for p in range(start, start + self.B) if self.ids[p] == MASK_ID]
            if not masks:
                raise ValueError(f"block {index}: step {j} has no masks left")
            self.step(index, j, start, masks, spec)
        left = [p for p in range(start, start + self.B) if self.ids[p] == MASK_ID]
        if left:
            raise ValueError(f"block {index}: positions {left} never decoded")
        self.forward("commit", index, -1, self.B)
        self.cache += self.B

    def step(self, block: int, j: int, start: int, masks: list[int], spec: Spec) -> None:
        fwd = [self.forward("draft", block, j, self.B)]
        drafts = [self.draft(p) for p in masks]
        span = [masks[0], 1]
        while masks[0] + span[1] in masks:
            span[1] += 1
        alphas = [round(math.exp(-d.entropy), 4) for d in drafts[: span[1]]]
        k_hat, prod = 0.0, 1.0
        for a in alphas:
            prod *= a
            k_hat += prod
        n_hi = sum(d.p > self.cfg.confidence_threshold for d in drafts)
        progress = round((self.B - len(masks)) / self.B, 4)
        mean_h = round(sum(d.entropy for d in drafts) / len(drafts), 4)
        inputs = PolicyInputs(span[1], alphas, round(k_hat, 4), n_hi, self.B, progress, mean_h)
        verify = isinstance(spec, V)
        decision = self.decide(verify, spec, inputs)
        verification, commits = None, []
        if verify:
            kind = "verify_2l" if self.verifier == "2l" else "verify_causal"
            fwd.append(self.forward(kind, block, j, 2 * self.B if kind == "verify_2l" else self.B,
                                    2 * self.B if kind == "verify_2l" else self.B))
            verification, commits = self.verify(spec, drafts[: span[1]])
        else:
            for d in drafts[: spec.picks]:
                commits.append(Commit(d.position, d.token, d.text, spec.how))
        for c in commits:
            self.ids[c.position] = c.token
        reward = len(commits) / (2 if verify else 1) if self.cfg.policy == "contextual_bandit_ucb" else None
        self.steps.append(StepRecord(len(self.steps), block, j, [start, start + self.B], fwd, masks, drafts, span,
                                     inputs if decision else None, decision, verification, 0, commits, reward))

    def decide(self, verify: bool, spec: Spec, inputs: PolicyInputs) -> Optional[PolicyDecision]:
        cfg = self.cfg
        if cfg.method != "s2d2":
            return None
        details = dict(spec.details)
        if cfg.policy == "score_hysteresis":
            details.update(tau_on=cfg.hysteresis_on, tau_off=cfg.hysteresis_off, state_before=self.hyst_on,
                           state_after=verify)
            self.hyst_on = verify
        elif cfg.policy == "score_threshold":
            details.update(threshold=cfg.score_threshold, k_hat=inputs.k_hat)
        score = spec.score
        if score is None and cfg.policy in ("score_threshold", "score_hysteresis"):
            c = cfg.penalty_coef * (inputs.n_hi if cfg.score_type == "difference_dynamic" else 1)
            score = round(inputs.k_hat - c, 4)
        if cfg.policy == "score_threshold" and spec.score is None and score is not None:
            thr = cfg.score_threshold  # keep synthetic scores consistent with the decision
            score = max(score, thr + 0.25) if verify else min(score, thr - 0.25)
        if cfg.policy == "mask_span_length":  # like the engine: no score, the span length in details
            score = None
            details.update(span_len=inputs.span_len, min_span_length=cfg.min_span_length)
        arrow = "verify" if verify else "skip"
        reason = f"s = {score:.2f} -> {arrow}" if score is not None else f"-> {arrow}"
        return PolicyDecision(cfg.policy, verify, score, reason, details)

    def verify(self, spec: V, drafts: list[MaskDraft]) -> tuple[Verification, list[Commit]]:
        rows, commits = [], []
        first = spec.outcome.find("0")
        for i, d in enumerate(drafts):  # every span position is tested; commits stop at the first rejection
            ok = i != first if i <= first or first < 0 else spec.outcome[i:i + 1] != "0"
            q = round(d.p * (1.0 if ok else 0.3), 4) if i % 2 == 0 or not ok else min(1.0, round(d.p * 1.2, 4))
            r = min(1.0, q / max(d.p, 1e-12))
            u = round(r * 0.5, 4) if ok else round(r + (1 - r) * 0.5, 4)
            arg = d.token if ok else self.tok(d.position, 2)
            rows.append(VerifyPosition(d.position, d.token, d.text, d.p, q, round(r, 4), u, ok, arg, self.text(arg),
                                       0.7, [Candidate(arg, self.text(arg), 0.7)]))
            if ok and (first < 0 or i < first):
                commits.append(Commit(d.position, d.token, d.text, "accepted"))
        resampled = resampled_text = None
        if first >= 0 and first < len(drafts):
            tok = self.tok(drafts[first].position, 2)
            resampled, resampled_text = tok, self.text(tok)
            commits.append(Commit(drafts[first].position, tok, resampled_text, "resampled"))
        accepted = len([c for c in commits if c.how == "accepted"])
        mode = self.cfg.acceptance
        if mode == "greedy_exact":
            for r in rows:
                r.u = None
        return Verification(self.verifier, mode, rows, accepted, first if first >= 0 else None,
                            None if first < 0 else (0.0 if spec.fallback_to_q else 0.42), spec.fallback_to_q,
                            resampled, resampled_text or ""), commits

    def build(self, provenance: str = "synthetic") -> Trace:
        out, stop = trim_output(self.ids[self.P:], self.gen_length, MASK_ID, [STOP_ID])
        model = ModelInfo("synthetic-tiny", "aligned" if self.verifier == "2l" else "shifted", self.verifier,
                          MASK_ID, [STOP_ID], VOCAB, "float32", "cpu", "sdpa")
        header = Header(SCHEMA_VERSION, "0.1.0", provenance, model, self.cfg.to_dict(), 0,
                        "".join(self.text(t) for t in self.ids[: self.P]), self.ids[: self.P],
                        [self.text(t) for t in self.ids[: self.P]], self.gen_length, self.total)
        footer = Footer(out, "".join(self.text(t) for t in out), [self.text(t) for t in out], len(out), stop,
                        0.5, sum(f.wall_s for f in self.forwards))
        return Trace(header, self.blocks, self.forwards, self.steps, footer)


def build_trace(plan: list[list[Spec]], config: DecodeConfig | None = None, prompt_len: int = 6,
                seed: int = 0, words: list[str] | None = None, verifier: str = "2l") -> Trace:
    """A trace whose decoded blocks follow `plan` (one list of step specs per block after the prompt)."""
    cfg = config or preset("sdar-config-b", block_length=4)
    gen = len(plan) * cfg.block_length - (prompt_len % cfg.block_length)
    b = _Builder(cfg, prompt_len, gen, seed, words or WORDS, verifier)
    b.prefill()
    first = prompt_len // cfg.block_length
    for k, specs in enumerate(plan):
        b.block(first + k, specs)
    return b.build()


# -- named edge cases --------------------------------------------------------------------------------------------

def all_accepted() -> Trace:
    """One full block (prompt 4, B 4): a single verify accepts the whole span."""
    return build_trace([[V("1111")]], prompt_len=4)


def reject_at_zero() -> Trace:
    return build_trace([[V("0"), V("111")]], prompt_len=4)


def residual_fallback_to_q() -> Trace:
    return build_trace([[V("10", fallback_to_q=True), V("11")]], prompt_len=4)


def mixed() -> Trace:
    """SDAR config-A style: verify and skip steps, prompt tail inside the first block."""
    cfg = preset("sdar-config-a")
    plan = [[V("0"), D(1, "threshold")], [D(2, "threshold"), V("11")], [V("0"), D(1, "fallback"), V("11")]]
    return build_trace(plan, config=cfg, prompt_len=6)


def hysteresis_flip() -> Trace:
    cfg = preset("fastdllm-config-a", block_length=4, sub_block_length=None, hysteresis_on=1.0,
                 hysteresis_off=-0.5)
    plan = [[D(1, "threshold", score=0.5), V("111", score=1.5)],
            [V("10", score=0.2), D(1, "threshold", score=-0.8), D(1, "fallback", score=0.9)]]
    return build_trace(plan, config=cfg, prompt_len=4, verifier="causal")


def ucb_first_visit() -> Trace:
    cfg = preset("sdar-config-b", block_length=4, policy="contextual_bandit_ucb")
    first = {"t": 1, "bucket": 3, "ucb": {"skip": math.inf, "verify": math.inf}, "counts": {"skip": 0, "verify": 0}}
    second = {"t": 2, "bucket": 3, "ucb": {"skip": math.inf, "verify": 0.5}, "counts": {"skip": 0, "verify": 1}}
    third = {"t": 3, "bucket": 3, "ucb": {"skip": 1.3, "verify": 1.7}, "counts": {"skip": 1, "verify": 1}}
    return build_trace([[V("0", details=first), D(1, "fallback", details=second), V("11", details=third)]],
                       config=cfg, prompt_len=4)


def diffusion_only() -> Trace:
    cfg = preset("dynamic-baseline")
    return build_trace([[D(2, "threshold"), D(1, "fallback"), D(1, "fallback")], [D(4, "threshold")]],
                       config=cfg, prompt_len=4)


def greedy_exact() -> Trace:
    cfg = preset("sdar-config-b", block_length=4, acceptance="greedy_exact")
    return build_trace([[V("110"), V("11")]], config=cfg, prompt_len=4)


def hostile() -> Trace:
    return build_trace([[V("10"), V("111")], [D(4, "fallback")]], prompt_len=4, words=HOSTILE + WORDS[:3])


def ar_trace(n_tokens: int = 6, prompt_len: int = 3) -> Trace:
    cfg = preset("ar")
    b = _Builder(cfg, prompt_len, n_tokens, 0, WORDS, "causal")
    b.forward("prefill", -1, -1, prompt_len)
    b.cache = prompt_len
    for k in range(n_tokens):
        pos = prompt_len + k
        b.blocks.append(BlockRecord(pos, pos, 1, 0))
        f = b.forward("ar", pos, 0, 1)
        tok = b.tok(pos)
        b.ids[pos] = tok
        b.steps.append(StepRecord(len(b.steps), pos, 0, [pos, pos + 1], [f], [pos], [], [pos, 1], None, None, None,
                                  0, [Commit(pos, tok, b.text(tok), "ar")]))
        b.cache += 1
    return b.build()


def large(n_tokens: int = 512, block_length: int = 16, seed: int = 1) -> Trace:
    """A long S2D2 trace (about n_tokens generated) mixing verify and skip steps, for benchmarks."""
    rng = random.Random(seed)
    cfg = preset("sdar-config-b", block_length=block_length)
    plan = []
    for _ in range(n_tokens // block_length):
        left, specs = block_length, []
        while left:
            if rng.random() < 0.3:
                n = rng.randint(1, min(3, left))
                specs.append(D(n, "fallback"))
            else:
                acc = rng.randint(0, left)
                specs.append(V("1" * acc + ("0" if acc < left else "")))
                n = min(acc + 1, left)
            left -= n
        plan.append(specs)
    return build_trace(plan, config=cfg, prompt_len=block_length, seed=seed)


SCENARIOS = {
    "all_accepted": all_accepted, "reject_at_zero": reject_at_zero, "residual_fallback_to_q": residual_fallback_to_q,
    "mixed": mixed, "hysteresis_flip": hysteresis_flip, "ucb_first_visit": ucb_first_visit,
    "diffusion_only": diffusion_only, "greedy_exact": greedy_exact, "hostile": hostile, "ar": ar_trace,
}
