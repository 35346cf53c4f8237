"""Training objectives for the tiny model.

Stage 1, `ar_loss`: plain causal next-token prediction (the logit at i predicts token i+1).

Stage 2, `sdar_loss`: SDAR-style in-place (position-aligned) block diffusion: the logit at position i predicts
the token AT position i; masked positions are input as the mask token. Each row uses the BD3-LM layout
`[x_t ; x_0]` (length 2L, both halves at positions 0..L-1) with a bool SDPA mask:

* noisy row i sees the noisy positions of its own block (bidirectional) and the clean blocks strictly before it;
* clean row i sees the clean blocks up to and including its own (block-causal), or, for `causal_clean` rows, the
  clean positions j <= i (robustness to caches written causally);
* no row of the clean half sees the noisy half.

An AR row is the special case B = 1 with every position masked: the MASK at position i sees x_<i and itself,
exactly the model's AR mode (the 2L verifier's second half). The loss is cross-entropy on masked positions only.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F


def ar_loss(model, ids: torch.Tensor) -> torch.Tensor:
    """Causal LM loss on [N, L] token ids."""
    hidden = model.model(input_ids=ids).last_hidden_state
    logits = model.lm_head(hidden[:, :-1])
    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))


def bd_attention_mask(L: int, block: int, causal_clean: bool = False, device=None) -> torch.Tensor:
    """Bool [2L, 2L] mask (True = attend) for the `[x_t ; x_0]` layout with block size `block`."""
    i = torch.arange(L, device=device)
    bi = i // block
    same_block = bi[:, None] == bi[None, :]
    earlier_block = bi[:, None] > bi[None, :]
    if causal_clean:
        clean_clean = i[:, None] >= i[None, :]
    else:
        clean_clean = bi[:, None] >= bi[None, :]
    top = torch.cat([same_block, earlier_block], dim=1)  # noisy rows: [noisy cols | clean cols]
    bottom = torch.cat([torch.zeros(L, L, dtype=torch.bool, device=device), clean_clean], dim=1)
    return torch.cat([top, bottom], dim=0)


def sample_block_mask(L: int, block: int, gen: torch.Generator, t_min: float = 0.0, t_max: float = 1.0
                      ) -> torch.Tensor:
    """Bool [L] noise mask: per block a level t ~ U[t_min, t_max]; at least one masked token per block."""
    nb = L // block
    t = t_min + (t_max - t_min) * torch.rand(nb, generator=gen)
    u = torch.rand(nb, block, generator=gen)
    m = u < t[:, None]
    # guarantee >= 1 masked position per block (the lowest u), so every block contributes a target
    first = u.argmin(dim=1)
    m[torch.arange(nb), first] = True
    return m.reshape(L)


def make_sdar_batch(ids: torch.Tensor, gen: torch.Generator, mask_id: int, p_ar: float = 0.4,
                    blocks: tuple[int, ...] = (4, 8, 16), p_causal_clean: float = 0.05,
                    complementary: bool = True, t_min: float = 0.0, t_max: float = 1.0):
    """Build (input_ids [N,2L], positions [N,2L], attn [N,1,2L,2L], targets [N,L] with -100 off-mask).

    With `complementary`, each block-diffusion sequence yields two rows (mask m and its complement within the
    block structure) so every token is a target once; AR rows (B = 1, all masked) yield one row.
    """
    n, L = ids.shape
    rows_ids, rows_mask, rows_attn = [], [], []
    for r in range(n):
        x0 = ids[r]
        if torch.rand(1, generator=gen).item() < p_ar:
            m = torch.ones(L, dtype=torch.bool)
            causal = True  # for B = 1 block-causal == causal
            masks = [m]
            attn = bd_attention_mask(L, 1, causal_clean=True)
        else:
            b = blocks[int(torch.randint(len(blocks), (1,), generator=gen))]
            causal = torch.rand(1, generator=gen).item() < p_causal_clean
            m = sample_block_mask(L, b, gen, t_min, t_max)
            masks = [m]
            if complementary:
                mc = ~m
                # keep >= 1 target per block in the complement too
                mb = mc.view(L // b, b)
                empty = ~mb.any(dim=1)
                if empty.any():
                    mb[empty, 0] = True
                masks.append(mb.reshape(L))
            attn = bd_attention_mask(L, b, causal_clean=causal)
        for mm in masks:
            xt = torch.where(mm, torch.full_like(x0, mask_id), x0)
            rows_ids.append(torch.cat([xt, x0]))
            rows_mask.append(mm)
            rows_attn.append(attn)
    inp = torch.stack(rows_ids)
    msk = torch.stack(rows_mask)
    attn = torch.stack(rows_attn)[:, None]
    pos = torch.arange(L).repeat(2)[None].expand(inp.shape[0], -1).contiguous()
    targets = torch.where(msk, ids.new_tensor(0) + inp[:, L:], torch.full_like(msk, -100, dtype=ids.dtype))
    return inp, pos, attn, targets


def sdar_forward_logits(model, inp, pos, attn) -> torch.Tensor:
    """Logits of the noisy half [N, L, V] (the clean half's logits are never computed)."""
    L = inp.shape[1] // 2
    hidden = model.model(input_ids=inp, position_ids=pos, attention_mask=attn).last_hidden_state
    return model.lm_head(hidden[:, :L])


def sdar_loss(model, inp, pos, attn, targets) -> torch.Tensor:
    """Mean cross-entropy over masked (target != -100) positions; lm_head only on those positions."""
    L = inp.shape[1] // 2
    hidden = model.model(input_ids=inp, position_ids=pos, attention_mask=attn).last_hidden_state[:, :L]
    sel = targets != -100
    logits = model.lm_head(hidden[sel])
    return F.cross_entropy(logits.float(), targets[sel])


def corrupt_visible(inp: torch.Tensor, targets: torch.Tensor, gen: torch.Generator, mask_id: int, p_edit: float,
                    p_keep: float, vocab: int, first_regular: int, digit_ids: torch.Tensor
                    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The editing (token-to-token) objective on top of a block-diffusion batch (LLaDA2.1-style self-correction).

    In the noisy half, each visible (unmasked) token is replaced with probability `p_edit` by a wrong token and
    becomes a target for its original token: half the time a uniformly random regular token, half the time a
    plausible one (a digit by another digit, any other token by a token drawn from the same row). Of the visible
    tokens left alone, a fraction `p_keep` become targets for themselves, so that at decode time a confident
    *different* prediction at a filled position means "this token is wrong" (an edit), not noise from an
    untrained output. Returns (input ids, targets, corrupted flags [N, L]).
    """
    n, two_l = inp.shape
    L = two_l // 2
    noisy, clean = inp[:, :L], inp[:, L:]
    visible = (targets == -100) & (noisy != mask_id)
    if p_edit <= 0 and p_keep <= 0:
        return inp, targets, torch.zeros_like(visible)
    u = torch.rand(n, L, generator=gen)
    corrupt = visible & (u < p_edit)
    keep = visible & ~corrupt & (torch.rand(n, L, generator=gen) < p_keep)
    uniform = torch.randint(first_regular, vocab, (n, L), generator=gen)
    is_digit = torch.isin(clean, digit_ids)
    other_digit = digit_ids[torch.randint(len(digit_ids), (n, L), generator=gen)]
    from_row = torch.gather(clean, 1, torch.randint(L, (n, L), generator=gen))
    plausible = torch.where(is_digit, other_digit, from_row)
    wrong = torch.where(torch.rand(n, L, generator=gen) < 0.5, uniform, plausible)
    corrupt &= (wrong != clean) & (wrong != mask_id)  # a draw that equals the original is no corruption
    new_noisy = torch.where(corrupt, wrong, noisy)
    new_targets = torch.where(corrupt | keep, clean, targets)
    return torch.cat([new_noisy, clean], dim=1), new_targets, corrupt
