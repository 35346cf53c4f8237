"""Which query rows a forward computes: the rows whose logits are read, and the rows those need (issue 37).

A request (`ForwardRequest`) says which of its logits the caller reads: the last `last` query rows (all when
None), of those the `rows` picked (all when None), in that order. Everything else a forward could compute for the
request is waste nobody reads, and on the CPU, where every query token is real work, it is the batch's cost:

* **The head.** The final norm's output goes through the lm_head (hidden -> vocab, the widest matmul of a small
  model) only at the read rows: a draft row reads its masks, a 2L verify row its span, a commit or prefill row one
  logit, so a batch of such rows reads about a third of its query tokens or less.
* **Rows nobody needs.** A query row must run through the layers only when its logits are read, its keys and
  values are kept in the cache (the first `keep` rows), or a row that must run attends to it (its keys and values
  feed that row at every layer): the closure of the read and kept rows under the query pattern. Every other row
  is dropped before the forward. The 2L verifier (docs/algorithm.md, 'The 2L verifier') is where this pays: its
  second half holds a MASK per block position, and only the span's rows are read, each seeing the first half
  before its own position, so the first half after the span's last position and the second half outside the span
  feed nothing read. Dropping them changes no read logit: a dropped row is a column no kept row attends (an exact
  zero in its softmax), so the read rows differ from the full forward's only by the kernels' summation order over
  a smaller shape (float round-off).

Rows are dropped only for dense models (`may_cut`) and only on the CPU, where the request's indices are host
values already; on an accelerator finding them would wait for the device (a sync per forward), and a forward there
is bound by reading the weights, not by its query tokens. The head runs over the read rows on every device (index
arithmetic, no host read), and the last layer too where dense_layers.py knows the layout. Batch 1 (`HFModel.forward`)
and the padded batch forward (batch_forward.py) both plan their rows here: one rule.
"""
from __future__ import annotations

from typing import Any, NamedTuple, Optional, Sequence

import torch

from .base import Attention, ForwardRequest, QueryMask
from .dense_layers import body, light_layers
from .masks import causal_pattern


class RowPlan(NamedTuple):
    """A request as the forward runs it: `request` (its rows possibly cut to the needed ones, `last` and `rows`
    then spent) and `reads`, the read rows' indices in that request's query, in the order the caller wants their
    logits (None: every row, in order)."""

    request: ForwardRequest
    reads: Optional[torch.Tensor]


def may_cut(model: Any) -> bool:
    """Whether `model`'s forwards may drop rows: only for the dense layer layouts dense_layers.py knows, where every
    matmul runs in the model's dtype. A MoE router computes in float32 whatever that dtype, and a float32 row's
    last bits depend on how many rows share its matmul, so there a cut would move a float64 decode's trace by
    ~1e-9 between batch 1 and a batch (whose members are cut to other widths); its forwards keep every row."""
    return light_layers(model)


def read_index(q: int, last: Optional[int], rows: Optional[torch.Tensor],
               device: torch.device) -> Optional[torch.Tensor]:
    """The query rows whose logits a request reads, in the order it reads them: rows[k] of the last `last` rows;
    None when it reads every row in order."""
    if rows is None and (last is None or last >= q):
        return None
    at = torch.arange(q - (last or q), q, device=device)
    return at if rows is None else at.index_select(0, rows.to(device))


def needed_rows(pattern: torch.Tensor, reads: torch.Tensor, keep: int) -> torch.Tensor:
    """Bool [q]: the rows a forward must run to give `reads` and keep the first `keep` rows' keys and values: those
    rows and, transitively, every row one of them attends in `pattern` ([q, q] bool, True = attend)."""
    need = torch.zeros(pattern.shape[0], dtype=torch.bool)
    need[reads] = True
    need[:keep] = True
    while True:  # a row's keys/values at every layer come from that row's hidden states: attend = need
        grown = need | pattern[need].any(0)
        if bool(torch.equal(grown, need)):
            return need
        need = grown


def query_pattern(req: ForwardRequest, cache_len: int) -> Optional[torch.Tensor]:
    """The request's [q, q] query pattern (True = attend), or None when nothing can be cut: every row sees every
    query row ("full", so every row is needed whenever one is), or the mask has the wrong shape."""
    att, q = req.attention, int(req.input_ids.shape[0])
    if isinstance(att, str):
        return causal_pattern(q) if att == "causal" else None
    whole, shape = (att.pattern, (q, q)) if isinstance(att, QueryMask) else (att, (q, cache_len + q))
    if tuple(whole.shape) != shape:
        return None  # malformed: cut nothing, and the forward's own check says what is wrong
    return whole[:, cache_len:] if whole is att else whole


def cut_attention(req: ForwardRequest, keep_rows: torch.Tensor, cache_len: int) -> Attention:
    """The request's attention over `keep_rows` (ascending) only: a causal pattern stays causal (the rows keep
    their order), a pattern or mask loses the dropped rows and their columns."""
    att = req.attention
    if isinstance(att, str):
        return att
    if isinstance(att, QueryMask):
        return QueryMask(att.pattern.index_select(0, keep_rows).index_select(1, keep_rows))
    cols = torch.cat([torch.arange(cache_len, device=att.device), cache_len + keep_rows.to(att.device)])
    return att.index_select(0, keep_rows.to(att.device)).index_select(1, cols)


def plan_rows(req: ForwardRequest, cache_len: int, cut: bool) -> RowPlan:
    """What the forward of `req` runs (module docstring): with `cut` (`may_cut`) and on the CPU, without the rows
    nobody needs; the read rows' indices in the query it runs."""
    q, device = int(req.input_ids.shape[0]), req.input_ids.device
    reads = read_index(q, req.last, req.rows, device)
    plain = req._replace(last=None, rows=None)
    if reads is None or not cut or device.type != "cpu" or req.keep >= q:
        return RowPlan(plain, reads)
    pattern = query_pattern(req, cache_len)
    if pattern is None:
        return RowPlan(plain, reads)
    need = needed_rows(pattern.cpu(), reads, req.keep)
    if bool(need.all()) or not bool(need.any()):  # nothing to cut, or a forward that reads and keeps nothing
        return RowPlan(plain, reads)
    kept = need.nonzero().squeeze(1)
    short = plain._replace(input_ids=req.input_ids.index_select(0, kept),
                           positions=req.positions.index_select(0, kept), attention=cut_attention(req, kept, cache_len))
    return RowPlan(short, torch.searchsorted(kept, reads))


def selection(reads: Sequence[torch.Tensor]) -> torch.Tensor:
    """The read rows [N, R] of a batch (R = the most any row reads), a short row padded with its own first read
    (row 0 when it reads nothing; one row each when no row reads anything): a row computed twice gives the same
    values."""
    width = max(1, *(int(a.shape[0]) for a in reads))  # a layer over no row at all would not run
    return torch.stack([torch.cat([a, (a[:1] if a.shape[0] else a.new_zeros(1)).expand(width - a.shape[0])])
                        for a in reads])


def head_logits(model: Any, reads: Sequence[Optional[torch.Tensor]], input_ids: torch.Tensor,
                position_ids: torch.Tensor, attention_mask: Optional[torch.Tensor], cache: Any) -> torch.Tensor:
    """Run a transformers causal LM on [N, Q] inputs with its head only at each batch row's `reads` (indices
    into its query rows, or None: all): logits [rows read, V], batch row by batch row in the order asked; [N, Q, V]
    when every entry is None. The last layer runs over the read rows alone where dense_layers.py can."""
    n, q = input_ids.shape
    if all(a is None for a in reads):
        return model.lm_head(body(model, None, input_ids, position_ids, attention_mask, cache))
    at = [torch.arange(q, device=input_ids.device) if a is None else a for a in reads]
    hidden = body(model, selection(at), input_ids, position_ids, attention_mask, cache)
    flat = torch.cat([i * q + a for i, a in enumerate(at)])
    return model.lm_head(hidden.reshape(n * q, -1).index_select(0, flat))
