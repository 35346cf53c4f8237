"""What the decoder needs from a model: one forward primitive over a KV cache, and the model's facts."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple, Optional, Union

import torch

ALIGNMENTS = ("aligned", "shifted")


@dataclass(frozen=True)
class QueryMask:
    """An attention mask whose cache columns are all True, given by its query block alone: `pattern` is [q, q] bool
    (True = attend). Every mask the decoder builds has this form, so it never builds the [q, cache_len + q] mask on
    the host: the dynamic backend widens the pattern, the static one writes it into its mask buffer in place.
    Patterns may be cached and shared (s2d2.models.masks); backends never write to them."""

    pattern: torch.Tensor

    @property
    def dtype(self) -> torch.dtype:
        """The mask's element type (bool), as for a mask tensor."""
        return self.pattern.dtype


# "causal": cache + causal rows; "full": cache + the whole query, bidirectional; an explicit bool mask of shape
# [q, cache_len + q] (True = attend); or a QueryMask. s2d2.models.masks builds the last two.
Attention = Union[Literal["causal", "full"], torch.Tensor, QueryMask]


class ForwardRequest(NamedTuple):
    """The arguments of one `HFModel.forward` call."""

    cache: Any
    input_ids: torch.Tensor
    positions: torch.Tensor
    attention: Attention
    keep: int
    last: Optional[int] = None
    rows: Optional[torch.Tensor] = None


@dataclass
class ModelSpec:
    """Facts the decoder needs about a checkpoint (registry entry or read from config.json)."""

    name: str
    alignment: str  # "aligned": logit i predicts token i (SDAR, 2L verifier); "shifted": logit i-1 predicts i
    mask_id: int
    stop_ids: list[int]
    vocab_size: int  # logits width
    max_positions: int
    default_block: int = 4
    use_chat_template: bool = True
    revision: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def verifier(self) -> str:
        return "2l" if self.alignment == "aligned" else "causal"

    def __post_init__(self) -> None:
        if self.alignment not in ALIGNMENTS:
            raise ValueError(f"alignment: must be one of {ALIGNMENTS}, got {self.alignment!r}")
        if not 0 <= self.mask_id < self.vocab_size:
            raise ValueError(f"mask_id: must be in [0, {self.vocab_size}), got {self.mask_id}")
