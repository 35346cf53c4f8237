"""How close each forward of a mixture-of-experts model came to choosing other experts.

A MoE layer's router picks, per token, the top groups and then the top experts by score: a discrete choice inside
the forward. Two runtimes (or two of ATen's CPU kernel sets) compute router scores a few 1e-7 apart, so where two
candidates are nearer than that, one side may run another expert: that forward's logits then differ by up to ~0.2,
far beyond the float tolerance of an otherwise identical decode (seen: `tiny-llada2`, `d2f` greedy, forward 14,
layer 4, margin 1.4e-7, under `ATEN_CPU_CAPABILITY=default`). `RouterMargins` measures, for every forward, the
smallest such margin over its tokens and layers, so a conformance test can say which steps were a coin toss for the
model itself rather than for the decoder.

The selection measured is the group-limited top-k of the routers that carry `e_score_correction_bias` (GLM-4 MoE,
the LLaDA2 family): sigmoid scores plus the bias; groups ranked by the sum of their two best scores, `topk_group`
kept; then `top_k` experts among the kept groups. A model with no such router records no margin (+inf).
"""
from __future__ import annotations

import math
from typing import Any

import torch


def selection_margin(router_logits: torch.Tensor, router: Any) -> float:
    """The smallest score gap, over the rows, at the boundary of the router's group and expert choices (float64)."""
    scores = router_logits.double().sigmoid() + router.e_score_correction_bias.double()
    rows, groups = scores.shape[0], router.num_group
    by_group = scores.view(rows, groups, -1)
    group_scores = by_group.topk(2, dim=-1)[0].sum(-1)
    ranked = group_scores.sort(-1, descending=True)[0]
    group_gap = ranked[:, router.topk_group - 1] - ranked[:, router.topk_group]
    kept = torch.zeros(rows, groups, dtype=torch.bool).scatter_(1, group_scores.topk(router.topk_group, -1)[1], True)
    open_scores = scores.masked_fill(~kept.repeat_interleave(by_group.shape[-1], 1), -math.inf)
    experts = open_scores.sort(-1, descending=True)[0]
    expert_gap = experts[:, router.top_k - 1] - experts[:, router.top_k]
    return float(torch.minimum(group_gap, expert_gap).min())


class RouterMargins:
    """Hooks on a loaded s2d2 model's transformers module: `margins[i]` is forward i's smallest router margin.

    Use as a context manager around one decode at a time (`clear()` between decodes); one lm_head call is one forward
    of the trace, which `near_ties` checks against the trace's forward count.
    """

    def __init__(self, model: Any) -> None:
        self.margins: list[float] = []
        self._current = math.inf  # the running forward's smallest margin so far
        # a forward ends at its one lm_head call (s2d2/models/read_rows.py runs the head once, over the read rows,
        # and may run the layers itself: the causal LM's own forward is not always called)
        self._handles = [model.model.lm_head.register_forward_hook(self._end)]
        for module in model.model.modules():
            if hasattr(module, "e_score_correction_bias") and hasattr(module, "topk_group"):
                self._handles.append(module.register_forward_hook(self._measure))

    def _end(self, module: Any, args: Any, out: Any) -> None:
        self.margins.append(self._current)
        self._current = math.inf

    def _measure(self, module: Any, args: Any, out: Any) -> None:
        self._current = min(self._current, selection_margin(out[0], module))

    def clear(self) -> None:
        self.margins, self._current = [], math.inf

    def near_ties(self, trace: dict[str, Any], below: float) -> frozenset[int]:
        """The forwards of `trace` (this decode) whose router margin was under `below`."""
        assert len(self.margins) == len(trace["forwards"]), (len(self.margins), len(trace["forwards"]))
        return frozenset(i for i, m in enumerate(self.margins) if m < below)

    def __enter__(self) -> "RouterMargins":
        return self

    def __exit__(self, *exc: Any) -> None:
        for handle in self._handles:
            handle.remove()
