"""A scripted stand-in for `HFModel`: hand-built logits per (position, input token), so tests can force drafts,
confidences and edits exactly. It records every forward's input ids."""
from __future__ import annotations

import torch

from s2d2.models.base import ModelSpec

V = 16
MASK = 15
STOP = 14


class ScriptedCache:
    def __init__(self) -> None:
        self.n = 0

    def get_seq_length(self) -> int:
        return self.n

    def crop(self, k: int) -> None:
        assert k < 0
        self.n += k


class ScriptedModel:
    """`script[(position, input_token)] = (token, p)`: the logit row puts probability p on `token` and spreads
    the rest uniformly over the other tokens (never the mask). Unscripted rows: a masked input predicts
    `fill(position)` with probability `fill_p`; a decoded input predicts itself with p 0.99 (nothing to edit).
    `verify_script[position] = (token, p)` overrides the rows of the 2L second half (the AR verifier's q)."""

    def __init__(self, script: dict[tuple[int, int], tuple[int, float]] | None = None, fill=None,
                 fill_p: float = 0.99, verify_script: dict[int, tuple[int, float]] | None = None,
                 block: int = 4, max_positions: int = 256) -> None:
        self.script = dict(script or {})
        self.verify_script = dict(verify_script or {})
        self.fill = fill or (lambda pos: 1 + pos % 10)
        self.fill_p = fill_p
        self.spec = ModelSpec("scripted", "aligned", MASK, [STOP], V, max_positions, default_block=block,
                              use_chat_template=False)
        self.tokenizer = None
        self.attn_implementation = "sdpa"
        self.calls: list[tuple[str, list[int], list[int]]] = []
        self.attention: list[object] = []  # what each forward was given: "causal" / "full" or a mask tensor

    device = torch.device("cpu")
    dtype = torch.float64

    def new_cache(self) -> ScriptedCache:
        return ScriptedCache()

    def row(self, pos: int, tok: int, verify: bool = False) -> torch.Tensor:
        default = (self.fill(pos), self.fill_p) if tok == MASK else (tok, 0.99)
        target, p = self.verify_script.get(pos, default) if verify else self.script.get((pos, tok), default)
        probs = torch.full((V,), (1 - p) / (V - 2), dtype=torch.float64)
        probs[MASK] = 0.0
        probs[target] = p
        return probs.clamp_min(1e-30).log()

    def forward(self, cache, input_ids, positions, attention, keep, last=None):
        ids, pos = input_ids.tolist(), positions.tolist()
        two_l = len(ids) != len(set(pos))
        self.attention.append(attention)
        self.calls.append(("2l" if two_l else "fwd", ids, pos))
        half = len(ids) // 2
        logits = torch.stack([self.row(p, t, verify=two_l and i >= half) for i, (p, t) in enumerate(zip(pos, ids))])
        cache.n += keep
        return logits[-last:] if last else logits


class PositionScripted:
    """A stub whose logits put all mass on `script[position]` (else `fill`); shifted: row r predicts position r + 1.
    Vocabulary 16, mask 15, stop 14."""

    def __init__(self, alignment: str, script: dict[int, int], fill: int = 3) -> None:
        self.spec = ModelSpec("scripted", alignment, mask_id=15, stop_ids=[14], vocab_size=16, max_positions=4096)
        self.script, self.fill, self.tokenizer = script, fill, None
        self.device, self.dtype, self.attn_implementation = torch.device("cpu"), torch.float32, "sdpa"

    def new_cache(self) -> ScriptedCache:
        return ScriptedCache()

    def forward(self, cache, ids, positions, attention, keep, last=None):
        cache.n += keep
        target = positions + (1 if self.spec.alignment == "shifted" else 0)
        tokens = torch.tensor([self.script.get(int(p), self.fill) for p in target])
        logits = torch.full((ids.shape[0], 16), -30.0)
        logits[torch.arange(ids.shape[0]), tokens] = 30.0
        return logits[-last:] if last else logits
