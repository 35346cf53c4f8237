"""Honest AR (ar.py) as one step over every live sequence of a batch: the batch-first form of `ar_loop`.

Each step takes one forward per sequence (shared: lockstep.py runs them padded together), then, for all of them at
once, one distribution, one draw (greedy: one argmax; sampled: each sequence's own generator, so its draws are those
of its seed), one read of every token (and the detailed fields), and the records. A sequence's state is its position
and its tokens so far; the rule for each is ar.py's: the same forward shapes (a prefill, then [previous token,
MASK] at [i-1, i] on position-aligned models, the previous token alone on right-shifted ones), the same
`token_distribution`, `draw_tokens`, `ar_detail` and `ar_step_record`, the same stop rule and progress checks every
`CHECK_EVERY` tokens. So in float64 each sequence's trace is its `generate` trace apart from wall times.

Invariants: `advance` is given, in the order `requests` named them, each live row's logits [1, V] (its `last`
row), and appends exactly one forward record, one block and one step to each row, as ar_loop does per token.
"""
from __future__ import annotations

from typing import Any

import torch

from ..config import DecodeConfig
from ..models.base import ForwardRequest
from ..trace import BlockRecord
from .ar import CHECK_EVERY, ar_detail, ar_step_record
from .lockstep_rows import Asked, Row, read_rows, sampling_groups
from .result import LoopResult, number_steps
from .sampling import draw_tokens, token_distribution


def covers(cfg: DecodeConfig) -> bool:
    """Whether a config decodes with honest AR (ar.py's loop: method "ar", fused accounting)."""
    return cfg.loop == "block" and cfg.method == "ar" and cfg.ar_accounting == "fused"


def start(model: Any, row: Row) -> None:
    """Nothing to set up: an AR row's state is its position and tokens."""


def requests(model: Any, rows: list[Row]) -> list[Asked]:
    """Each row's forward of this step, in row order: ar.py's shapes exactly (recorded as block = position,
    step 0, as ar_loop records them)."""
    aligned, mask_id = model.spec.alignment == "aligned", model.spec.mask_id
    steady = [r for r in rows if r.at > r.prompt_len]
    reqs: list[ForwardRequest] = []
    if steady:  # every steady row's [previous token (, MASK)] and positions, built in a few tensor calls
        width = 2 if aligned else 1
        host_ids = [[r.tokens[-1], mask_id][:width] for r in steady]
        ids = torch.tensor(host_ids, dtype=torch.long, device=model.device).unbind(0)
        starts = torch.tensor([r.at - 1 for r in steady], dtype=torch.long, device=model.device)
        pos = (starts[:, None] + torch.arange(width, device=model.device)).unbind(0)
        reqs = [ForwardRequest(r.cache, i, p, "causal", 1, 1) for r, i, p in zip(steady, ids, pos)]
    if len(steady) == len(rows):
        return [Asked("ar", r.at, 0, req) for r, req in zip(rows, reqs)]
    out: list[Asked] = []
    at = iter(reqs)
    for r in rows:
        if r.at == r.prompt_len:
            prompt = r.prompt_ids(model)
            mask = torch.full((1,), mask_id, dtype=torch.long, device=model.device)
            ids_p = torch.cat([prompt, mask]) if aligned else prompt
            out.append(Asked("prefill", r.at, 0, ForwardRequest(
                r.cache, ids_p, torch.arange(ids_p.shape[0], device=model.device), "causal", r.prompt_len, 1)))
        else:
            out.append(Asked("ar", r.at, 0, next(at)))
    return out


def advance(model: Any, rows: list[Row], logits: list[torch.Tensor]) -> None:
    """Draw, read and record every row's token; mark the rows that finished (`Row.finish_reason`)."""
    stacked = torch.cat(logits)  # each [1, V]: every request asks for its last row only
    stops = set(model.spec.stop_ids)
    for cfg, members in sampling_groups(rows):  # rows whose sampling transform is the same share its tensor ops
        picked = stacked if len(members) == len(rows) else stacked.index_select(
            0, torch.tensor(members, device=stacked.device))
        group = [rows[j] for j in members]
        probs = token_distribution(picked, cfg, model.spec.mask_id)
        drawn = _draw(probs, cfg, group)
        got = read_rows(model, {"token": drawn, **ar_detail(group[0].rec, probs, drawn)}, len(group))
        for r, g in zip(group, got):
            _record(r, g, stops)


def cancel(row: Row) -> None:
    """The row's own forward raised StopDecoding: it ends at its last complete token (nothing of the token in
    flight was recorded), as ar_loop's rollback leaves it."""
    row.finish("cancelled", number_steps(row.steps))


def result(model: Any, row: Row) -> LoopResult:
    """The row's LoopResult as ar_loop returns it: the layout with its decoded tokens."""
    total = row.prompt_len + row.prep.cfg.gen_length
    ids = row.prep.ids + row.tokens
    x = torch.full((total,), model.spec.mask_id, dtype=torch.long)
    x[: len(ids)] = torch.tensor(ids, dtype=torch.long)
    assert row.finish_reason is not None
    return LoopResult(x, row.blocks, row.steps, row.finish_reason)


def _draw(probs: torch.Tensor, cfg: DecodeConfig, rows: list[Row]) -> torch.Tensor:
    """One token per row: the argmax of all rows at once (greedy), else a draw from each row's own generator."""
    if not cfg.do_sample:
        return draw_tokens(probs, cfg, rows[0].generator, "ar")
    return torch.cat([draw_tokens(probs[j : j + 1], cfg, r.generator, "ar") for j, r in enumerate(rows)])


def _record(r: Row, got: dict[str, Any], stops: set[int]) -> None:
    """ar_loop's bookkeeping after one token: its block and step, then its stop, check and length rules."""
    i, tok = r.at, got["token"][0]
    r.tokens.append(tok)
    r.blocks.append(BlockRecord(i, i, 1, 0))
    r.steps.append(ar_step_record(r.rec, got, tok, i))
    r.at += 1
    if tok in stops:
        r.finish("stop_token", number_steps(r.steps))
        return
    if (i - r.prompt_len + 1) % CHECK_EVERY == 0:
        reason = r.check(number_steps(r.steps))
        if reason is not None:
            r.finish(reason, r.steps)
            return
    if r.at == r.prompt_len + r.prep.cfg.gen_length:
        r.finish("length", number_steps(r.steps))
