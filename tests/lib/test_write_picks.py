"""`write_picks` (selection.py) writes exactly the step's picks into the sequence: mask i of the step, at block
position mask_idx[i] of the block starting at `start`, gets tokens[i] when it is picked (the prefix, an extra, or
one of the remasking rule's picks) and every other position keeps its value. Checked against that rule written out
on host lists, for every branch (the prefix as a slice or by index, extras, the rule's picks) and their mixes."""
from __future__ import annotations

import pytest
import torch

from s2d2.decoding.selection import StepPicks, write_picks

MASK = 99


def _expected(x: list[int], start: int, mask_idx: list[int], picked: set[int], tokens: list[int]) -> list[int]:
    out = list(x)
    for i in picked:
        out[start + mask_idx[i]] = tokens[i]
    return out


def _case(seed: int, consecutive: bool) -> tuple[list[int], int, list[int], list[int]]:
    g = torch.Generator().manual_seed(seed)
    total, start, block = 48, 16, 16
    x = torch.randint(0, 50, (total,), generator=g).tolist()
    n = int(torch.randint(1, block + 1, (1,), generator=g))
    if consecutive:
        first = int(torch.randint(0, block - n + 1, (1,), generator=g))
        mask_idx = list(range(first, first + n))
    else:
        mask_idx = sorted(torch.randperm(block, generator=g)[:n].tolist())
    for m in mask_idx:
        x[start + m] = MASK
    tokens = torch.randint(0, 50, (n,), generator=g).tolist()
    return x, start, mask_idx, tokens


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("consecutive", [True, False])
def test_writes_exactly_the_picks(seed: int, consecutive: bool) -> None:
    x, start, mask_idx, tokens = _case(seed, consecutive)
    n = len(mask_idx)
    g = torch.Generator().manual_seed(1000 + seed)
    prefix = int(torch.randint(0, n + 1, (1,), generator=g))
    extras = torch.rand(n, generator=g) < 0.3
    extras[:prefix] = False
    rest = [i for i in range(n) if i >= prefix and not extras[i]]
    order = [rest[k] for k in torch.randperm(len(rest), generator=g).tolist()]
    k = int(torch.randint(0, len(order) + 1, (1,), generator=g))
    for use_extras in (False, True):
        for use_rule, whole_order in ((False, False), (True, False), (True, True)):
            # the rule's picks as given, or as the rule's whole order with its count (selection.py `_rule`)
            rule = torch.tensor(order if whole_order else order[:k], dtype=torch.long) if use_rule else None
            sp = StepPicks(prefix=prefix, extras=extras if use_extras else None, fallback=rule,
                           fallback_n=k if whole_order else None)
            picked = set(range(prefix)) | ({i for i in range(n) if extras[i]} if use_extras else set()) \
                | (set(order[:k]) if use_rule else set())
            want = _expected(x, start, mask_idx, picked, tokens)
            for run in ([mask_idx[0], None] if consecutive else [None]):
                got = torch.tensor(x)
                write_picks(got, start, torch.tensor(mask_idx), sp, torch.tensor(tokens), run)
                assert got.tolist() == want, (prefix, use_extras, use_rule, whole_order, run)


def test_empty_rule_pick_writes_nothing() -> None:
    x, start, mask_idx, tokens = _case(3, False)
    got = torch.tensor(x)
    write_picks(got, start, torch.tensor(mask_idx), StepPicks(fallback=torch.tensor([], dtype=torch.long)),
                torch.tensor(tokens))
    assert got.tolist() == x
