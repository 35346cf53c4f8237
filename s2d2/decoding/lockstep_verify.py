"""S2D2's routing and 2L verifier in the batch-first block loop (lockstep_block.py): the draft rows of S2D2 configs
routed together after their shared forward, and a verifying row's second forward joining the next shared one.

A batch-1 step is draft forward -> read -> route -> (verify forward -> read) -> picks and record (step.py
`run_step`). Here the verify forward of a row that decides to verify is its NEXT step's forward, so one padded
forward carries the draft rows, the 2L verify rows and the commit rows of different sequences together. Between the
forwards each row runs step.py's and verify_branch.py's own parts (`plan_step`, `route_inputs`, `routed_from`,
`skip_step`, `acceptance_test`, `tested_picks`, `step_record`): one copy of every rule, so in float64 a
sequence's trace is its `generate` trace apart from wall times. The tensor rules run once over all rows that
share a config and a span length (or block length): the draft distribution and greedy draw, the routing summary
(route_summary.py), the 2L verifier's ids (verify_branch.py `verify_2l_rows`), the verifier's distribution
(`token_distribution`, as `verifier_probs` takes it) and the acceptance test (acceptance.py `acceptance_rows`);
batch 1 runs the same rule functions on its one span. What the rows read back before routing and after their
test is read once as those tensors (transfers.py `Bulk`: draft_reads.py `draft_bulk`, `tested`), each row
taking its slice. A sampled draw, the acceptance test's uniforms and the residual
draw come from the row's own generator, in its batch-1 order (draft, then test, then residual).
"""
from __future__ import annotations

from typing import Any, Collection, Optional, Sequence

import torch

from ..config import DecodeConfig
from ..models.base import ForwardRequest
from ..trace import StepRecord
from .context import Draft
from .lockstep_rows import Row
from .sampling import draw_with_probs, token_distribution
from .step import route_inputs, routed_from, skip_step, step_record
from .token_writes import TokenWrites
from .transfers import Bulk, HostReads, fetch_many
from .acceptance import acceptance_each, acceptance_rows
from .kv import remember_verified
from ..models.masks import verify_2l_query
from .verify_branch import (acceptance_test, causal_verify_request, tested_picks, trimmed_verify_request,
                            verifier_extent, verify_2l_inputs, verify_2l_rows)


def shared_drafts(model: Any, cfg: DecodeConfig, rows: list[Row],
                  logits: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The draft rows of one config: (distribution, drafts, p) over all their masks, rows one after another: one
    `token_distribution`, greedy one max, sampled each row's draw from its own generator (the call its batch-1
    step makes). Also the baselines' (lockstep_block.py)."""
    probs = token_distribution(torch.cat(logits), cfg, model.spec.mask_id, owned=True)
    if not cfg.do_sample:
        tokens, p_all = draw_with_probs(probs, cfg, rows[0].generator)
        return probs, tokens, p_all
    sizes = [int(lg.shape[0]) for lg in logits]
    parts = [draw_with_probs(p, cfg, r.state.ctx.generator) for r, p in zip(rows, probs.split(sizes))]
    return probs, torch.cat([t for t, _ in parts]), torch.cat([p for _, p in parts])


def drafted(row: Row, probs: torch.Tensor, tokens: torch.Tensor, p: torch.Tensor,
            summary: Optional[dict[str, torch.Tensor]] = None,
            skip: Optional[dict[str, torch.Tensor]] = None, served: Collection[str] = ()) -> dict[str, Any]:
    """A draft row after its shared forward and draw: its step's device work before routing (step.py
    `route_inputs`, with the row's `policy_summary` and, where given, its `skip_inputs` taken over all the step's
    draft rows of its config); returns what it reads of its own (`served`: the names the step's shared read
    brings it from parts over all rows, draft_reads.py `draft_bulk`)."""
    st = row.state
    ctx, plan = st.ctx, st.step_plan
    st.draft = Draft(plan.mask_idx, plan.run, st.positions, probs, tokens, p)
    wanted, skip, verifies = route_inputs(ctx, plan, st.draft, summary, skip)
    st.waiting = (skip, verifies)
    return {name: t for name, t in wanted.items() if name not in served} if served else wanted


def routed(row: Row, got: dict[str, Any], writes: TokenWrites) -> Optional[StepRecord]:
    """A draft row after the shared read: routed by its own policy; a skip decodes now (the step's record; its
    tokens join `writes`, which the caller flushes), a verify waits for its verifier forward, the row's next
    (None)."""
    st = row.state
    ctx, plan, draft = st.ctx, st.step_plan, st.draft
    skip, verifies = st.waiting
    st.waiting = None
    decided = routed_from(ctx, plan, got, skip, verifies)
    if decided.verify:
        st.routed, st.phase, st.verifier = decided, "verify", verify_kind(row)
        return None
    st.draft = None
    record = step_record(ctx, plan, decided, skip_step(ctx, plan, draft, decided, write=False), None, None)
    writes.add(st.ids, plan.start, record.commits)
    return record


def verify_requests(rows: list[Row]) -> list[ForwardRequest]:
    """The rows' 2L verifier forwards (verify_branch.py's arguments exactly) over their draft-filled blocks: the
    ids and positions of all rows of one block length built at once (verify_branch.py `verify_2l_rows`; nothing
    of a batch-first block is cached, so every row queries its whole block)."""
    out: list[Optional[ForwardRequest]] = [None] * len(rows)
    by_length: dict[int, list[int]] = {}
    for j, r in enumerate(rows):
        by_length.setdefault(r.state.ctx.B, []).append(j)
    for B, members in by_length.items():
        group = [rows[j] for j in members]
        ctxs = [r.state.ctx for r in group]
        blocks = torch.stack([r.state.ids for r in group])
        positions = torch.stack([r.state.draft.positions for r in group])
        ids, pos = verify_2l_rows(ctxs[0].mask_id, blocks, positions, [r.state.step_plan.mask_idx for r in group],
                                  [r.state.draft.tokens for r in group])
        query = verify_2l_query(B, ids.device)
        for j, r, c, row_ids, row_pos in zip(members, group, ctxs, ids.unbind(0), pos.unbind(0)):
            plan = r.state.step_plan
            out[j] = ForwardRequest(c.cache, row_ids, row_pos, query, 0, B, _head(plan.mask_idx, plan.span_len))
    return out  # type: ignore[return-value]


def lone_verify_request(row: Row) -> ForwardRequest:
    """A verifier forward built for its row alone, with batch 1's own functions (verify_branch.py): a trimmed
    verifier's (`trim_verify`, either family) or one over a block with cached positions (`kv_reuse`: the row's
    ctx.cached leading positions are not queried, and its rows stay in the cache until the test settles them)."""
    st = row.state
    ctx, plan, draft = st.ctx, st.step_plan, st.draft
    if ctx.cfg.trim_verify:
        return trimmed_verify_request(ctx, st.ids, st.positions, draft.tokens, plan.span_len, st.verifier[2],
                                      plan.masks[0])
    if ctx.aligned:
        return ForwardRequest(ctx.cache, *verify_2l_inputs(ctx, st.ids, st.positions, draft.mask_idx, draft.tokens,
                                                           plan.span_len))
    return causal_verify_request(ctx, st.ids, st.positions, draft.mask_idx, draft.tokens, plan.span_len,
                                 st.verifier[2])


def tested(rows: list[Row], logits: list[torch.Tensor]) -> tuple[list[dict[str, Any]], list[Bulk]]:
    """The verify rows after their forward: q over each span and the acceptance test, both over all rows of one
    config and span length at once (`token_distribution` on their stacked logits, acceptance.py
    `acceptance_rows`; row i's uniforms from its own generator), then each row's extras and top-up. Returns what
    each row reads of its own and, read once over all rows (transfers.py `Bulk`; the rows are the shared read's
    first readers, in order), the test's outcome. Row-wise the very values `verifier_probs` and
    `acceptance_test` give it alone."""
    out: list[dict[str, Any]] = [{} for _ in rows]
    bulk: list[Bulk] = []
    buckets: dict[tuple[DecodeConfig, int], list[int]] = {}
    for j, r in enumerate(rows):
        buckets.setdefault((r.prep.cfg, r.state.step_plan.span_len), []).append(j)
    for (cfg, s), members in buckets.items():
        group = [rows[j] for j in members]
        flat = torch.cat([logits[j] for j in members]) if len(members) > 1 else logits[members[0]]
        q = token_distribution(flat, cfg, group[0].state.ctx.mask_id, owned=True).view(len(members), s, -1)
        # (a row whose masks are all in its span stacks its own tensors: no view made per row)
        drafts = torch.stack([_head(r.state.draft.tokens, s) for r in group])
        p = torch.stack([_head(r.state.draft.p, s) for r in group])
        acc = acceptance_rows(cfg.acceptance, drafts, p, q, cfg.ratio_gamma, [r.state.ctx.generator for r in group],
                              with_argmax=group[0].state.ctx.rec.detailed)
        cuts = [(k * s, (k + 1) * s) for k in range(len(members))]
        read = [Bulk("accepted", acc.accepted, members, cuts)]  # (verify_inputs' "accepted" is the test's own)
        if cfg.acceptance == "greedy_exact":  # what acceptance_test asks for: the verifier's pick per position
            read.append(Bulk("argmax_q", acc.argmax_q, members, cuts))
        bulk += read
        for j, r, q_row, acc_row in zip(members, group, q.unbind(0), acceptance_each(acc)):
            st = r.state
            _, kind, end = st.verifier
            remember_verified(st.ctx, end)  # what verifier_probs records: how far the verifier read the block
            st.waiting = acceptance_test(st.ctx, st.draft, s, st.step_plan.min_k, q_row, kind, acc_row)
            out[j] = {name: t for name, t in st.waiting.wanted.items() if name not in ("accepted", "argmax_q")}
    return out, bulk


def verified(row: Row, got: dict[str, Any], writes: TokenWrites) -> StepRecord:
    """A verify row after the shared read: the picks (the residual drawn from the row's generator) and the step's
    record; a row whose tokens are all host values (no residual pending) has them join `writes`, which the caller
    flushes, the others write their own."""
    st = row.state
    ctx, plan, draft, decided = st.ctx, st.step_plan, st.draft, st.routed
    picks, verification, pending = tested_picks(ctx, plan.start, draft, plan.masks, plan.span_len, plan.min_k,
                                                decided.got["drafts"], st.waiting, got, defer=True)
    st.draft = st.routed = st.waiting = st.verifier = None
    record = step_record(ctx, plan, decided, picks, verification, pending)
    if pending is None:
        writes.add(st.ids, plan.start, record.commits)
    return record


def shared_read(rows: list[Row], wanted: list[dict[str, Any]], bulk: Sequence[Bulk] = ()) -> list[dict[str, Any]]:
    """Every row's read of this step in one transfer (transfers.py `fetch_many`; `bulk`: parts over many rows,
    read once), counted in the batch's ledger as the thread engine counts its shared reads (on the packed path
    only)."""
    got, busy = fetch_many([r.state.ctx.reads for r in rows], wanted, bulk)
    ledger = rows[0].ledger if rows else None
    if busy and ledger is not None and (rows[0].state.ctx.x.device.type != "cpu" or HostReads.pack_on_cpu):
        ledger.reads += 1
        ledger.sequence_reads += busy
    return got


def read_pending(rows: list[Row]) -> None:
    """One shared read of what the rows still hold on the device (an AR seed, a residual draw), for those that
    hold anything: where batch 1 reads each alone before a stop rule or a block's end."""
    pending = [r for r in rows if r.state.ctx.reads.pending]
    if pending:
        shared_read(pending, [{} for _ in pending])


def verify_kind(row: Row) -> tuple[str, str, int]:
    """(forward kind, verification kind, block-relative end the verifier read) of a row's verifier
    (verify_branch.py `verifier_extent`: the 2L verifier reads the block, the causal one up to the window's end, a
    trimmed one up to its span's end)."""
    st = row.state
    plan = st.step_plan
    end = verifier_extent(st.ctx, plan.masks, plan.span_len, plan.window[1] - plan.start)[0]
    return ("verify_2l", "2l", end) if st.ctx.aligned else ("verify_causal", "causal", end)


def _head(t: torch.Tensor, n: int) -> torch.Tensor:
    """`t[:n]`, without making a view when `t` has exactly n rows (the common case: every mask is in the span)."""
    return t if int(t.shape[0]) == n else t[:n]
