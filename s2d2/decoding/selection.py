"""What a step decodes (steps 6-8 of docs/algorithm.md, 'One step', and 'Acceptance, first rejection and the residual'):
device work before the step's read, host bookkeeping after it, device writes.

Commit order, as docs/algorithm.md, 'One step' lists the picks: verify picks (the accepted prefix, the resampled first
rejection, ratio extras) left to right, high-confidence extras left to right, then the remasking rule's picks in
selection order. The `*_inputs` functions name the device tensors the host needs (added to the step's one fetch); the
`*_picks` functions rebuild the ordered picks from what was read; `write_picks` scatters them into the sequence,
indexing only with device tensors sliced by host counts (an index built from a host list would be an upload).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import torch
from torch import Tensor

from ..config import DecodeConfig
from .remasking import choose, rule_inputs
from .acceptance import Acceptance, first_rejected

Pick = tuple[int, str]  # (index in the step's mask list, how)


@dataclass
class StepPicks:
    picks: list[Pick] = field(default_factory=list)  # commit order
    prefix: int = 0  # the first `prefix` masks are decoded by verification (accepted + resampled)
    extras: Optional[Tensor] = None  # [n] bool: extras decoded with their drafts (device)
    fallback: Optional[Tensor] = None  # indices into the masks of the rule's picks (device), or its whole order...
    fallback_n: Optional[int] = None  # ...of which the first fallback_n are the picks (cut only by a device write)
    ruled_from: Optional[int] = None  # picks made before the remasking rule ran (None: it never ran)


def fallback_k(sp: StepPicks, min_k: int) -> int:
    """The trace's `fallback_k`: what the step still needed when the remasking rule ran (every pick before the
    rule's is a verify pick or an extra, never "fallback" or "threshold": `_rule` runs once, last)."""
    return max(0, min_k - (len(sp.picks) if sp.ruled_from is None else sp.ruled_from))


def skip_inputs(cfg: DecodeConfig, p: Tensor, entropy: Callable[[], Tensor],
                n_hi: Optional[Tensor] = None) -> dict[str, Tensor]:
    """A non-verify step (exactly a baseline step, plus high-confidence extras when on): its device work.
    `n_hi`: the policy's count of masks with p > τ, which is the dynamic rule's count when every mask competes."""
    hi = p > cfg.confidence_threshold if cfg.always_check_high_conf else None
    out = rule_inputs(cfg.remasking, p, entropy, cfg.confidence_threshold, cfg.eb_gamma,
                      None if hi is None else ~hi, above=n_hi if hi is None else None)
    return out if hi is None else {**out, "hiconf": hi}


def skip_picks(cfg: DecodeConfig, got: dict[str, Any], n: int, min_k: int, inputs: dict[str, Tensor]) -> StepPicks:
    sp = StepPicks()
    candidates = list(range(n))
    if "hiconf" in got:
        sp.picks = [(i, "hiconf_extra") for i in range(n) if got["hiconf"][i]]
        candidates = [i for i in range(n) if not got["hiconf"][i]]
        sp.extras = inputs["hiconf"]
    _rule(cfg, sp, got, inputs, candidates, max(0, min_k - len(sp.picks)), topup=False)
    return sp


def verify_inputs(cfg: DecodeConfig, acc: Acceptance, p: Tensor, entropy: Callable[[], Tensor],
                  min_k: int) -> dict[str, Tensor]:
    """A verify step: the acceptance outcome over the span (the first `acc.ratio.shape[0]` masks), and, when
    configured, the extras and the top-up (their device work needs the first rejection, found by a cumulative
    product, so no read comes between)."""
    out = {"accepted": acc.accepted}
    if cfg.ratio_threshold is None and not cfg.always_check_high_conf and cfg.allow_resample and min_k <= 1:
        return out  # a verify step decodes >= 1 token: nothing left to top up, and no extras
    n, s = p.shape[0], acc.ratio.shape[0]
    ar = torch.arange(n, device=p.device)
    first = torch.cumprod(acc.accepted.to(torch.long), dim=0).sum()
    rejected = first < s
    taken = ar < (first + rejected.to(torch.long) if cfg.allow_resample else first)
    if cfg.ratio_threshold is not None:
        high = torch.cat([acc.ratio >= cfg.ratio_threshold, torch.zeros(n - s, dtype=torch.bool, device=p.device)])
        out["ratio_extra"] = high & (ar > first) & (ar < s) & rejected
        taken = taken | out["ratio_extra"]
    if cfg.always_check_high_conf:
        out["hiconf"] = (p > cfg.confidence_threshold) & ~taken
        taken = taken | out["hiconf"]
    out.update(rule_inputs(cfg.remasking, p, entropy, cfg.confidence_threshold, cfg.eb_gamma, ~taken))
    return out


def verify_picks(cfg: DecodeConfig, got: dict[str, Any], n: int, min_k: int,
                 inputs: dict[str, Tensor]) -> tuple[StepPicks, int]:
    """The picks of a verify step and its accepted length (= the first rejected index, or the span length)."""
    accepted = got["accepted"]
    first = first_rejected(accepted)
    sp = StepPicks([(i, "accepted") for i in range(first)])
    if first < len(accepted) and cfg.allow_resample:
        sp.picks.append((first, "resampled"))
    sp.prefix = len(sp.picks)
    for name, how in (("ratio_extra", "ratio_extra"), ("hiconf", "hiconf_extra")):
        if name in got:
            sp.picks += [(i, how) for i in range(n) if got[name][i]]
            sp.extras = inputs[name] if sp.extras is None else sp.extras | inputs[name]
    if "order" in got:  # the top-up was prepared (verify_inputs)
        taken = {i for i, _ in sp.picks}
        candidates = [i for i in range(n) if i not in taken]
        _rule(cfg, sp, got, inputs, candidates, max(0, min_k - len(sp.picks)), topup=True)
    return sp, first


def _rule(cfg: DecodeConfig, sp: StepPicks, got: dict[str, Any], inputs: dict[str, Tensor], candidates: list[int],
          k: int, topup: bool) -> None:
    picks, how = choose(cfg.remasking, k, candidates, got, topup)
    sp.ruled_from = len(sp.picks)
    sp.picks += [(i, how) for i in picks]
    if picks:
        order = inputs.get("order")
        if order is None:  # sequential over every mask: the first k masks
            sp.prefix = len(picks)
        else:
            sp.fallback, sp.fallback_n = order, len(picks)  # (a batch-first row writes from its commits: no cut)


def write_picks(x: Tensor, start: int, mask_idx: Tensor, sp: StepPicks, tokens: Tensor,
                run: Optional[int] = None) -> None:
    """Scatter a step's decoded tokens (`tokens`: per mask, drafts with the resampled token in place) into `x`.
    `run`: the first mask's block position when the masks are consecutive (the prefix is then a slice).

    The extras and the rule's picks are written by one `index_copy_` of gathered values (`index_select`), not
    `x[idx] = v`: the same writes (each index list is duplicate-free: mask positions, and the rule's order cut to
    its picks, so a copy and an index_put agree), with about half the host time per write (issue 37: every
    baseline row of every step pays it). The prefix keeps the indexing form, which costs no more."""
    if sp.prefix and run is not None:
        x[start + run : start + run + sp.prefix] = tokens[: sp.prefix]
    elif sp.prefix:
        x[mask_idx[: sp.prefix] + start] = tokens[: sp.prefix]
    if sp.extras is not None:
        at = mask_idx + start
        x.index_copy_(0, at, torch.where(sp.extras, tokens, x.index_select(0, at)))
    if sp.fallback is not None:
        rule = sp.fallback if sp.fallback_n is None else sp.fallback[: sp.fallback_n]
        x.index_copy_(0, mask_idx.index_select(0, rule).add_(start), tokens.index_select(0, rule))
