"""The versioned trace schema: the contract between the decoding engine and every viewer.

A trace is plain data (dataclasses <-> JSON lists, numbers and strings). Figures and replay read it without
touching a model or a tokenizer: decoded token strings are stored next to ids. Random draws are stored, never
redrawn, so a replay is exact.
"""
from __future__ import annotations

import dataclasses
import json
import math
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Optional

SCHEMA_VERSION = 1
FORWARD_KINDS = ("prefill", "draft", "verify_2l", "verify_causal", "commit", "ar")
COMMIT_HOWS = (
    "ar",  # autoregressive step (method ar)
    "accepted",  # draft accepted by verification
    "resampled",  # first rejected position, drawn from the residual (q - p)+ or argmax q
    "threshold",  # diffusion pick because p > confidence threshold (dynamic rule)
    "fallback",  # any other remasking pick (top-k, sequential, entropy-bounded)
    "hiconf_extra",  # extra: high-confidence mask unmasked on a verify step
    "ratio_extra",  # extra: span position with r >= ratio_threshold
    "ar_seed",  # right-shifted family: argmax of the last logit opens the next block
)
PROVENANCE = ("measured", "derived", "synthetic")
MAX_TEXT = 10_000  # longest string field accepted from a file


@dataclass
class Candidate:
    token: int
    text: str
    prob: float


@dataclass
class ModelInfo:
    name: str
    alignment: str  # "aligned" (SDAR, 2L verifier) | "shifted" (Fast-dLLM v2, causal verifier)
    verifier: str  # "2l" | "causal"
    mask_id: int
    stop_ids: list[int]
    vocab_size: int
    dtype: str
    device: str
    attn_implementation: str
    revision: str = ""


@dataclass
class ForwardRecord:
    index: int
    kind: str
    block: int
    step: int  # step within the block; -1 for prefill / commit
    cache_len: int  # cache length before the call
    input_len: int
    query_tokens: int
    nfe_after: int
    wall_s: float


@dataclass
class MaskDraft:
    position: int
    token: int
    text: str
    p: float
    entropy: float  # normalized entropy H / ln V
    margin: float  # top-1 minus top-2 probability
    top: list[Candidate] = field(default_factory=list)


@dataclass
class PolicyInputs:
    """Everything a routing policy reads at one step; replaying `decide` on these reproduces the decision."""

    span_len: int
    alphas: list[float]
    k_hat: float
    n_hi: int
    window_len: int  # positions in the current window (block, or sub-block for the shifted family)
    progress: float  # decoded positions in the window / window_len (prompt tail excluded)
    mean_entropy: float  # mean normalized entropy over the span (or over all masks, per ucb_entropy_scope)


@dataclass
class PolicyDecision:
    policy: str
    verify: bool
    score: Optional[float]  # None when the policy has no score; -inf (empty span) is a float
    reason: str  # one line a human reads: "s = 1.73 >= 0.00 -> verify"
    details: dict[str, Any] = field(default_factory=dict)  # thresholds, state before/after, UCB values


@dataclass
class VerifyPosition:
    position: int
    draft: int
    draft_text: str
    p: float
    q: float  # verifier probability of the draft token
    ratio: float  # r = min(1, (q/p)^gamma)
    u: Optional[float]  # uniform draw; None in greedy_exact
    accepted: bool  # this position's own test (u < r, or draft == argmax q); rows after first_reject are discarded
    argmax_q: int
    argmax_q_text: str
    argmax_q_prob: float
    top_q: list[Candidate] = field(default_factory=list)


@dataclass
class Verification:
    kind: str  # "2l" | "causal"
    mode: str  # acceptance mode
    positions: list[VerifyPosition]
    accepted_len: int
    first_reject: Optional[int]  # span index of the first rejection
    residual_mass: Optional[float]
    fallback_to_q: bool
    resampled: Optional[int]
    resampled_text: str = ""


@dataclass
class Commit:
    position: int
    token: int
    text: str
    how: str


@dataclass
class Edit:
    """A self-correction (LLaDA2.1 editing, docs/editing.md): at a decoded, non-prompt position of the current
    block the draft differs from the token there with probability p > editing_threshold, so it replaces it. The
    step is the StepRecord holding the edit."""

    position: int
    old: int
    old_text: str
    new: int
    new_text: str
    p: float  # draft probability of the new token


@dataclass
class StepRecord:
    index: int
    block: int
    step: int
    window: list[int]  # [start, end) positions of the window this step works in
    forwards: list[int]  # indices into Trace.forwards spent by this step
    masks_before: list[int]
    drafts: list[MaskDraft]
    span: list[int]  # [start, length]
    policy_inputs: Optional[PolicyInputs]
    decision: Optional[PolicyDecision]
    verification: Optional[Verification]
    fallback_k: int
    commits: list[Commit]
    reward: Optional[float] = None  # UCB reward recorded for replay
    edits: list[Edit] = field(default_factory=list)  # editing loop only: decoded tokens replaced at this step


@dataclass
class BlockRecord:
    index: int
    start: int
    length: int
    prompt_tail: int  # prompt tokens inside this block (never decoded)


@dataclass
class Header:
    schema_version: int
    library_version: str
    provenance: str
    model: ModelInfo
    config: dict[str, Any]
    seed: int
    prompt_text: str
    prompt_ids: list[int]
    prompt_tokens: list[str]
    gen_length: int
    total_length: int
    created: str = ""


@dataclass
class Footer:
    output_ids: list[int]
    output_text: str
    output_tokens: list[str]
    generated_length: int  # after trimming to gen_length, the last non-mask and the first stop id
    stop_position: Optional[int]  # index in output of the first stop id, if any
    wall_s: float
    forward_wall_s: float
    finish_reason: str = "length"  # "stop_token" | "length" | "cancelled" | "time_limit"


@dataclass
class Trace:
    header: Header
    blocks: list[BlockRecord]
    forwards: list[ForwardRecord]
    steps: list[StepRecord]
    footer: Optional[Footer] = None
    detailed: bool = True  # False: per-mask drafts, top-k and verification rows were not recorded

    # -- serialisation ---------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return _encode(dataclasses.asdict(self))

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    @classmethod
    def from_dict(cls, data: Any) -> "Trace":
        """Build and type-check a trace from plain data; raise ValueError with the path of the first problem."""
        if not isinstance(data, dict):
            raise ValueError("trace: expected a JSON object at the top level")
        header = data.get("header")
        version = header.get("schema_version") if isinstance(header, dict) else None
        if version != SCHEMA_VERSION:
            raise ValueError(f"trace: unsupported schema_version {version!r}; this viewer reads {SCHEMA_VERSION}")
        trace = _decode(cls, data, "trace")
        trace.check()
        return trace

    @classmethod
    def from_json(cls, text: str | bytes) -> "Trace":
        try:
            data = json.loads(text)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ValueError(f"trace: not valid JSON ({exc})") from None
        return cls.from_dict(data)

    def check(self) -> None:
        """Semantic checks beyond types: kinds, hows, index ranges."""
        if self.header.provenance not in PROVENANCE:
            raise ValueError(f"trace.header.provenance: must be one of {PROVENANCE}")
        total = self.header.total_length
        for f in self.forwards:
            if f.kind not in FORWARD_KINDS:
                raise ValueError(f"trace.forwards[{f.index}].kind: unknown kind {f.kind!r}")
        for s in self.steps:
            for c in s.commits:
                if c.how not in COMMIT_HOWS:
                    raise ValueError(f"trace.steps[{s.index}].commits: unknown how {c.how!r}")
                if not 0 <= c.position < total:
                    raise ValueError(f"trace.steps[{s.index}].commits: position {c.position} outside [0, {total})")
            for i in s.forwards:
                if not 0 <= i < len(self.forwards):
                    raise ValueError(f"trace.steps[{s.index}].forwards: index {i} out of range")
            for e in s.edits:
                if not 0 <= e.position < total:
                    raise ValueError(f"trace.steps[{s.index}].edits: position {e.position} outside [0, {total})")

    # -- replay ------------------------------------------------------------------------------------------------
    def canvas_at(self, step: int | None = None, mask_id: int | None = None) -> list[int]:
        """Token ids of the whole sequence after `step` steps (None: all), rebuilt from commits alone."""
        mask = self.header.model.mask_id if mask_id is None else mask_id
        ids = [mask] * self.header.total_length
        prompt = self.header.prompt_ids
        ids[: len(prompt)] = prompt
        upto = len(self.steps) if step is None else step
        for s in self.steps[:upto]:
            for c in s.commits:
                ids[c.position] = c.token
            for e in s.edits:  # edits touch decoded positions, commits masked ones: disjoint within a step
                ids[e.position] = e.new
        return ids

    def replay(self) -> list[int]:
        """The output ids rebuilt from the trace alone; equals footer.output_ids."""
        from .output import trim_output

        ids = self.canvas_at()
        p = len(self.header.prompt_ids)
        out, _ = trim_output(ids[p:], self.header.gen_length, self.header.model.mask_id, self.header.model.stop_ids)
        return out

    def metrics(self) -> dict[str, Any]:
        from .metrics import trace_metrics

        return trace_metrics(self)


# -- JSON encoding: non-finite floats are not JSON; store them as strings and restore them ---------------------

def _encode(obj: Any) -> Any:
    if isinstance(obj, float) and not math.isfinite(obj):
        return "nan" if math.isnan(obj) else ("inf" if obj > 0 else "-inf")
    if isinstance(obj, dict):
        return {k: _encode(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_encode(v) for v in obj]
    return obj


_NONFINITE = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}


def _decode(tp: Any, value: Any, path: str) -> Any:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return _decode(inner[0], value, path)
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise ValueError(f"{path}: expected an object")
        hints = typing.get_type_hints(tp)
        kwargs = {}
        for f in dataclasses.fields(tp):
            if f.name in value:
                kwargs[f.name] = _decode(hints[f.name], value[f.name], f"{path}.{f.name}")
            elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise ValueError(f"{path}.{f.name}: missing")
        extra = set(value) - {f.name for f in dataclasses.fields(tp)}
        if extra:
            raise ValueError(f"{path}: unknown field(s) {sorted(extra)[:5]}")
        return tp(**kwargs)
    if origin is list:
        if not isinstance(value, list):
            raise ValueError(f"{path}: expected a list")
        return [_decode(args[0], v, f"{path}[{i}]") for i, v in enumerate(value)]
    if origin is dict or tp is dict:
        if not isinstance(value, dict):
            raise ValueError(f"{path}: expected an object")
        _check_plain(value, path)
        return _restore(value)
    if tp is Any:
        _check_plain(value, path)
        return _restore(value)
    if tp is bool:
        if not isinstance(value, bool):
            raise ValueError(f"{path}: expected true/false")
        return value
    if tp is int:
        if not isinstance(value, int) or isinstance(value, bool):
            raise ValueError(f"{path}: expected an integer")
        return value
    if tp is float:
        if isinstance(value, str) and value in _NONFINITE:
            return _NONFINITE[value]
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise ValueError(f"{path}: expected a number")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ValueError(f"{path}: expected a string")
        if len(value) > MAX_TEXT:
            raise ValueError(f"{path}: string longer than {MAX_TEXT} characters")
        return value
    raise ValueError(f"{path}: unsupported type {tp}")


def _restore(value: Any) -> Any:
    """Free-form values: turn the strings _encode wrote for non-finite floats back into floats."""
    if isinstance(value, str) and value in _NONFINITE:
        return _NONFINITE[value]
    if isinstance(value, dict):
        return {k: _restore(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_restore(v) for v in value]
    return value


def _check_plain(value: Any, path: str, depth: int = 0) -> None:
    """Free-form dicts (config, policy details) may hold only JSON scalars, lists and objects, bounded."""
    if depth > 6:
        raise ValueError(f"{path}: nested too deeply")
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str) or len(k) > 200:
                raise ValueError(f"{path}: bad key")
            _check_plain(v, f"{path}.{k}", depth + 1)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _check_plain(v, f"{path}[{i}]", depth + 1)
    elif isinstance(value, str):
        if len(value) > MAX_TEXT:
            raise ValueError(f"{path}: string longer than {MAX_TEXT} characters")
    elif value is not None and not isinstance(value, (int, float, bool)):
        raise ValueError(f"{path}: unsupported value")
