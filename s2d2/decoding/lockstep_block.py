"""The block loop as one step over every live sequence of a batch: the batch-first form of decoder.py's
`block_loop` for the diffusion baselines and S2D2, on either family.

Each live row is in one phase per step, and each phase is one forward: the prefill (the prompt's full blocks), a draft
step of its current window, an S2D2 step's verifier (2L, lockstep_verify.py; causal on a right-shifted model,
lockstep_shifted.py), the block's commit, or (fused commits) a block's first draft storing the last block's tail.
Between steps a row's blocks open, move from window to window and end as block_state.py says. The engine (lockstep.py)
runs all rows' forwards together, whatever their phases; then the draft rows' distributions and draws are taken over all
of them at once (rows of one config share `token_distribution` and, greedy, one max; sampled, each row draws from its
own generator); the baseline rows' values are read in one read, an S2D2 row is routed by its own policy (step.py
`route`) and, if it verifies, its verifier joins the next step's forward. What a step decodes and records is batch 1's
own code, applied to each row's own `StepContext`: step.py's `plan_step`, `skip_step`, `step_record`, verify_branch.py's
`verify_2l_inputs` and `verify_outcome`, `block_masks`, `block_windows`, `stopped_in`, `block_plan`; the order of phases
is `block_loop`'s (prefill, per window the steps until it has no mask, the commit, the stop rule and the progress check;
on a right-shifted model also the AR seeds and the mid-block stop rule, lockstep_shifted.py). So in float64 each
sequence's trace is its `generate` trace apart from wall times.

Covered (`covers`), on both families: method "diffusion" with any remasking rule, with or without sub-blocks,
high-confidence extras (`always_check_high_conf`), KV reuse and fused commits (the static, dynamic and sequential rules
run once over all of a config's draft rows; entropy-bounded and the extras, which have no batch form, run per row
inside the same read: `_rules`); method "s2d2" with any routing policy (`cost_aware` reads the cost table
frozen for the batch, batched.py), any estimator, acceptance mode, remasking rule and extras, with or without
sub-blocks, with or without the trimmed verifier (`trim_verify`: its forward is built per row, lockstep_verify.py
`lone_verify_request`), with or without adaptive block sizes (`adaptive_block`: each row keeps its own rule,
adaptive_blocks.py), with or without KV reuse (`kv_reuse`: batch 1's requests over the uncached positions, step.py
`draft_request`, verify_branch.py, blocks.py `commit_request`; a block cached whole ends with no commit forward,
block_state.py `commitless_ends`) and with or without fused commits (`fused_commit`: blocks.py `fused_request`, the
block's first draft drafting from that forward, block_state.py `carry_fused`; right-shifted, the forward's tail logit
seeds the block and the stop rule reads that seed first). So the whole block loop runs here; the editing loop runs in
lockstep_editing.py, and the D2F pipeline in lockstep_pipeline.py."""
from __future__ import annotations

from typing import Any, Optional

import torch

from ..config import DecodeConfig
from ..models.base import ForwardRequest
from ..models.masks import draft_query
from ..trace import BlockRecord
from .block_state import BlockState, cancel, carry_fused, commitless_ends, end_block, open_block, result, start, stepped
from .blocks import commit_request, fused_request, prefill_request
from .detail_rows import draft_detail
from .draft_plans import plan_drafts
from .draft_reads import draft_bulk
from .lockstep_rows import Asked, Row, padded_runs, read_rows
from .lockstep_shifted import causal_verify_requests, seeded_prefill, stopped_before
from .lockstep_verify import (drafted, lone_verify_request, read_pending, routed, shared_drafts, shared_read, tested,
                              verified, verify_requests)
from .route_summary import summary_parts
from .sampling import entropy
from .selection import skip_inputs, skip_picks
from .step import Routed, always_verifies, draft_request, step_record
from .token_writes import TokenWrites
from .transfers import Bulk

__all__ = ["covers", "start", "requests", "advance", "cancel", "result"]  # the loop's interface (lockstep.py)

RULES = ("low_confidence_static", "low_confidence_dynamic", "sequential")


def covers(cfg: DecodeConfig, model: Any) -> bool:
    """Whether a config runs this loop's covered part (module docstring) on this model."""
    return cfg.loop == "block" and cfg.method in ("s2d2", "diffusion")


def requests(model: Any, rows: list[Row]) -> list[Asked]:
    """Each row's one forward of this step, by its phase (blocks.py's and step.py's shapes exactly); the 2L
    verify rows' built together (lockstep_verify.py `verify_requests`)."""
    verifying = [j for j, r in enumerate(rows) if r.state.phase == "verify"]
    lone = {j for j in verifying if rows[j].prep.cfg.trim_verify or rows[j].prep.cfg.kv_reuse}  # (a set: O(1) tests)
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
        return Asked("prefill", -1, -1, prefill_request(ctx, st.plan.first_start))
    blk = st.blk
    assert blk is not None
    if st.phase == "fused":  # fused_commit: the previous block's tail stored by this block's first draft forward
        st.fused = fused_request(ctx, blk)
        return Asked("commit+draft", blk.index, 0, st.fused)
    if st.phase == "commit":
        if ctx.cached:  # kv_reuse: only the uncached tail (never empty here: block_state.py `commitless_ends`)
            return Asked("commit", blk.index, -1, commit_request(ctx, blk))
        return Asked("commit", blk.index, -1, ForwardRequest(ctx.cache, st.ids, st.positions,
                                                             "causal" if cfg.cache_ver else "full", blk.length, 1))
    return Asked("draft", blk.index, st.step, _draft_request(row, st, blk))


def _draft_request(row: Row, st: BlockState, blk: BlockRecord) -> ForwardRequest:
    """run_step's draft forward, from its plan (draft_plans.py `plan_drafts`): with nothing cached, step.py
    `draft_forward`'s arguments over the whole block reading the plan's rows; with kv_reuse, `draft_request` itself."""
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
    logits = carry_fused(rows, phases, logits)
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
            stepped(r, verified(r, g, writes))
        elif phase == "draft":
            record = routed(r, g, writes)
            if record is not None:
                stepped(r, record)
    writes.flush()
    for r, phase, lg in zip(rows, phases, logits):  # the phase whose forward this step ran
        if phase == "prefill":
            seeded_prefill(r, lg)
            r.state.kept.mark()
            open_block(r, r.state.plan.first_start, r.state.plan.first_start // r.prep.cfg.block_length)
        elif phase == "commit":
            end_block(r, lg)
    for cfg, members in baseline.items():
        _draft_group(model, cfg, members)
    commitless_ends(rows)
    _shifted_stops(rows)


def _shifted_stops(rows: list[Row]) -> None:
    """Before the next step: each right-shifted row about to draft or commit applies its stop rule
    (lockstep_shifted.py `stopped_before`, batch 1's check at the same point), after one shared read of what those
    rows still have on the device (an AR seed, a residual draw): batch 1 reads it there too, alone."""
    due = [r for r in rows if r.finish_reason is None and not r.state.ctx.aligned and r.state.phase != "verify"]
    read_pending(due)
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
    rule, own, width = _rules(cfg, probs, p_all, sizes)
    detail = draft_detail(members[0][0].state.ctx, probs, p_all)
    got = _split(read_rows(model, {"drafts": tokens, **rule, **detail}, 1)[0], sizes, width)
    writes = TokenWrites()
    for (r, _), g, inputs in zip(members, got, own):
        _draft_step(r, g, inputs, writes)
    writes.flush()


def _rules(cfg: DecodeConfig, probs: torch.Tensor, p: torch.Tensor, sizes: list[int]
           ) -> tuple[dict[str, torch.Tensor], list[dict[str, torch.Tensor]], Optional[int]]:
    """The baseline draft rows' remasking rule: the tensors to read (over all rows), each row's own `skip_inputs`
    (what its picks index) and the padded width of "order" (None: the rows' orders one after another).
    The static, dynamic and sequential rules run once over the padded rows (`_shared_skips`, as the S2D2 rows');
    entropy-bounded and the high-confidence extras have no batch form, so each row runs batch 1's `skip_inputs` on
    its own masks (its entropies from its own distributions, as its Draft gives them), still read in one read."""
    shared, rule = _shared_skips(cfg, probs, p, sizes)
    if shared[0] is not None:
        return rule, shared, max(sizes)  # (padded_runs' width)
    own = [skip_inputs(cfg, p_row, lambda q=q: entropy(q)) for p_row, q in zip(p.split(sizes), probs.split(sizes))]
    return {name: (torch.stack if t.dim() == 0 else torch.cat)([o[name] for o in own])
            for name, t in own[0].items()}, own, None


def _shared_skips(cfg: DecodeConfig, probs: torch.Tensor, p: torch.Tensor, sizes: list[int]
                  ) -> tuple[list[Optional[dict[str, torch.Tensor]]], dict[str, torch.Tensor]]:
    """Each draft row's `skip_inputs` (what a skip would decode; for a baseline row, its step's picks), the
    remasking rule run once over the padded rows, and the rule's padded tensors (read once for all rows:
    `draft_bulk`); None for every row, and no tensors, where the rule has no batch form (high-confidence extras,
    entropy-bounded: each row then runs its own). A row's order is its whole padded row (`_row_views`), its count
    its own: the pads sort last and never count (remasking.py `rule_inputs`)."""
    if cfg.remasking not in RULES or cfg.always_check_high_conf:
        return [None] * len(sizes), {}
    rule = skip_inputs(cfg, padded_runs(p, sizes), lambda: entropy(probs))  # (these rules never read the entropy)
    rows = {name: _row_views(t) for name, t in rule.items()}
    return [{name: v[j] for name, v in rows.items()} for j in range(len(sizes))], rule


def _row_views(t: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Each row's part of a padded rule tensor, as views made by one call: [R, width] as row j's whole padded
    order, [R] as row j's 0-d value. A row's order is never cut to its masks here: the pads sort last, and the
    step keeps a whole order with its pick count (selection.py `StepPicks.fallback_n`), so its first picks are
    its own order's; only a device write makes the cut, and a batch-first row writes from its commits."""
    return t.unbind(0)


def _split(flat: dict[str, list[Any]], sizes: list[int], width: Optional[int]) -> list[dict[str, Any]]:
    """The one read's flat values back into each row's `got`, as its own fetch gives it: the rule's padded rows
    ([R, width]: "order"; `width` None: the rows' orders one after another, sliced as values per mask) cut to the
    row's masks, its counts ([R]: "above", "eb_below") as the row's int, `d_stats` ([3, n] over all rows' masks) as
    the row's own [3, n_row] flattened, and every other part (values per mask) sliced by the rows' mask counts."""
    out: list[dict[str, Any]] = [{} for _ in sizes]
    total = sum(sizes)
    for name, values in flat.items():
        at = 0
        for j, n in enumerate(sizes):
            if name == "order" and width is not None:
                out[j][name] = values[j * width : j * width + n]
            elif name in ("above", "eb_below"):
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
    stepped(r, record)


