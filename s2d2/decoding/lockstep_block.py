"""The block loop as one step over every live sequence of a batch: the batch-first form of decoder.py's
`block_loop` for the diffusion baselines and S2D2, on either family.

Each live row is in one phase per step, and each phase is one forward: the prefill (the prompt's full blocks), a draft
step of its current window, an S2D2 step's verifier (2L, lockstep_verify.py; causal on a right-shifted model,
lockstep_shifted.py), or the block's commit. The engine (lockstep.py) runs all rows' forwards together, whatever their
phases; then the draft rows' distributions and draws are taken over all of them at once (rows of one config share
`token_distribution` and, greedy, one max; sampled, each row draws from its own generator); the baseline rows' values
are read in one read, an S2D2 row is routed by its own policy (step.py `route`) and, if it verifies, its verifier joins
the next step's forward. What a step decodes and records is batch 1's own code, applied to each row's own `StepContext`:
step.py's `plan_step`, `skip_step`, `step_record`, verify_branch.py's `verify_2l_inputs` and `verify_outcome`,
`block_masks`, `block_windows`, `stopped_in`, `block_plan`; the order of phases is `block_loop`'s (prefill, per window
the steps until it has no mask, the commit, the stop rule and the progress check; on a right-shifted model also the AR
seeds and the mid-block stop rule, lockstep_shifted.py). So in float64 each sequence's trace is its `generate` trace
apart from wall times.

Covered (`covers`), on both families: method "diffusion" without sub-blocks and with the remasking rules
`low_confidence_static`, `low_confidence_dynamic` and `sequential` (no high-confidence extras: a baseline has
none); method "s2d2" with any routing policy (`cost_aware` reads the cost table frozen for the batch, batched.py),
any estimator, acceptance mode, remasking rule and extras, with or without sub-blocks, with or without the trimmed
verifier (`trim_verify`: its forward is built per row, lockstep_verify.py `lone_verify_request`), with or without
adaptive block sizes (`adaptive_block`: each row keeps its own rule, adaptive_blocks.py), with or without KV
reuse (`kv_reuse`: batch 1's requests over the uncached positions, step.py `draft_request`, verify_branch.py,
blocks.py `commit_request`; a block cached whole ends with no commit forward, `_cached_commits`). Not yet: fused
commits (`fused_commit`, the commit carried into the next block's first draft); those decode on the thread engine.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import torch

from ..config import DecodeConfig
from ..models.base import ForwardRequest
from ..models.masks import block_causal_mask, draft_query
from ..trace import BlockRecord, StepRecord
from ..policies import AdaptiveBlock, make_policy
from .adaptive_blocks import decoded_layout, next_block_length
from .blocks import block_masks, block_windows, commit_request, stopped_in
from .context import Draft, StepContext
from .detail_rows import draft_detail
from .draft_plans import plan_drafts
from .layout import BlockPlan, block_plan
from .lockstep_rows import Asked, Row, read_rows
from .lockstep_shifted import causal_verify_requests, seeded_commit, seeded_prefill, stopped_before
from .result import Kept, LoopResult, number_steps
from .route_summary import summary_parts
from .sampling import entropy
from .lockstep_verify import (drafted, lone_verify_request, routed, shared_drafts, shared_read, tested, verified,
                              verify_requests)
from .selection import skip_inputs, skip_picks
from .token_writes import TokenWrites
from .draft_reads import draft_bulk
from .transfers import Bulk
from .step import Routed, StepPlan, always_verifies, draft_request, step_record, window_has_mask

RULES = ("low_confidence_static", "low_confidence_dynamic", "sequential")


def covers(cfg: DecodeConfig, model: Any) -> bool:
    """Whether a config runs this loop's covered part (module docstring) on this model."""
    if cfg.loop != "block" or cfg.fused_commit or (cfg.kv_reuse and cfg.method != "s2d2"):
        return False
    if cfg.method == "s2d2":
        return True
    return (cfg.method == "diffusion" and cfg.sub_block_length is None and cfg.remasking in RULES
            and not cfg.always_check_high_conf)


@dataclass
class BlockState:
    """A row's block-loop state: batch 1 keeps it in `block_loop`'s locals and its StepContext."""

    ctx: StepContext
    plan: BlockPlan
    kept: Kept
    schedule: list[int]
    phase: str = "prefill"  # "prefill", "draft", "verify" or "commit": what the row's next forward is
    blk: Optional[BlockRecord] = None
    step: int = 0
    windows: list[tuple[int, int]] = field(default_factory=list)  # the block's windows still to decode, in order
    step_plan: Optional[StepPlan] = None  # the step under way (from its draft request to its record)
    read_rows: Optional[torch.Tensor] = None  # ... the rows its draft reads (the masks', one left when shifted)
    rule: Optional[AdaptiveBlock] = None  # adaptive_block: the row's own rule for its next block's length
    first_step: int = 0  # the index of the current block's first step in the row's steps
    draft_keep: int = 0  # kv_reuse: the rows the draft under way keeps in the cache
    verifier: Optional[tuple[str, str, int]] = None  # a verifying row's `verify_kind`, from its routing on
    draft: Optional[Draft] = None  # a verifying row's draft, waiting for its verify forward
    routed: Optional[Routed] = None  # ... and what its route read and decided
    waiting: Any = None  # between a step's device work and its shared read: (skip inputs, verifies) or a Tested
    ids: Optional[torch.Tensor] = None  # the current block's ids and positions: views of the sequence, taken once
    positions: Optional[torch.Tensor] = None  # per block (a view sees every write; its requests reuse them)


def start(model: Any, row: Row) -> None:
    """Lay out the row's sequence and open its first block (after the prefill, when the prompt fills a block)."""
    cfg, P = row.prep.cfg, row.prompt_len
    plan = block_plan(cfg, P, model.spec.alignment == "shifted")
    x = torch.full((plan.total,), model.spec.mask_id, dtype=torch.long, device=model.device)
    x[:P] = torch.tensor(row.prep.ids, dtype=torch.long, device=model.device)
    policy = make_policy(cfg) if cfg.method == "s2d2" else None
    ctx = StepContext(model, cfg, row.rec, row.generator, x, row.cache, policy, P)
    schedule = cfg.transfer_schedule() if not cfg.adaptive_block else [1]  # (decoder.py `_decode_block`'s)
    row.state = BlockState(ctx, plan, Kept(row.rec, x, row.blocks, row.steps), schedule,
                           rule=AdaptiveBlock(cfg) if cfg.adaptive_block else None)
    if plan.first_start == 0:  # nothing to prefill
        _open_block(row, 0, 0)


def requests(model: Any, rows: list[Row]) -> list[Asked]:
    """Each row's one forward of this step, by its phase (blocks.py's and step.py's shapes exactly); the 2L
    verify rows' built together (lockstep_verify.py `verify_requests`)."""
    verifying = [j for j, r in enumerate(rows) if r.state.phase == "verify"]
    lone = [j for j in verifying if rows[j].prep.cfg.trim_verify or rows[j].prep.cfg.kv_reuse]
    two_l = [j for j in verifying if rows[j].state.ctx.aligned and j not in lone]
    causal = [j for j in verifying if not rows[j].state.ctx.aligned and j not in lone]
    built = dict(zip(two_l, verify_requests([rows[j] for j in two_l])))  # the 2L rows' ids built together
    built.update(zip(causal, causal_verify_requests([rows[j] for j in causal])))  # so the causal rows' per end
    built.update((j, lone_verify_request(rows[j])) for j in lone)
    plan_drafts([r for r in rows if r.state.phase == "draft"])
    return [Asked(r.state.verifier[0], r.state.blk.index, r.state.step, built[j]) if j in built else _request(r)
            for j, r in enumerate(rows)]


def _request(row: Row) -> Asked:
    st: BlockState = row.state
    ctx, cfg = st.ctx, st.ctx.cfg
    if st.phase == "prefill":
        n = st.plan.first_start
        attention = "causal" if cfg.cache_ver else block_causal_mask(n, cfg.block_length, 0, ctx.x.device)
        return Asked("prefill", -1, -1, ForwardRequest(ctx.cache, ctx.x[:n], ctx.index[:n], attention, n, 1))
    blk = st.blk
    assert blk is not None
    if st.phase == "commit":
        if ctx.cached:  # kv_reuse: only the uncached tail (never empty here: `_cached_commits`)
            return Asked("commit", blk.index, -1, commit_request(ctx, blk))
        return Asked("commit", blk.index, -1, ForwardRequest(ctx.cache, st.ids, st.positions,
                                                             "causal" if cfg.cache_ver else "full", blk.length, 1))
    return Asked("draft", blk.index, st.step, _draft_request(row, st, blk))


def _draft_request(row: Row, st: BlockState, blk: BlockRecord) -> ForwardRequest:
    """run_step's draft forward (step.py `draft_forward` with nothing cached), from its plan (draft_plans.py
    `plan_drafts`)."""
    plan = st.step_plan
    if st.ctx.cfg.kv_reuse:  # cached positions are not queried, the decoded prefix is kept: batch 1's request
        request = draft_request(st.ctx, st.ids, st.positions, plan.masks[0], plan.mask_idx)
        st.draft_keep = request.keep  # (ctx.cached grows by it once the forward ran: `advance`)
        return request
    attention = draft_query(blk.length, plan.masks[0], st.ctx.x.device) if st.ctx.cfg.draft_ver else "full"
    return ForwardRequest(st.ctx.cache, st.ids, st.positions, attention, 0, None, st.read_rows)


def advance(model: Any, rows: list[Row], logits: list[torch.Tensor]) -> None:
    """After the step's forwards: the draft rows' shared distributions and draws, the S2D2 rows' device work
    (routing inputs, acceptance tests) and ONE read for all of them (with what a commit row still has deferred),
    then each row's step, its record and its next phase; the baselines' draft rows read in one read of their own."""
    readers: list[tuple[Row, str]] = []
    wanted: list[dict[str, Any]] = []
    baseline: dict[DecodeConfig, list[tuple[Row, torch.Tensor]]] = {}
    s2d2_drafts: dict[DecodeConfig, list[tuple[Row, torch.Tensor]]] = {}
    phases = [r.state.phase for r in rows]
    verifying = [j for j, phase in enumerate(phases) if phase == "verify"]
    readers += [(rows[j], "verify") for j in verifying]  # the shared read's first readers (`tested`'s bulk)
    own, bulk = tested([rows[j] for j in verifying], [logits[j] for j in verifying])
    wanted += own
    for r, lg, phase in zip(rows, logits, phases):
        if phase == "commit" and r.state.ctx.reads.pending:  # its stop check reads the deferred values
            readers.append((r, phase))
            wanted.append({})
        elif phase == "draft":
            r.state.ctx.cached += r.state.draft_keep  # kv_reuse: the draft's kept prefix (step.py `draft_forward`)
            r.state.draft_keep = 0
            (s2d2_drafts if r.prep.cfg.method == "s2d2" else baseline).setdefault(r.prep.cfg, []).append((r, lg))
    for cfg, members in s2d2_drafts.items():
        bulk += _s2d2_drafts(model, cfg, members, readers, wanted)
    got = shared_read([r for r, _ in readers], wanted, bulk)
    writes = TokenWrites()  # the S2D2 rows' host-known tokens, written together (token_writes.py)
    for (r, phase), g in zip(readers, got):
        if phase == "verify":
            _stepped(r, verified(r, g, writes))
        elif phase == "draft":
            record = routed(r, g, writes)
            if record is not None:
                _stepped(r, record)
    writes.flush()
    for r, phase, lg in zip(rows, phases, logits):  # the phase whose forward this step ran
        if phase == "prefill":
            seeded_prefill(r, lg)
            r.state.kept.mark()
            _open_block(r, r.state.plan.first_start, r.state.plan.first_start // r.prep.cfg.block_length)
        elif phase == "commit":
            _end_block(r, lg)
    for cfg, members in baseline.items():
        _draft_group(model, cfg, members)
    _cached_commits(rows)
    _shifted_stops(rows)


def _cached_commits(rows: list[Row]) -> None:
    """kv_reuse: a row whose block's last verify left every position cached has no commit to run (blocks.py
    `commit_block` makes no forward): its block ends now, as batch 1's does, after one shared read of what those
    rows still have on the device (a residual draw; batch 1 reads it there too, alone)."""
    done = [r for r in rows if r.finish_reason is None and r.state.phase == "commit"
            and r.state.ctx.cached >= r.state.blk.length]  # (commit_request would be None)
    pending = [r for r in done if r.state.ctx.reads.pending]
    if pending:
        shared_read(pending, [{} for _ in pending])
    for r in done:
        _end_block(r, None)


def _shifted_stops(rows: list[Row]) -> None:
    """Before the next step: each right-shifted row about to draft or commit applies its stop rule
    (lockstep_shifted.py `stopped_before`, batch 1's check at the same point), after one shared read of what those
    rows still have on the device (an AR seed, a residual draw): batch 1 reads it there too, alone."""
    due = [r for r in rows if r.finish_reason is None and not r.state.ctx.aligned and r.state.phase != "verify"]
    pending = [r for r in due if r.state.ctx.reads.pending]
    if pending:
        shared_read(pending, [{} for _ in pending])
    for r in due:
        stopped_before(r)


def _s2d2_drafts(model: Any, cfg: DecodeConfig, members: list[tuple[Row, torch.Tensor]],
                 readers: list[tuple[Row, str]], wanted: list[dict[str, Any]]) -> list[Bulk]:
    """The S2D2 draft rows of one config after their shared forward: one distribution and draw, the routing
    summary and (when a skip is possible) the skip rule over all of them; each row's own device work and read are
    appended to `readers` and `wanted`; returns the parts read once for all of them (`draft_bulk`)."""
    group, sizes = [r for r, _ in members], [int(lg.shape[0]) for _, lg in members]
    flat = shared_drafts(model, cfg, group, [lg for _, lg in members])
    parts = summary_parts(cfg, flat[0], flat[2], sizes, [r.state.step_plan.span_len for r in group],
                          group[0].state.ctx.rec.costs is not None)
    verifies = always_verifies(group[0].state.ctx)  # one config: one policy kind, one answer
    skips, rule = ([None] * len(group), {}) if verifies else _shared_skips(cfg, flat[0], flat[2], sizes)
    # a row without a batch form of its skip rule runs skip_inputs itself, which reads N_hi on the device
    n_hi = parts.n_hi.unbind(0) if any(skip is None for skip in skips) and not verifies else None
    bulk = draft_bulk(len(readers), sizes, flat[1], parts, rule)
    served = {b.name for b in bulk}
    for k, (r, skip, *drawn) in enumerate(zip(group, skips, *(t.split(sizes) for t in flat))):
        readers.append((r, "draft"))
        summary = {"n_hi": n_hi[k]} if n_hi is not None and skip is None else {}
        wanted.append(drafted(r, *drawn, summary=summary, skip=skip, served=served))
    return bulk


def _draft_group(model: Any, cfg: DecodeConfig, members: list[tuple[Row, torch.Tensor]]) -> None:
    """The draft steps of rows sharing one config: one distribution and draw, one read, then each row's step."""
    sizes = [int(lg.shape[0]) for _, lg in members]
    probs, tokens, p_all = shared_drafts(model, cfg, [r for r, _ in members], [lg for _, lg in members])
    padded = _padded(p_all, sizes)  # the remasking rule over every row at once (remasking.rule_inputs' batch form)
    rule = skip_inputs(cfg, padded, lambda: entropy(probs))
    detail = draft_detail(members[0][0].state.ctx, probs, p_all)
    got = _split(read_rows(model, {"drafts": tokens, **rule, **detail}, 1)[0], sizes, int(padded.shape[1]))
    views = {k: _row_views(v) for k, v in rule.items() if v.dim() == 2}  # each row's order, one call
    writes = TokenWrites()
    for j, ((r, _), g) in enumerate(zip(members, got)):
        _draft_step(r, g, {k: v[j] for k, v in views.items()}, writes)
    writes.flush()


def _shared_skips(cfg: DecodeConfig, probs: torch.Tensor, p: torch.Tensor, sizes: list[int]
                  ) -> tuple[list[Optional[dict[str, torch.Tensor]]], dict[str, torch.Tensor]]:
    """Each S2D2 draft row's `skip_inputs` (what a skip would decode), the remasking rule run once over the padded
    rows as the baselines' is (`_draft_group`), and the rule's padded tensors (read once for all rows:
    `draft_bulk`); None for every row, and no tensors, where the rule has no batch form (high-confidence extras,
    entropy-bounded: each row then runs its own). A row's order is its whole padded row (`_row_views`), its count
    its own: the pads sort last and never count (remasking.py `rule_inputs`)."""
    if cfg.remasking not in RULES or cfg.always_check_high_conf:
        return [None] * len(sizes), {}
    rule = skip_inputs(cfg, _padded(p, sizes), lambda: entropy(probs))  # (these rules never read the entropy)
    rows = {name: _row_views(t) for name, t in rule.items()}
    return [{name: v[j] for name, v in rows.items()} for j in range(len(sizes))], rule


def _row_views(t: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Each row's part of a padded rule tensor, as views made by one call: [R, width] as row j's whole padded
    order, [R] as row j's 0-d value. A row's order is never cut to its masks here: the pads sort last, and the
    step keeps a whole order with its pick count (selection.py `StepPicks.fallback_n`), so its first picks are
    its own order's; only a device write makes the cut, and a batch-first row writes from its commits."""
    return t.unbind(0)


def _padded(values: torch.Tensor, sizes: list[int]) -> torch.Tensor:
    """[R, max size] with row j holding the j-th run of `values` (runs of `sizes`), padded with -1."""
    device = values.device
    rows = torch.repeat_interleave(torch.arange(len(sizes), device=device), torch.tensor(sizes, device=device))
    starts = torch.tensor([0] + sizes[:-1], device=device).cumsum(0)
    cols = torch.arange(values.shape[0], device=device) - starts[rows]
    out = torch.full((len(sizes), max(sizes)), -1.0, dtype=values.dtype, device=device)
    out[rows, cols] = values
    return out


def _split(flat: dict[str, list[Any]], sizes: list[int], width: int) -> list[dict[str, Any]]:
    """The one read's flat values back into each row's `got`, as its own fetch gives it: the rule's padded rows
    ([R, width]: "order") cut to the row's masks, its counts ([R]: "above") as the row's int, `d_stats` ([3, n]
    over all rows' masks) as the row's own [3, n_row] flattened, and every other part (values per mask) sliced by
    the rows' mask counts."""
    out: list[dict[str, Any]] = [{} for _ in sizes]
    total = sum(sizes)
    for name, values in flat.items():
        at = 0
        for j, n in enumerate(sizes):
            if name == "order":
                out[j][name] = values[j * width : j * width + n]
            elif name == "above":
                out[j][name] = values[j]
            elif name == "d_stats":
                out[j][name] = [v for k in range(3) for v in values[k * total + at : k * total + at + n]]
            else:
                per = len(values) // total
                out[j][name] = values[at * per : (at + n) * per]
            at += n
    return out


def _draft_step(r: Row, got: dict[str, Any], skip: dict[str, torch.Tensor], writes: TokenWrites) -> None:
    """run_step's baseline branch, from the row's values of the shared read: the remasking rule's picks (`skip_step`
    without a policy is exactly selection.py `skip_picks`, batch 1's own rule) and `step_record`; its tokens join
    `writes` (the caller flushes them with the other rows'), so no draft on the device is needed here."""
    st: BlockState = r.state
    ctx, plan = st.ctx, st.step_plan
    assert plan is not None
    picks = skip_picks(ctx.cfg, got, len(plan.masks), plan.min_k, skip)
    record = step_record(ctx, plan, Routed(got, skip, None, None, None, False), picks, None, None)
    writes.add(st.ids, plan.start, record.commits)
    _stepped(r, record)


def _stepped(r: Row, record: StepRecord) -> None:
    """A step is recorded: the next one, in this window, the next window with a mask, or the block's commit."""
    st: BlockState = r.state
    r.steps.append(record)
    st.step += 1
    st.step_plan = None
    _next_window(st)


def _next_window(st: BlockState) -> None:
    """Drop the windows without a mask (block_loop's `while any(...)` per window); none left: commit."""
    start = st.blk.start if st.blk is not None else 0
    while st.windows and not window_has_mask(st.ctx.masks, st.windows[0][0] - start, st.windows[0][1] - start):
        st.windows.pop(0)
    st.phase = "draft" if st.windows else "commit"


def _open_block(r: Row, start: int, index: int, length: Optional[int] = None, why: str = "") -> None:
    """decoder.py's block start (`length`: an adaptive block's, else cfg's): its record, its masks; then its draft
    steps (or, with no mask, its commit)."""
    st: BlockState = r.state
    ctx, length = st.ctx, length or r.prep.cfg.block_length
    blk = BlockRecord(index, start, length, max(0, min(r.prompt_len - start, length)), why)
    r.blocks.append(blk)
    ctx.block_length, ctx.cached = blk.length, 0
    ctx.masks = block_masks(ctx, blk)
    st.blk, st.step, st.windows, st.first_step = blk, 0, block_windows(ctx.cfg, blk), len(r.steps)
    st.ids, st.positions = ctx.x[start : start + length], ctx.index[start : start + length]
    _next_window(st)


def _end_block(r: Row, logits: Optional[torch.Tensor]) -> None:
    """After the commit forward (`logits`: its last row's; None when kv_reuse had cached the whole block): decoder.py's
    stop rule, a right-shifted row's AR seed of the next block, the progress check and the next block (or the
    end)."""
    st: BlockState = r.state
    blk = st.blk
    assert blk is not None
    end = blk.start + blk.length
    st.ctx.cached = 0
    finish = "stop_token" if stopped_in(st.ctx, r.prompt_len, end) is not None else None
    if finish is None:
        seeded_commit(r, logits, end, blk.index + 1)
        finish = r.check(number_steps(r.steps))
    if finish is not None:
        r.finish(finish, number_steps(r.steps))
        return
    st.kept.mark()
    if end < st.plan.end:
        length, why = next_block_length(st.rule, r.prep.cfg, blk, r.steps[st.first_step :], end)
        _open_block(r, end, blk.index + 1, length, why)
    else:
        r.finish("length", number_steps(r.steps))


def cancel(row: Row) -> None:
    """The row's own forward raised StopDecoding: back to its last complete block, as block_loop's rollback."""
    blocks, steps = row.state.kept.restore(row.state.ctx.mask_id)
    row.blocks, row.finish_reason, row.steps = blocks, "cancelled", steps


def result(model: Any, row: Row) -> LoopResult:
    """The row's LoopResult as block_loop returns it."""
    assert row.finish_reason is not None
    row.state.ctx.reads.flush()
    return LoopResult(decoded_layout(row.state.ctx.x, row.prep.cfg, row.blocks), row.blocks, row.steps,
                      row.finish_reason)
