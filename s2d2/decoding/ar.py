"""An honest autoregressive decoder: one forward per token.

Each forward commits token i-1 and queries token i together, as any KV-cached AR decoder does. For the
position-aligned family the query is a MASK at position i (the model's block-size-1 mode) whose KV is cropped;
for the right-shifted family it is the plain next-token logit. The prefill forward also yields the first token.
"""
from __future__ import annotations

from typing import Any, Callable

import torch

from ..config import DecodeConfig
from ..trace import BlockRecord, Commit, MaskDraft, StepRecord
from ..estimators import normalized_entropy, top2_margin
from .draws import Source
from .forwards import Recorder, top_k
from .result import Kept, LoopResult, StopDecoding, number_steps
from .sampling import draw_tokens, token_distribution

CHECK_EVERY = 8  # tokens between progress callbacks


@torch.inference_mode()  # no autograd bookkeeping on any op of the loop
def ar_loop(model: Any, cfg: DecodeConfig, prompt: torch.Tensor, rec: Recorder, generator: Source,
            check: Callable[[list[StepRecord]], str | None]) -> LoopResult:
    P, G, mask_id = int(prompt.shape[0]), cfg.gen_length, model.spec.mask_id
    x = torch.full((P + G,), mask_id, dtype=torch.long, device=prompt.device)
    x[:P] = prompt
    steps: list[StepRecord] = []
    blocks: list[BlockRecord] = []
    kept = Kept(rec, x, blocks, steps)
    try:
        return _ar_tokens(model, cfg, prompt, rec, generator, check, x, blocks, steps, kept)
    except StopDecoding:
        return LoopResult(x, *kept.restore(mask_id), "cancelled")


def _ar_tokens(model: Any, cfg: DecodeConfig, prompt: torch.Tensor, rec: Recorder, generator: Source,
               check: Callable[[list[StepRecord]], str | None], x: torch.Tensor, blocks: list[BlockRecord],
               steps: list[StepRecord], kept: Kept) -> LoopResult:
    P, G, mask_id = int(prompt.shape[0]), cfg.gen_length, model.spec.mask_id
    aligned = model.spec.alignment == "aligned"
    cache = model.new_cache()
    mask = torch.full((1,), mask_id, dtype=torch.long, device=x.device)
    stops = set(model.spec.stop_ids)
    for i in range(P, P + G):
        kept.mark()  # every token so far is whole
        if i == P:
            ids = torch.cat([prompt, mask]) if aligned else prompt
            logits = rec.forward("prefill", i, 0, cache, ids, torch.arange(ids.shape[0], device=x.device),
                                 "causal", keep=P, last=1)
        else:
            ids = torch.cat([x[i - 1 : i], mask]) if aligned else x[i - 1 : i]
            logits = rec.forward("ar", i, 0, cache, ids, torch.arange(i - 1, i - 1 + ids.shape[0], device=x.device),
                                 "causal", keep=1, last=1)
        probs = token_distribution(logits[-1:], cfg, mask_id)
        token = draw_tokens(probs, cfg, generator, "ar")
        x[i] = token[0]
        got = rec.reads.fetch({"token": token[0], **ar_detail(rec, probs, token)})  # the step's one read
        tok = got["token"]
        blocks.append(BlockRecord(i, i, 1, 0))
        steps.append(ar_step_record(rec, got, tok, i))
        if tok in stops:
            return LoopResult(x, blocks, number_steps(steps), "stop_token")
        if (i - P + 1) % CHECK_EVERY == 0:
            reason = check(number_steps(steps))
            if reason is not None:
                return LoopResult(x, blocks, steps, reason)
    return LoopResult(x, blocks, number_steps(steps), "length")


def ar_detail(rec: Recorder, probs: torch.Tensor, token: torch.Tensor) -> dict[str, torch.Tensor]:
    """The detailed record's device values of each row's token (probs [n, V], token [n]): "stats" [n, 3] (p,
    normalized entropy, top-2 margin) and the top-k rows. Row-wise, so n sequences of a batch (lockstep.py) get
    exactly what each one's batch-1 step computes."""
    if not rec.detailed:
        return {}
    stats = torch.stack([probs.gather(-1, token[:, None])[:, 0], normalized_entropy(probs), top2_margin(probs)],
                        dim=1)
    return {"stats": stats, **top_k(probs)}


def ar_step_record(rec: Recorder, got: dict, token: int, position: int) -> StepRecord:
    text = rec.text(token) if rec.detailed else ""
    drafts: list[MaskDraft] = []
    if rec.detailed:
        p, ent, margin = got["stats"]
        drafts = [MaskDraft(position, token, text, p, ent, margin, rec.candidate_rows(got["top_ids"],
                                                                                      got["top_probs"], 1)[0])]
    return StepRecord(-1, position, 0, [position, position + 1], [rec.last_index], [position], drafts,
                      [position, 1], None, None, None, 0, [Commit(position, token, text, "ar")])
