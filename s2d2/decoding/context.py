"""What one step of the block loop reads and mutates (`StepContext`, laid out for a new sequence by `lay_out`), and
a step's draft on the device (`Draft`).

Shared by step.py, verifier.py, kv.py, records.py and blocks.py, which is why it lives on its own."""
from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence, Union

import torch

from ..config import DecodeConfig
from ..policies import make_policy
from .draws import Source
from .forwards import Recorder
from .layout import BlockPlan, block_plan
from .sampling import entropy
from .transfers import HostReads

__all__ = ["StepContext", "Draft", "lay_out"]


@dataclass
class StepContext:
    """What a step reads and mutates: the sequence, the cache, the policy state and the recorder."""

    model: Any
    cfg: DecodeConfig
    rec: Recorder
    generator: Source
    x: torch.Tensor  # [total] token ids, MASK where undecided
    cache: Any
    policy: Any  # None for method "diffusion"
    prompt_len: int
    block_length: Optional[int] = None  # the current block's length (varies with adaptive_block); None: cfg's
    cached: int = 0  # leading positions of the current block whose KV is already in the cache (kv_reuse)
    carried: Optional[tuple[torch.Tensor, int]] = None  # (draft logits, offset) from a fused forward, unconsumed
    tail: Optional[tuple[int, int]] = None  # [start, end) of the finished block still to cache (fused_commit)
    seen_end: Optional[int] = None  # kv_reuse: the verifier's rows [cached, seen_end) wait in the cache to settle
    masks: list[int] = field(default_factory=list)  # block-relative positions of the current block still masked,
    # ascending (block_masks builds them so and every update filters in order): a window's masks are a bisected slice
    seeded: set[int] = field(default_factory=set)  # positions an AR seed filled before their block began
    stop_hits: list[int] = field(default_factory=list)  # positions known to hold a stop id

    def __post_init__(self) -> None:
        self.stop_set = frozenset(self.model.spec.stop_ids)
        self.index = position_index(int(self.x.shape[0]), self.x.device)  # index[a:b] is arange(a, b), as a view
        self.reads: HostReads = self.rec.reads  # the recorder's (kept here: every row of every step reads through it)
        # the model's facts, read at every step of every row: plain attributes, not properties
        self.mask_id: int = self.model.spec.mask_id
        self.aligned: bool = self.model.spec.alignment == "aligned"

    @property
    def B(self) -> int:
        return self.block_length or self.cfg.block_length


def lay_out(model: Any, cfg: DecodeConfig, prompt: Union[torch.Tensor, Sequence[int]], rec: Recorder,
            generator: Source, cache: Any) -> tuple[BlockPlan, StepContext]:
    """Every loop's start, in both engines: the sequence as the prompt then masks to the plan's end, the policy
    (S2D2 only) and the context the loop's steps share. The plan refuses what its loop cannot decode. `prompt`:
    its ids on the model's device, or as host ints (a batch's rows: laid out without a tensor of their own)."""
    P = len(prompt)
    plan = block_plan(cfg, P, model.spec.alignment == "shifted")
    x = sequence_ids(prompt, plan.total, model.spec.mask_id, model.device)
    policy = make_policy(cfg) if cfg.method == "s2d2" else None
    return plan, StepContext(model, cfg, rec, generator, x, cache, policy, P)


def sequence_ids(prompt: Union[torch.Tensor, Sequence[int]], total: int, mask_id: int,
                 device: torch.device) -> torch.Tensor:
    """[total] long ids: the prompt, then the mask id. From host ints on the CPU one tensor over one host buffer
    (a batch starts a row per sequence, and each torch call costs microseconds: three calls become one)."""
    if isinstance(prompt, torch.Tensor):
        x = torch.full((total,), mask_id, dtype=torch.long, device=prompt.device)
        x[: prompt.shape[0]] = prompt
        return x
    ids = array("q", prompt)
    ids.extend(array("q", (mask_id,)) * (total - len(ids)))
    x = torch.frombuffer(ids, dtype=torch.long)  # (the tensor keeps the buffer alive; nothing else holds it)
    return x if device.type == "cpu" else x.to(device)


_INDEX: dict[torch.device, torch.Tensor] = {}  # per device, one arange that every sequence's index views


def position_index(n: int, device: torch.device) -> torch.Tensor:
    """arange(n) on `device`: a view of one shared arange (grown when a longer one is asked), so a sequence's
    start makes no tensor of its own. Nothing writes through it: the decoder only slices and reads it."""
    have = _INDEX.get(device)
    if have is None or have.shape[0] < n:
        with torch.inference_mode(False):  # an ordinary tensor: views of it are used in and out of inference mode
            have = _INDEX[device] = torch.arange(max(n, 4096), device=device)
    return have[:n]


@dataclass
class Draft:
    """A step's draft of its masks, on the device."""

    mask_idx: torch.Tensor  # [n] block-relative positions, ascending
    run: Optional[int]  # the first mask when the masks are consecutive (mask_idx is then a slice of arange)
    positions: torch.Tensor  # [B] the block's absolute positions
    probs: torch.Tensor  # [n, V] draft distribution
    tokens: torch.Tensor  # [n] drafted tokens
    p: torch.Tensor  # [n] their probabilities
    _entropy: Optional[torch.Tensor] = None

    def entropy(self) -> torch.Tensor:
        """Full-distribution entropy per mask (only `entropy_bounded` asks for it)."""
        if self._entropy is None:
            self._entropy = entropy(self.probs)
        return self._entropy
