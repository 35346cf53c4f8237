"""Log-likelihoods in the model's AR mode (block size 1), for lm-eval's `loglikelihood` requests.

Which logit predicts a token depends on the family (`ModelSpec.alignment`):

* position-aligned (SDAR, LLaDA2, the bundled tiny): token i is predicted by a MASK query *at position i* that sees
  the causally encoded tokens before it and itself: the model's block-size-1 mode, exactly what the AR decoder
  (decoding/ar.py) and the second half of the 2L verifier (docs/algorithm.md, 'The 2L verifier') read. A whole
  continuation c_0..c_{n-1} is scored in one forward of the 2L layout, `[c_0 .. c_{n-1} | MASK x n]` at the
  continuation's positions twice, after a causal prefill of the context: row n + i is the MASK at c_i's position.
* right-shifted (Fast-dLLM v2): the logit at i - 1 predicts token i: the context's last logit scores c_0 and one
  causal forward over c_0 .. c_{n-2} scores the rest.

Probabilities are the decoder's greedy distribution: temperature 1, no top-k / top-p, the mask token's logit
excluded (it is never drawn), so `greedy` says whether greedy AR decoding would produce the continuation.
Continuations that share a context share its prefill and are scored together, block-diagonally, in forwards of at
most `MAX_QUERY_ROWS` query rows; a longer continuation is scored in chunks that extend the cache as they go.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import torch

from ..models.base import QueryMask
from ..models.masks import causal_pattern, verify_2l_pattern

MAX_QUERY_ROWS = 256  # query rows per scoring forward (logits are rows x vocabulary floats)


@dataclass(frozen=True)
class Scored:
    logprob: float  # sum of the continuation's token log-probabilities
    greedy: bool  # every token is the argmax of its distribution


def log_probs(logits: torch.Tensor, mask_id: int) -> torch.Tensor:
    """[n, V] logits -> log-probabilities with the mask token excluded."""
    logits = logits.float().clone()
    logits[:, mask_id] = -torch.inf
    return torch.log_softmax(logits, dim=-1)


def _pick(lp: torch.Tensor, targets: torch.Tensor) -> tuple[float, bool]:
    picked = lp.gather(1, targets[:, None])[:, 0]
    return float(picked.sum()), bool((lp.argmax(dim=-1) == targets).all())


def query_rows(n: int, aligned: bool) -> int:
    """Query rows one continuation of n tokens needs: 2n for the 2L layout, n - 1 for the shifted causal pass."""
    return 2 * n if aligned else n - 1


@torch.inference_mode()
def score_continuations(model: Any, context: Sequence[int], continuations: Sequence[Sequence[int]],
                        max_rows: int = MAX_QUERY_ROWS) -> tuple[list[Scored], int]:
    """Score each continuation after `context` (token ids, both non-empty); returns the scores and the forwards
    spent. The caller keeps context + continuation within the model's context length."""
    if not context or any(len(c) == 0 for c in continuations):
        raise ValueError("score_continuations: the context and every continuation need at least one token")
    aligned = model.spec.alignment == "aligned"
    device, P = model.device, len(context)
    cache = model.new_cache()
    ctx = torch.tensor(list(context), dtype=torch.long, device=device)
    first = log_probs(model.forward(cache, ctx, torch.arange(P, device=device), "causal", keep=P, last=1),
                      model.spec.mask_id)
    forwards = 1
    out: list[Scored | None] = [None] * len(continuations)
    short = [i for i, c in enumerate(continuations) if query_rows(len(c), aligned) <= max_rows]
    for group in _groups(short, continuations, aligned, max_rows):
        scores, spent = _score_group(model, cache, P, first, [continuations[i] for i in group], aligned)
        forwards += spent
        for i, s in zip(group, scores):
            out[i] = s
    for i, c in enumerate(continuations):
        if out[i] is None:
            out[i], spent = _score_long(model, cache, P, first, c, aligned, max_rows)
            forwards += spent
    del cache  # a static backend's storage is leased until its handle goes
    return [s for s in out if s is not None], forwards


def _groups(indices: list[int], continuations: Sequence[Sequence[int]], aligned: bool,
            max_rows: int) -> list[list[int]]:
    groups: list[list[int]] = []
    rows = max_rows + 1
    for i in indices:
        need = query_rows(len(continuations[i]), aligned)
        if rows + need > max_rows:
            groups.append([])
            rows = 0
        groups[-1].append(i)
        rows += need
    return groups


def _score_group(model: Any, cache: Any, P: int, first: torch.Tensor, conts: list[Sequence[int]],
                 aligned: bool) -> tuple[list[Scored], int]:
    """One block-diagonal forward over every continuation of the group (none when all are single tokens of a
    right-shifted model: the context's last logit scores them)."""
    device, mask_id = model.device, model.spec.mask_id
    ids: list[int] = []
    positions: list[int] = []
    patterns: list[torch.Tensor] = []
    reads: list[tuple[int, int]] = []  # (first row, rows) of each continuation's predicting rows
    for c in conts:
        n, offset = len(c), len(ids)
        if aligned:
            ids += list(c) + [mask_id] * n
            positions += list(range(P, P + n)) * 2
            patterns.append(verify_2l_pattern(n, device))
            reads.append((offset + n, n))
        else:
            ids += list(c[:-1])
            positions += list(range(P, P + n - 1))
            if n > 1:
                patterns.append(causal_pattern(n - 1, device))
            reads.append((offset, n - 1))
    lp = None
    if ids:
        logits = model.forward(cache, torch.tensor(ids, dtype=torch.long, device=device),
                               torch.tensor(positions, dtype=torch.long, device=device),
                               QueryMask(torch.block_diag(*patterns)), keep=0)
        lp = log_probs(logits, mask_id)
    scores = []
    for c, (row, rows) in zip(conts, reads):
        targets = torch.tensor(list(c), dtype=torch.long, device=device)
        picked = lp[row:row + rows] if lp is not None else first[:0]
        scores.append(Scored(*_pick(picked if aligned else torch.cat([first, picked]), targets)))
    return scores, int(bool(ids))


def _score_long(model: Any, cache: Any, P: int, first: torch.Tensor, c: Sequence[int], aligned: bool,
                max_rows: int) -> tuple[Scored, int]:
    """A continuation longer than one forward: chunks whose causal part stays cached for the next chunk; the cache
    is cropped back to the context afterwards."""
    device, mask_id = model.device, model.spec.mask_id
    chunk = max(1, max_rows // 2 if aligned else max_rows)
    total, greedy, forwards = 0.0, True, 0
    tokens = torch.tensor(list(c), dtype=torch.long, device=device)
    if not aligned:  # c_0 from the context's last logit; the chunks read c_1 .. c_{n-1}
        total, greedy = _pick(first, tokens[:1])
    inputs = tokens if aligned else tokens[:-1]
    for a in range(0, int(inputs.shape[0]), chunk):
        piece = inputs[a:a + chunk]
        m = int(piece.shape[0])
        pos = torch.arange(P + a, P + a + m, device=device)
        if aligned:
            ids = torch.cat([piece, torch.full((m,), mask_id, dtype=torch.long, device=device)])
            logits = model.forward(cache, ids, torch.cat([pos, pos]), QueryMask(verify_2l_pattern(m, device)),
                                   keep=m, last=m)
            s, g = _pick(log_probs(logits, mask_id), piece)
        else:
            logits = model.forward(cache, piece, pos, "causal", keep=m)
            s, g = _pick(log_probs(logits, mask_id), tokens[a + 1:a + 1 + m])
        total, greedy, forwards = total + s, greedy and g, forwards + 1
    grown = cache.get_seq_length() - P
    if grown:
        cache.crop(-grown)
    return Scored(total, greedy), forwards
