"""The records a trace is made of: one dataclass per thing the decoder does (a forward, a step, a draft, a
verification, a commit, an edit) and the run's header and footer. Their annotated field types (fields.py) carry the
bounds pydantic checks when a trace is read; file.py assembles them into a Trace and rules.py relates them to each
other. Routing policies read and return PolicyInputs / PolicyDecision from here."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal, Optional

from pydantic import Field, Strict

from .fields import (MAX_TOP, Bool, Count, Free, Int, Name, Num, Pair, Prob, Seconds, Text, TokenText, forbid_extra,
                     items)


SCHEMA_VERSION = 1
# "commit+draft" (fused_commit, beyond the paper): one forward that caches the previous block's uncached tail and
# drafts the next block; its query count is tail + block. The pipeline loop (D2F) also caches finished blocks with
# the next draft ("commit+draft", several blocks each) and its first forward caches the prompt ("prefill+draft").
FORWARD_KINDS = ("prefill", "draft", "verify_2l", "verify_causal", "commit", "ar", "commit+draft", "prefill+draft")
# The lifecycle of a pipeline block (D2F): it joins the pipeline (added), its predecessor passes
# decoded_token_threshold (complete: it now decodes a token every step), its last mask is decoded (finished), its KV
# is stored by a forward once every earlier block is finished (cached).
BLOCK_EVENTS = ("added", "complete", "finished", "cached")
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
MAX_VOCAB = 1 << 22
# Where a cost table came from (routing in seconds, s2d2/models/costs.py): timed on this device and model (warm-up
# calibration refined by every decode's forward timings), passed to generate by the caller, or one unit per forward.
COST_SOURCES = ("measured", "given", "nominal")
COST_FALLBACK = {  # a kind without timings borrows the fit of the nearest kind (same attention work per query)
    "verify_2l": "draft", "verify_causal": "commit", "commit+draft": "draft", "draft": "verify_2l",
    "commit": "draft", "ar": "commit", "prefill": "commit",
}
NOMINAL_FORWARD_S = 1e-3  # the nominal table: every forward costs the same, whatever its queries (NFE accounting)
CostSeconds = Annotated[float, Strict(), Field(ge=0, le=3600, allow_inf_nan=False)]


@forbid_extra
@dataclass(slots=True)
class Candidate:
    token: Count
    text: TokenText
    prob: Prob


@forbid_extra
@dataclass(slots=True)
class ModelInfo:
    name: Name
    alignment: Name  # "aligned" (SDAR, 2L verifier) | "shifted" (Fast-dLLM v2, causal verifier)
    verifier: Name  # "2l" | "causal"
    mask_id: Count
    stop_ids: items(Count, MAX_TOP)
    vocab_size: Annotated[int, Strict(), Field(ge=1, le=MAX_VOCAB)]
    dtype: Name
    device: Name
    attn_implementation: Name
    revision: Name = ""


@forbid_extra
@dataclass(slots=True)
class ForwardRecord:
    index: Count
    kind: Literal[FORWARD_KINDS]
    block: Int
    step: Int  # step within the block; -1 for prefill / commit
    cache_len: Count  # cache length before the call
    input_len: Count
    query_tokens: Count
    nfe_after: Count
    wall_s: Seconds


@forbid_extra
@dataclass(slots=True)
class MaskDraft:
    position: Count
    token: Count
    text: TokenText
    p: Prob
    entropy: Num  # normalized entropy H / ln V
    margin: Num  # top-1 minus top-2 probability
    top: items(Candidate, MAX_TOP) = field(default_factory=list)


@forbid_extra
@dataclass(slots=True)
class ForwardCost:
    """What one kind of forward costs on the run's device and model: seconds ≈ base_s + per_query_s · queries."""

    kind: Literal[FORWARD_KINDS]
    base_s: CostSeconds
    per_query_s: CostSeconds
    samples: Count  # timings behind the fit (0: nominal)


@forbid_extra
@dataclass(slots=True)
class CostTable:
    """The forward costs a run routed with (policy `cost_aware`), frozen when the decode began: replaying its
    decisions needs nothing else. `padded_up_to` > 0 (static backend): a forward of q <= that many queries runs at
    the next power of two, so it costs what that shape costs."""

    source: Literal[COST_SOURCES]
    padded_up_to: Count
    kinds: items(ForwardCost, len(FORWARD_KINDS))

    def cost(self, kind: str, queries: int) -> float:
        """Seconds of one forward of `kind` with `queries` query tokens (a kind without a fit borrows one)."""
        fits = {f.kind: f for f in self.kinds}
        seen = set()
        while kind not in fits and kind in COST_FALLBACK and kind not in seen:
            seen.add(kind)
            kind = COST_FALLBACK[kind]
        fit = fits.get(kind)
        if fit is None:
            return NOMINAL_FORWARD_S
        q = queries
        if 0 < q <= self.padded_up_to:
            q = 1 << max(0, q - 1).bit_length()
        return max(fit.base_s + fit.per_query_s * q, 1e-9)

    @classmethod
    def nominal(cls) -> "CostTable":
        """Every forward costs the same (a model that measures nothing): routing in seconds = routing in forwards."""
        return cls("nominal", 0, [ForwardCost(k, NOMINAL_FORWARD_S, 0.0, 0) for k in FORWARD_KINDS])


@forbid_extra
@dataclass(slots=True)
class StepCosts:
    """What routing in seconds reads at one step (policy `cost_aware`): the header's cost table evaluated at this
    step's query counts, and what a skip would decode."""

    draft_queries: Count  # queries of a draft of this block now (B minus the cached prefix)
    draft_s: CostSeconds  # what a skip step costs: one draft forward
    verify_queries: Count  # queries of this step's verifier forward
    verify_s: CostSeconds  # what verifying adds: the verifier forward
    skip_tokens: Count  # tokens a skip decodes here (the remasking rule's picks)
    min_tokens: Count  # k_s: tokens any step decodes at least
    sure_prefix: Count = 0  # the span's leading drafts above τ: what a skip decodes without splitting the span


@forbid_extra
@dataclass(slots=True)
class PolicyInputs:
    """Everything a routing policy reads at one step; replaying `decide` on these reproduces the decision."""

    span_len: Count
    alphas: items(Num)
    k_hat: Num
    n_hi: Count
    window_len: Count  # positions in the current window (block, or sub-block for the shifted family)
    progress: Num  # decoded positions in the window / window_len (prompt tail excluded; Fast-dLLM v2: included)
    mean_entropy: Num  # mean normalized entropy over the span (or over all masks, per ucb_entropy_scope)
    costs: Optional[StepCosts] = None  # only policies that route in seconds (cost_aware) get them


@forbid_extra
@dataclass(slots=True)
class PolicyDecision:
    policy: Name
    verify: Bool
    score: Optional[Num]  # None when the policy has no score; -inf (empty span) is a float
    reason: Name  # one line a human reads: "s = 1.73 >= 0.00 -> verify"
    details: Free = field(default_factory=dict)  # thresholds, state before/after, UCB values


@forbid_extra
@dataclass(slots=True)
class VerifyPosition:
    position: Count
    draft: Count
    draft_text: TokenText
    p: Prob  # probabilities, ratios and draws lie in [0, 1]: an upload saying q = 5.0 is refused
    q: Prob  # verifier probability of the draft token
    ratio: Prob  # r = min(1, (q/p)^gamma)
    u: Optional[Prob]  # uniform draw; None in greedy_exact
    accepted: Bool  # this position's own test (u < r, or draft == argmax q); rows after first_reject are discarded
    argmax_q: Count
    argmax_q_text: TokenText
    argmax_q_prob: Prob
    top_q: items(Candidate, MAX_TOP) = field(default_factory=list)


@forbid_extra
@dataclass(slots=True)
class Verification:
    kind: Name  # "2l" | "causal"
    mode: Name  # acceptance mode
    positions: items(VerifyPosition)
    accepted_len: Count
    first_reject: Optional[Count]  # span index of the first rejection
    residual_mass: Optional[Num]
    fallback_to_q: Bool
    resampled: Optional[Count]
    resampled_text: TokenText = ""


@forbid_extra
@dataclass(slots=True)
class Commit:
    position: Count
    token: Count
    text: TokenText
    how: Literal[COMMIT_HOWS]


@forbid_extra
@dataclass(slots=True)
class Edit:
    """A self-correction (LLaDA2.1 editing, docs/editing.md): at a decoded, non-prompt position of the current
    block the draft differs from the token there with probability p > editing_threshold, so it replaces it. The
    step is the StepRecord holding the edit."""

    position: Count
    old: Count
    old_text: TokenText
    new: Count
    new_text: TokenText
    p: Prob  # draft probability of the new token


@forbid_extra
@dataclass(slots=True)
class InFlight:
    """One block in flight at a pipeline step (D2F): whether it counts as complete (its predecessor is far enough
    along), its masks when the step began and how many the step decoded there."""

    block: Count
    complete: Bool
    masks: Count
    decoded: Count


@forbid_extra
@dataclass(slots=True)
class BlockEvent:
    """A pipeline block's lifecycle event (BLOCK_EVENTS), recorded in the step where it happens."""

    block: Count
    event: Literal[BLOCK_EVENTS]


@forbid_extra
@dataclass(slots=True)
class StepRecord:
    index: Count
    block: Int
    step: Int
    window: Pair  # [start, end) positions of the window this step works in
    forwards: items(Count, 8)  # indices into Trace.forwards spent by this step
    masks_before: items(Count)
    drafts: items(MaskDraft)
    span: Pair  # [start, length]
    policy_inputs: Optional[PolicyInputs]
    decision: Optional[PolicyDecision]
    verification: Optional[Verification]
    fallback_k: Count
    commits: items(Commit)
    reward: Optional[Num] = None  # UCB reward recorded for replay
    edits: items(Edit) = field(default_factory=list)  # editing loop only: decoded tokens replaced at this step
    in_flight: items(InFlight) = field(default_factory=list)  # pipeline loop only: every block the step touched
    events: items(BlockEvent) = field(default_factory=list)  # pipeline loop only: block lifecycle events


@forbid_extra
@dataclass(slots=True)
class BlockRecord:
    index: Count
    start: Count
    length: Count
    prompt_tail: Count  # prompt tokens inside this block (never decoded)
    length_reason: Text = ""  # adaptive_block: why the block has this length (empty for a fixed block size)


DECODED_WHERE = ("server", "browser")


@forbid_extra
@dataclass(slots=True)
class DecodedIn:
    """Where the run was decoded: on the server (torch), or in a visitor's browser by the page decoder (s2d2_web/)
    with an ONNX Runtime build, its version, backend and the dtype it computed in. A trace without this record was
    decoded by the library itself (the server, or `python -m s2d2`), as every trace before the field existed."""

    where: Literal[DECODED_WHERE]
    runtime: Name  # "torch" | "onnxruntime-web"
    runtime_version: Name
    backend: Name  # "cpu", "cuda", "wasm"
    dtype: Name  # what the forward computed in: "float32", ...


@forbid_extra
@dataclass(slots=True)
class Header:
    schema_version: Literal[SCHEMA_VERSION]
    library_version: Name
    provenance: Literal[PROVENANCE]
    model: ModelInfo
    config: Free
    seed: Annotated[int, Strict(), Field(ge=0, le=2**63 - 1)]
    prompt_text: Text
    prompt_ids: items(Count)
    prompt_tokens: items(TokenText)
    gen_length: Count
    total_length: Count
    created: Name = ""
    costs: Optional[CostTable] = None  # the forward costs the run routed with (cost_aware only; absent otherwise)
    decoded_in: Optional[DecodedIn] = None  # None: decoded by the library (server or CLI), as older traces were


@forbid_extra
@dataclass(slots=True)
class Footer:
    output_ids: items(Count)
    output_text: Text
    output_tokens: items(TokenText)
    generated_length: Count  # after trimming to gen_length, the last non-mask and the first stop id
    stop_position: Optional[Count]  # index in output of the first stop id, if any
    wall_s: Seconds
    forward_wall_s: Seconds
    finish_reason: Name = "length"  # "stop_token" | "length" | "cancelled" | "time_limit"
