"""The cross-field rules of a trace: after pydantic has checked types and bounds, and before any viewer builds an
index, a canvas or a figure, relate the fields to each other and to the run-size limits (s2d2/limits.py). Every
rejection is one ValueError line naming the field path and the bound."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional, Protocol

# The module, not its name: s2d2.config imports the policies, which import this package's records, so while
# s2d2.config is first being imported it is still incomplete when this line runs.
from .. import config
from ..decoding.layout import block_plan
from ..limits import Limits
from .records import BlockRecord, Footer, ForwardRecord, Header, StepRecord


class TraceParts(Protocol):
    """What the rules read of a Trace (s2d2.trace.Trace)."""

    header: Header
    blocks: list[BlockRecord]
    forwards: list[ForwardRecord]
    steps: list[StepRecord]
    footer: Optional[Footer]
    detailed: bool


# -- cross-field rules: after the type checks, before any viewer touches the trace -------------------------------

STEP_SLACK = 1  # steps per decoded position: every step that starts with masks commits at least one token; the
#                shifted family adds one AR-seed step per block, the editing loop up to max_post_steps mask-free
#                (edit-only) steps per block (Layout.max_steps)
FORWARDS_PER_STEP = 3  # draft and verify, and room for one more kind


@dataclass(frozen=True)
class Layout:
    """Where a run's blocks lie: block k spans [k*B, k*B + B) (AR: [k, k + 1)); the first holds the prompt tail.
    With adaptive_block the blocks' own records give their extents, and `block` bounds every block's length."""

    prompt: int
    block: int
    first: int  # start of the first block
    total: int
    ar: bool
    adaptive: Optional[tuple[int, int]] = None  # (smallest, largest) block length with adaptive_block
    extents: Optional[dict[int, tuple[int, int]]] = None  # adaptive: block index -> [start, end)
    editing: Optional[float] = None  # the editing loop's tau_edit: steps may record edits with p above it
    post_steps: int = 0  # the editing loop's max_post_steps: mask-free steps allowed per block
    pipeline: bool = False  # D2F: blocks 1, 2, ... of `block` positions from the prompt's end; a step spans several

    def extent(self, index: int) -> tuple[int, int]:
        if self.extents is not None:
            return self.extents.get(index, (self.total, self.total + 1))  # unknown block: outside the run
        if self.pipeline:
            start = self.prompt + (index - 1) * self.block if index >= 1 else self.total
            return start, start + self.block
        start = index if self.ar else index * self.block
        return start, start + self.block

    def index_at(self, start: int) -> int:
        if self.pipeline:
            return (start - self.prompt) // self.block + 1
        return start if self.ar else start // self.block

    def forward_most(self, kind: str) -> int:
        """The most query tokens a forward of this kind reads."""
        if kind == "prefill":
            return self.prompt + 1
        if not self.pipeline:
            return 2 * self.block  # a 2L verify reads 2B queries
        return 2 * (self.total - self.prompt) if kind == "verify_2l" else self.total

    @property
    def max_blocks(self) -> int:
        return (self.total - self.first) // (self.adaptive[0] if self.adaptive else self.block)

    @property
    def max_steps(self) -> int:
        return STEP_SLACK * (self.total - self.prompt) + self.max_blocks * (1 + self.post_steps)


def _fail(path: str, problem: str) -> None:
    raise ValueError(f"{path}: {problem}")


def check_trace(t: TraceParts, lim: Limits) -> None:
    """Relate the fields to each other and to the run-size limits; one ValueError naming the field."""
    lay = layout_of(t.header, lim)
    if lay.adaptive:
        lay = _check_adaptive_blocks(t, lay)
    for i, b in enumerate(t.blocks if not lay.adaptive else []):
        start = lay.first + i * lay.block
        if (b.index, b.start, b.length) != (lay.index_at(start), start, lay.block) or start + b.length > lay.total:
            _fail(f"trace.blocks[{i}]", f"index {b.index}, start {b.start}, length {b.length}: blocks must tile "
                  f"[{lay.first}, {lay.total}) in order, {lay.block} positions each (expected index "
                  f"{lay.index_at(start)}, start {start})")
        if b.prompt_tail != max(0, min(lay.prompt - start, lay.block)):
            _fail(f"trace.blocks[{i}].prompt_tail", f"{b.prompt_tail} disagrees with a prompt of {lay.prompt} tokens")
    if len(t.steps) > lay.max_steps:
        _fail("trace.steps", f"{len(t.steps)} steps; a run of {lay.total - lay.prompt} positions has at most "
              f"{lay.max_steps}")
    if len(t.forwards) > FORWARDS_PER_STEP * len(t.steps) + 2 * len(t.blocks) + 2:
        _fail("trace.forwards", f"{len(t.forwards)} forwards for {len(t.steps)} steps and {len(t.blocks)} blocks")
    for i, f in enumerate(t.forwards):
        _check_forward(i, f, lay, len(t.forwards))
    table = t.header.costs
    if table is not None and len({f.kind for f in table.kinds}) < len(table.kinds):
        _fail("trace.header.costs.kinds", "each forward kind at most once")
    vocab = t.header.model.vocab_size
    for i, s in enumerate(t.steps):
        _check_step(i, s, lay, len(t.forwards), vocab, t.detailed)
    if lay.pipeline:
        _check_lifecycle(t)
    if t.footer is not None:
        gen = t.header.gen_length
        f = t.footer
        if max(len(f.output_ids), len(f.output_tokens), f.generated_length, f.stop_position or 0) > gen:
            _fail("trace.footer", f"output longer than gen_length {gen}")


def layout_of(h: Header, lim: Limits) -> Layout:
    """The header's run geometry, checked against the limits in force."""

    try:
        cfg = config.DecodeConfig.from_dict(dict(h.config))
    except (ValueError, TypeError, OverflowError) as exc:
        raise ValueError(f"trace.header.config: {str(exc)[:200]}") from None
    P, G = len(h.prompt_ids), h.gen_length
    if not 1 <= P <= lim.max_prompt_tokens:
        _fail("trace.header.prompt_ids", f"{P} tokens; must be 1 to {lim.max_prompt_tokens} (S2D2_MAX_PROMPT_TOKENS)")
    if not 1 <= G <= lim.max_gen_tokens:
        _fail("trace.header.gen_length", f"{G}; must be 1 to {lim.max_gen_tokens} (S2D2_MAX_GEN_TOKENS)")
    top = max(cfg.block_length, cfg.adaptive_max_block if cfg.adaptive_block else 0)
    if top > lim.max_block_length:
        _fail("trace.header.config.block_length", f"{top}; at most {lim.max_block_length} (S2D2_MAX_BLOCK_LENGTH)")
    ar = cfg.method == "ar"
    B = 1 if ar else cfg.block_length
    try:
        plan = block_plan(cfg, P, h.model.alignment == "shifted", G)
    except ValueError as exc:  # a plan the decoder refuses (the editing loop on a right-shifted model)
        raise ValueError(f"trace.header.config.{str(exc)[:200]}") from None
    total = P + G if ar else plan.total
    if h.total_length != total and not (cfg.adaptive_block and plan.first_start < h.total_length <= total):
        _fail("trace.header.total_length", f"{h.total_length}; must be prompt ({P}) + gen_length ({G}) padded to "
              f"blocks of {B}: {total}")
    m = h.model
    if m.mask_id >= m.vocab_size or any(t >= m.vocab_size for t in [*m.stop_ids, *h.prompt_ids]):
        _fail("trace.header", f"a token id outside the vocabulary [0, {m.vocab_size})")
    if len(h.prompt_tokens) not in (0, P):
        _fail("trace.header.prompt_tokens", f"{len(h.prompt_tokens)} strings for {P} prompt ids")
    if cfg.adaptive_block and not ar:
        return Layout(P, cfg.adaptive_max_block, plan.first_start, h.total_length, False,
                      (cfg.adaptive_min_block, cfg.adaptive_max_block))
    if cfg.loop == "editing":
        return Layout(P, B, plan.first_start, total, False, editing=cfg.editing_threshold,
                      post_steps=cfg.max_post_steps)
    if cfg.loop == "pipeline":
        return Layout(P, B, P, total, False, pipeline=True)
    return Layout(P, B, P if ar else P // B * B, total, ar)


def _check_adaptive_blocks(t: TraceParts, lay: Layout) -> Layout:
    """adaptive_block: blocks run back to back from the prompt-tail block to total_length, each a power of two in
    [smallest, largest] starting at a multiple of its length; returns the layout with their extents."""
    smallest, largest = lay.adaptive or (1, 1)
    start, index = lay.first, None
    extents: dict[int, tuple[int, int]] = {}
    for i, b in enumerate(t.blocks):
        ok = (b.start == start and smallest <= b.length <= largest and b.length & (b.length - 1) == 0
              and b.start % b.length == 0 and b.start + b.length <= lay.total
              and (index is None or b.index == index + 1))
        if not ok:
            _fail(f"trace.blocks[{i}]", f"index {b.index}, start {b.start}, length {b.length}: adaptive blocks run "
                  f"back to back from {lay.first}, each a power of two in [{smallest}, {largest}] starting at a "
                  "multiple of its length")
        if b.prompt_tail != max(0, min(lay.prompt - b.start, b.length)):
            _fail(f"trace.blocks[{i}].prompt_tail", f"{b.prompt_tail} disagrees with a prompt of {lay.prompt} tokens")
        extents[b.index] = (b.start, b.start + b.length)
        start, index = b.start + b.length, b.index
    if t.blocks and start != lay.total:
        _fail("trace.header.total_length", f"{lay.total}; adaptive blocks end at {start}")
    return dataclasses.replace(lay, extents=extents)


def _check_forward(i: int, f: ForwardRecord, lay: Layout, n: int) -> None:
    path = f"trace.forwards[{i}]"
    most = lay.forward_most(f.kind)
    if f.index != i:
        _fail(f"{path}.index", f"{f.index}; must be its position in the list ({i})")
    if not 1 <= f.input_len <= most or f.query_tokens > most:
        _fail(path, f"input_len {f.input_len}, query_tokens {f.query_tokens}: a {f.kind} forward reads 1 to {most}")
    if f.cache_len > lay.total or f.nfe_after > n or f.block > lay.total or f.step > lay.max_steps:
        _fail(path, f"cache_len {f.cache_len}, nfe_after {f.nfe_after}, block {f.block}, step {f.step}: beyond "
              f"the run (total_length {lay.total}, {n} forwards)")


def _check_step(i: int, s: StepRecord, lay: Layout, n_forwards: int, vocab: int, detailed: bool) -> None:
    """One step's fields against its region of the sequence; `detailed` False: a lean trace, whose verifications
    record no rows (so the accepted prefix is bounded by the region, not indexed into the rows)."""
    path = f"trace.steps[{i}]"
    lo, hi = _step_region(path, s, lay)
    if s.index != i:
        _fail(f"{path}.index", f"{s.index}; must be its position in the list ({i})")
    if lo < lay.first or hi > lay.total:
        _fail(f"{path}.block", f"{s.block} lies outside the sequence [{lay.first}, {lay.total})")
    inside = f"inside block {s.block} = [{lo}, {hi})" if not lay.pipeline else f"inside the blocks in flight [{lo}, {hi})"
    if not lo <= s.window[0] < s.window[1] <= hi:
        _fail(f"{path}.window", f"{s.window} must be [start, end) {inside}")
    if not (lo <= s.span[0] <= hi and 0 <= s.span[1] <= hi - s.span[0]):
        _fail(f"{path}.span", f"{s.span} must be [start, length] {inside}")
    width = hi - lo  # the block (the blocks in flight, for the pipeline)
    if not -1 <= s.step <= lay.max_steps or not 0 <= s.fallback_k <= lay.block:
        _fail(path, f"step {s.step}, fallback_k {s.fallback_k}: beyond the run")
    if len(s.forwards) > FORWARDS_PER_STEP or any(f >= n_forwards for f in s.forwards):
        _fail(f"{path}.forwards", f"{s.forwards} must be at most {FORWARDS_PER_STEP} indices below {n_forwards}")
    rows = s.verification.positions if s.verification else []
    for name, positions in (("masks_before", s.masks_before), ("drafts", [d.position for d in s.drafts]),
                            ("verification.positions", [r.position for r in rows]),
                            ("commits", [c.position for c in s.commits])):
        bottom = max(lo, lay.prompt) if name == "commits" else lo  # a commit never overwrites the prompt
        if len(positions) > width or any(not bottom <= p < hi for p in positions):
            _fail(f"{path}.{name}", f"at most {width} positions, each in [{bottom}, {hi}) (block {s.block})")
    if any(c.token >= vocab for c in s.commits):
        _fail(f"{path}.commits", f"a token id outside the vocabulary [0, {vocab})")
    if s.edits:
        _check_edits(path, s, lay, max(lo, lay.prompt), hi, vocab)
    if s.in_flight or s.events:
        _check_in_flight(path, s, lay, lo, hi)
    pi = s.policy_inputs
    if pi is not None and max(pi.span_len, len(pi.alphas), pi.n_hi, pi.window_len) > width:
        _fail(f"{path}.policy_inputs", f"span_len, alphas, n_hi and window_len are at most {width} (the window)")
    c = pi.costs if pi is not None else None
    if c is not None and (max(c.draft_queries, c.skip_tokens, c.min_tokens, c.sure_prefix) > lay.block
                          or c.verify_queries > 2 * lay.block):
        _fail(f"{path}.policy_inputs.costs", f"draft_queries, skip_tokens, min_tokens and sure_prefix are at most "
              f"B = {lay.block}, verify_queries at most 2B")
    v = s.verification
    n = len(rows) if detailed else width
    if v is not None and (v.accepted_len > n or (v.first_reject is not None and v.first_reject >= n)):
        what = f"the {n} verified positions" if detailed else f"the {n} positions of the step's region"
        _fail(f"{path}.verification", f"accepted_len {v.accepted_len} and first_reject {v.first_reject} must index "
              f"{what}")


def _step_region(path: str, s: StepRecord, lay: Layout) -> tuple[int, int]:
    """Where a step's positions may lie: its block, or for the pipeline every block from its own (the first in
    flight) to the window's end."""
    lo, hi = lay.extent(s.block)
    if not lay.pipeline:
        return lo, hi
    end = s.window[1] if len(s.window) == 2 else hi
    if not (s.block >= 1 and lo <= end <= lay.total and (end - lo) % lay.block == 0):
        _fail(f"{path}.window", f"{s.window}: a pipeline step spans whole blocks from its block {s.block} "
              f"(starting at {lo}) to at most {lay.total}")
    return lo, max(hi, end)


def _check_in_flight(path: str, s: StepRecord, lay: Layout, lo: int, hi: int) -> None:
    """Pipeline rows: each block in flight lies in the step's region, has at most B masks and decodes at most
    those; events name blocks of the run."""
    if not lay.pipeline:
        _fail(f"{path}.in_flight", "only the pipeline loop (config loop='pipeline') records blocks in flight")
    first, last = lay.index_at(lo), lay.index_at(hi - 1)
    for row in s.in_flight:
        if not (first <= row.block <= last and row.decoded <= row.masks <= lay.block):
            _fail(f"{path}.in_flight", f"block {row.block}: masks {row.masks}, decoded {row.decoded}; blocks "
                  f"{first}..{last} in flight, each with at most {lay.block} masks")
    if len({r.block for r in s.in_flight}) < len(s.in_flight):
        _fail(f"{path}.in_flight", "each block at most once")
    for e in s.events:
        if not 1 <= e.block <= lay.max_blocks:
            _fail(f"{path}.events", f"block {e.block}: the run has blocks 1..{lay.max_blocks}")


def _check_lifecycle(t: TraceParts) -> None:
    """Pipeline: every block's events happen once each, in lifecycle order (added, complete, finished, cached;
    `complete` may come later than `finished`, never before `added`), and a step only touches added blocks."""
    seen: dict[int, set[str]] = {}
    for i, s in enumerate(t.steps):
        for e in s.events:
            had = seen.setdefault(e.block, set())
            late = e.event != "added" and "added" not in had
            if e.event in had or late or (e.event == "cached" and "finished" not in had):
                _fail(f"trace.steps[{i}].events", f"block {e.block} {e.event}: each event once, after the block "
                      f"was added{' and finished' if e.event == 'cached' else ''}")
            had.add(e.event)
        for row in s.in_flight:
            if "added" not in seen.get(row.block, set()):
                _fail(f"trace.steps[{i}].in_flight", f"block {row.block} is in flight before it was added")


def _check_edits(path: str, s: StepRecord, lay: Layout, lo: int, hi: int, vocab: int) -> None:
    """Rule E (docs/editing.md): an edit replaces a decoded, non-prompt token of the step's block by a different
    one whose draft probability is above tau_edit; a position is edited at most once per step, never also filled."""
    if lay.editing is None:
        _fail(f"{path}.edits", "only the editing loop with an edit threshold (config loop='editing', "
              "editing_threshold set) records edits")
    at = [e.position for e in s.edits]
    if len(at) > lay.block or any(not lo <= p < hi for p in at):
        _fail(f"{path}.edits", f"at most {lay.block} positions, each a generated position in [{lo}, {hi}) "
              f"(block {s.block})")
    if len(set(at)) < len(at) or set(at) & set(s.masks_before) or set(at) & {c.position for c in s.commits}:
        _fail(f"{path}.edits", "each position once, at a position decoded before the step (not among "
              "masks_before, not filled by a commit of the same step)")
    for e in s.edits:
        if max(e.old, e.new) >= vocab or e.old == e.new or not e.p > lay.editing:
            _fail(f"{path}.edits", f"position {e.position}: old {e.old} -> new {e.new} at p {e.p:.3g} must be two "
                  f"different token ids below {vocab}, with p above editing_threshold {lay.editing:g}")
